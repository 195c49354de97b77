package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/internal/testenv"
)

// TestFailover runs two engines on one database, stops the leader, and
// checks the standby leads within seconds and that every tick was evaluated
// exactly once. (engine/leader's TestFailover kills the leader's database
// session instead, as a crashed process loses it.)
func TestFailover(t *testing.T) {
	url := testenv.Postgres(t)
	natsURL := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := fmt.Sprintf("failover%d", time.Now().UnixNano())
	apps := map[string]*App{}
	regs := map[string]*prometheus.Registry{}
	done := map[string]chan error{}
	stop := map[string]context.CancelFunc{}
	for _, id := range []string{"a", "b"} {
		cfg := config.Default()
		cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), id
		cfg.Database, cfg.NATS.URL, cfg.NATS.Prefix = url, natsURL, prefix
		cfg.Interval = 200 * time.Millisecond
		regs[id] = prometheus.NewRegistry()
		a, err := New(ctx, Options{Config: cfg, Registry: regs[id]})
		if err != nil {
			t.Fatal(err)
		}
		apps[id] = a
		actx, acancel := context.WithCancel(ctx)
		stop[id], done[id] = acancel, make(chan error, 1)
		go func() { done[id] <- a.Run(actx) }()
	}
	leaderOf := func(not string) string {
		for id, a := range apps {
			if id != not && a.Elector().IsLeader() {
				return id
			}
		}
		return ""
	}
	var first string
	waitFor(t, 10*time.Second, "a leader", func() bool { first = leaderOf(""); return first != "" })
	waitFor(t, 10*time.Second, "ticks by the first leader", func() bool {
		return ticks(t, regs[first]) >= 3
	})
	stop[first]()
	if err := <-done[first]; err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var second string
	waitFor(t, 10*time.Second, "the standby to lead", func() bool { second = leaderOf(first); return second != "" })
	t.Logf("%s leads %v after %s stopped", second, time.Since(killed).Round(time.Millisecond), first)
	waitFor(t, 10*time.Second, "ticks by the second leader", func() bool {
		return ticks(t, regs[second]) >= 3
	})
	stop[second]()
	if err := <-done[second]; err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var rows, leaders int
	if err := admin.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT leader) FROM governor_engine_ticks").Scan(&rows, &leaders); err != nil {
		t.Fatal(err)
	}
	evaluated := ticks(t, regs["a"]) + ticks(t, regs["b"])
	if float64(rows) != evaluated || leaders != 2 {
		t.Fatalf("%d ticks recorded by %d leaders, %v evaluated: a tick ran twice or was not recorded", rows, leaders, evaluated)
	}
}

// ticks reads governor_engine_ticks_total from a registry.
func ticks(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "governor_engine_ticks_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
