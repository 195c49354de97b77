package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/watch"
)

// instance is one SDK instance of a demo service: a governor, a watcher, a
// simulated backend and an HTTP server on loopback.
type instance struct {
	svc   *Service
	id    string
	g     *governor.Governor
	w     *watch.Watcher
	srv   *http.Server
	ln    net.Listener
	busy  atomic.Int64
	errAt time.Duration
	// fleet times the incident cycle, which holds whoever sends the load.
	fleet *Fleet
}

func newInstance(f *Fleet, svc *Service, id string, instances int) (*instance, error) {
	o := &f.o
	reg := prometheus.NewRegistry()
	gopts := governor.DefaultOptions(svc.Name)
	gopts.Registerer = reg
	g, err := governor.New(gopts)
	if err != nil {
		return nil, fmt.Errorf("demo: %s: %w", id, err)
	}
	in := &instance{svc: svc, id: id, g: g, errAt: o.ErrorLatency, fleet: f}
	if err := g.Apply(svc.Ruleset(instances), 0); err != nil {
		g.Close()
		return nil, fmt.Errorf("demo: %s: initial rules: %w", id, err)
	}
	wopts := watch.DefaultOptions()
	wopts.Service = svc.Name
	wopts.Instance = id
	wopts.Labels = map[string]string{"fleet": "demo"}
	wopts.Conn = o.Conn
	wopts.Names = o.Names
	wopts.Applier = g
	wopts.Heartbeat = o.Heartbeat
	wopts.Registerer = reg
	wopts.OnError = func(err error) { o.Logger.Debug("demo watcher", "instance", id, "err", err) }
	if in.w, err = watch.New(wopts); err != nil {
		g.Close()
		return nil, fmt.Errorf("demo: %s: %w", id, err)
	}
	if in.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		g.Close()
		return nil, fmt.Errorf("demo: %s: listen: %w", id, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/api/", httpgov.Middleware(g, httpgov.Options{})(http.HandlerFunc(in.serveWork)))
	in.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return in, nil
}

func (in *instance) url() string { return "http://" + in.ln.Addr().String() }

// serveWork simulates the backend under processor sharing, slowed down or
// short of capacity while its incident lasts.
func (in *instance) serveWork(w http.ResponseWriter, r *http.Request) {
	n := in.busy.Add(1)
	defer in.busy.Add(-1)
	_, work, capDiv := in.fleet.phase(in.svc)
	capacity := max(float64(in.svc.Capacity)/capDiv, 1)
	t := time.Duration(float64(in.svc.Work) * work)
	if over := float64(n) / capacity; over > 1 {
		t = time.Duration(float64(t) * over)
	}
	fail := in.errAt > 0 && t > in.errAt
	if fail {
		t = in.errAt
	}
	timer := time.NewTimer(t)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		return
	}
	if fail {
		http.Error(w, "backend too slow", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"served_in_ms\":%.1f}\n", float64(t)/1e6)
}

// run serves and watches until ctx ends.
func (in *instance) run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = in.srv.Serve(in.ln)
	}()
	_ = in.w.Run(ctx)
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = in.srv.Shutdown(shut)
	<-done
	in.g.Close()
}
