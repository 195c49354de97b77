package app

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/config"
)

// TestStopEndsRequestsStillRunningAfterTheGrace: at a stop, a request
// still running when the shutdown grace ends (a read the database does not
// answer) has its context ended, so it releases its database connection
// before the pools close. The error of the graceful shutdown used to be
// ignored: the request ran on after Run returned, and a pool closing under
// it waited for it.
func TestStopEndsRequestsStillRunningAfterTheGrace(t *testing.T) {
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "a"
	a, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	started, ended := make(chan struct{}), make(chan struct{})
	a.ui = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // a read the database does not answer
		close(ended)
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	go func() {
		if resp, err := http.Get("http://" + a.Addr() + "/hangs"); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("a request still running after the shutdown grace kept running after Run returned")
	}
}
