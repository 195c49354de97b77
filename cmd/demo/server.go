package main

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/rules"
)

// defaultRules protect /api/ with an adaptive limit starting near the
// backend's capacity (its floor is 4, or the capacity when -capacity is
// smaller, so every capacity the flag accepts gives valid rules), priority
// shedding with consistent users, a short CoDel queue and a per-user rate
// limit.
func defaultRules(capacity int) *rules.Ruleset {
	return &rules.Ruleset{
		Service:  "demo",
		Priority: &rules.Priority{UserHeader: "X-User"},
		Routes: []rules.Route{{
			Name:          "api",
			Match:         rules.Match{PathPrefix: "/api/"},
			Concurrency:   &rules.Concurrency{Algorithm: rules.AlgorithmGradient, Initial: capacity, Min: min(4, capacity), Max: 1000},
			Shedding:      &rules.Shedding{Reserved: 0.1, ConsistentUsers: true},
			Queue:         &rules.Queue{},
			KeyRateLimits: []rules.KeyRateLimit{{Key: "header:X-User", Rate: 50, Burst: 20}},
			Exempt:        &rules.Exempt{Callers: []string{"prober"}},
		}},
	}
}

// demo is the service: a governor, a registry and the simulated backend.
type demo struct {
	g        *governor.Governor
	reg      *prometheus.Registry
	capacity int
	work     time.Duration
	busy     atomic.Int64
}

func newDemo(cfg config, rs *rules.Ruleset) (*demo, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	opts := governor.DefaultOptions("demo")
	opts.Registerer = reg
	g, err := governor.New(opts)
	if err != nil {
		return nil, err
	}
	if err := g.Apply(rs, 1); err != nil {
		g.Close()
		return nil, fmt.Errorf("rules: %w", err)
	}
	return &demo{g: g, reg: reg, capacity: cfg.capacity, work: cfg.work}, nil
}

func (d *demo) close() { d.g.Close() }

func (d *demo) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/api/", d.serveWork)
	return httpgov.Middleware(d.g, httpgov.Options{})(mux)
}

// serveWork simulates a backend of fixed capacity under processor sharing:
// beyond capacity, every request in progress slows down in proportion.
func (d *demo) serveWork(w http.ResponseWriter, r *http.Request) {
	n := d.busy.Add(1)
	defer d.busy.Add(-1)
	t := d.work
	if over := float64(n) / float64(d.capacity); over > 1 {
		t = time.Duration(float64(t) * over)
	}
	select {
	case <-time.After(t):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"served_in_ms\":%.1f}\n", float64(t)/1e6)
}
