package app

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/sdk/clock"
)

// hungPrometheus is a Prometheus query API that, while hang is set,
// answers no request until the request's context ends; otherwise it
// answers every query with an empty vector.
type hungPrometheus struct {
	hang    atomic.Bool
	arrived chan struct{} // one send per hung request
}

func newHungPrometheus(t *testing.T) (*hungPrometheus, *httptest.Server) {
	p := &hungPrometheus{arrived: make(chan struct{}, 1024)}
	p.hang.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The query comes as a form (POST): read as Prometheus does, which
		// also lets the server see the client hang up.
		_ = r.ParseForm()
		if p.hang.Load() {
			p.arrived <- struct{}{}
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	}))
	t.Cleanup(srv.Close)
	return p, srv
}

// TestCycleAgainstAHungPrometheusEndsAtTheTickTimeout: a Prometheus that
// accepts queries and never answers holds a cycle only until tick_timeout
// after its tick (on the engine's clock), not for the client's attempts and
// retries: the cycle is cut short, logged and counted, makes the replica
// neither ready nor saves state, and the
// next cycle (Prometheus answering again) runs without a new restore.
func TestCycleAgainstAHungPrometheusEndsAtTheTickTimeout(t *testing.T) {
	prom, srv := newHungPrometheus(t)
	ctx := context.Background()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "engine-a"
	cfg.Metrics.PrometheusURL = srv.URL
	cfg.Interval = time.Minute // the client's own attempt timeout (real time) is then far off
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	var logged syncBuffer
	reg := prometheus.NewRegistry()
	a, err := New(ctx, Options{Config: cfg, Registry: reg, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	store := &flakyState{}
	if a.state, err = evaluate.NewState(a.eval, evaluate.StateOptions{Store: store, Leader: "engine-a"}); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	go func() { defer close(done); a.runTick(ctx, t0) }()
	select {
	case <-prom.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the cycle sent no query to Prometheus")
	}
	clk.Advance(cfg.EvalTimeout())
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the cycle still runs %s after its tick (tick_timeout %s): a hung Prometheus holds it", cfg.EvalTimeout(), cfg.EvalTimeout())
	}
	if now := clk.Now(); !now.Before(t0.Add(cfg.Interval)) {
		t.Fatalf("the cycle ended at %v, not before the next tick %v", now, t0.Add(cfg.Interval))
	}
	if got := testutil.ToFloat64(a.tickTimeouts); got != 1 {
		t.Fatalf("governor_engine_tick_timeouts_total %v, want 1", got)
	}
	if out := logged.String(); !strings.Contains(out, "tick_timeout") || !strings.Contains(out, "level=WARN") {
		t.Fatalf("no warning names tick_timeout:\n%s", out)
	}
	if strings.Contains(logged.String(), "the lead ended") {
		t.Fatalf("a cycle cut short by tick_timeout is logged as a lost lead:\n%s", logged.String())
	}
	if a.cycledThisLead() {
		t.Fatal("a cycle cut short made the replica ready")
	}
	if len(a.eval.Scores()) != 0 {
		t.Fatalf("scores published from a cycle that read nothing: %v", a.eval.Scores())
	}
	if rows, _ := store.MemState.Load(ctx); len(rows) != 0 {
		t.Fatalf("a cycle cut short saved %d state rows", len(rows))
	}

	// Prometheus answers again: the next cycle completes, saves, and does
	// not restore again (the lead went on; the memory is the newest).
	prom.hang.Store(false)
	a.runTick(ctx, t0.Add(cfg.Interval))
	if rows, _ := store.MemState.Load(ctx); len(rows) == 0 {
		t.Fatal("the cycle after the timeout saved no state")
	}
	if store.loads != 1 {
		t.Fatalf("%d restores, want only the takeover's: a cycle cut short does not end the lead", store.loads)
	}
	if !a.cycledThisLead() {
		t.Fatalf("the cycle after the timeout did not complete:\n%s", logged.String())
	}
	if got := testutil.ToFloat64(a.tickTimeouts); got != 1 {
		t.Fatalf("governor_engine_tick_timeouts_total %v after a cycle in time, want 1", got)
	}
}
