package app

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStopIsBoundedByTheShutdownTimeout: a dependency whose close hangs
// does not hold the stop past Options.ShutdownTimeout (Kubernetes kills the
// pod at its grace period, losing whatever the closers after it would have
// done, and says nothing of why): Run returns and logs what did not finish.
func TestStopIsBoundedByTheShutdownTimeout(t *testing.T) {
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "a"
	logs := &syncBuffer{}
	a, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(logs, nil)), ShutdownTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	defer close(hang)
	a.onClose("stuck dependency", func() { <-hang })
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return: a hanging close held the stop")
	}
	if !strings.Contains(logs.String(), "stuck dependency") {
		t.Fatalf("the stop did not say what did not finish:\n%s", logs.String())
	}
}

// TestNATSConnectionIsDrainedAtStop: closing the engine's NATS
// connection lets the messages its subscriptions already received be
// handled (an instance's ACK the ledger has not recorded yet); Close
// dropped them.
func TestNATSConnectionIsDrainedAtStop(t *testing.T) {
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "a"
	a, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	release := make(chan struct{})
	var mu sync.Mutex
	var handled []string
	first := make(chan struct{})
	sub, err := a.nc.Subscribe("zz.acks", func(m *nats.Msg) {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		if n == 0 {
			close(first)
			<-release
		}
		mu.Lock()
		handled = append(handled, string(m.Data))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"ack-1", "ack-2", "ack-3"} {
		if err := a.nc.Publish("zz.acks", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	<-first
	for {
		if n, _, _ := sub.Pending(); n >= 2 { // the other two received, waiting
			break
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { defer close(done); a.close() }()
	for !a.nc.IsDraining() && !a.nc.IsClosed() { // the connection's close has begun
		time.Sleep(time.Millisecond)
	}
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 3 {
		t.Fatalf("handled %v at the stop, want the three messages received", handled)
	}
}

// TestNegativeShutdownTimeoutIsRefused: New names the option.
func TestNegativeShutdownTimeoutIsRefused(t *testing.T) {
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "a"
	_, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry(), ShutdownTimeout: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "ShutdownTimeout") {
		t.Fatalf("New = %v, want an error naming ShutdownTimeout", err)
	}
}

// TestShutdownTimeoutComesFromTheConfiguration: shutdown_timeout bounds
// the stop when Options.ShutdownTimeout is not set; set, the option wins.
func TestShutdownTimeoutComesFromTheConfiguration(t *testing.T) {
	for _, tt := range []struct {
		name        string
		cfg, option time.Duration
		want        time.Duration
	}{
		{"from shutdown_timeout", 7 * time.Second, 0, 7 * time.Second},
		{"the option wins", 7 * time.Second, 3 * time.Second, 3 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "engine-a"
			cfg.ShutdownTimeout = tt.cfg
			a, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry(), ShutdownTimeout: tt.option})
			if err != nil {
				t.Fatal(err)
			}
			defer a.close()
			if a.o.ShutdownTimeout != tt.want {
				t.Fatalf("shutdown timeout %s, want %s", a.o.ShutdownTimeout, tt.want)
			}
		})
	}
}

// TestStopDrainsNATSOnceWhileTheStoresAreOpen: at a stop the engine's
// NATS connection is drained once, after the background work and before
// the stores close: a message its subscriptions received before the stop
// is handled with the rules database still open.
func TestStopDrainsNATSOnceWhileTheStoresAreOpen(t *testing.T) {
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "a"
	a, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	handled := make(chan error, 2)
	var first sync.Once
	if _, err := a.nc.Subscribe("zz.acks", func(*nats.Msg) {
		first.Do(func() { close(started); <-release })
		_, err := a.ledgerDB.ExecContext(context.Background(), "SELECT 1")
		handled <- err
	}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"ack-1", "ack-2"} {
		if err := a.nc.Publish("zz.acks", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	<-started
	draining := a.nc.StatusChanged(nats.DRAINING_SUBS)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	cancel()
	<-draining
	close(release)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-handled; err != nil {
			t.Fatalf("a message received before the stop was handled after the stores closed: %v", err)
		}
	}
	if !a.nc.IsClosed() {
		t.Fatal("the NATS connection is still open after the stop")
	}
}
