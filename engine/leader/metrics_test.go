package leader

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/sdk/clock"
)

// gauge reads the value of the gauge name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not served", name)
	return 0
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// TestStandbyServesTheNewestTickTheLeaderClaimed: a standby reads the
// newest claimed tick at each campaign attempt, so that an outside
// Prometheus sees from every replica how long ago any replica evaluated,
// even when none leads.
func TestStandbyServesTheNewestTickTheLeaderClaimed(t *testing.T) {
	dsn := migrated(t)
	ctx := context.Background()
	clk := clock.NewFake(leaseT0)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := startTraced(t, dsn, "a", clk, func(o *PostgresOptions) { o.Registerer = regA })
	a.lead(t, clk)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if won, err := a.ClaimTick(ctx, t0); err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	if got := gauge(t, regA, LastTickMetric); got != unixSeconds(t0) {
		t.Fatalf("leader serves last tick %v, want %v", got, unixSeconds(t0))
	}
	if got := gauge(t, regA, LeaderMetric); got != 1 {
		t.Fatalf("leader serves %s %v, want 1", LeaderMetric, got)
	}

	b := startTraced(t, dsn, "b", clk, func(o *PostgresOptions) { o.Registerer = regB })
	b.next(t, "campaign")
	if got := gauge(t, regB, LastTickMetric); got != unixSeconds(t0) {
		t.Fatalf("standby serves last tick %v, want %v", got, unixSeconds(t0))
	}
	if got := gauge(t, regB, LeaderMetric); got != 0 {
		t.Fatalf("standby serves %s %v, want 0", LeaderMetric, got)
	}

	// The leader claims the next tick; the standby sees it at its next
	// attempt, one RetryInterval later.
	t1 := t0.Add(10 * time.Second)
	if won, err := a.ClaimTick(ctx, t1); err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	clk.Advance(testCheck)
	b.next(t, "campaign")
	if got := gauge(t, regB, LastTickMetric); got != unixSeconds(t1) {
		t.Fatalf("standby serves last tick %v after the next claim, want %v", got, unixSeconds(t1))
	}
	// A tick not won (no later than the newest) leaves the newest served.
	if won, err := a.ClaimTick(ctx, t0); err != nil || won {
		t.Fatalf("claim of an older tick: %v %v, want not won", won, err)
	}
	if got := gauge(t, regA, LastTickMetric); got != unixSeconds(t1) {
		t.Fatalf("leader serves last tick %v after a claim not won, want %v", got, unixSeconds(t1))
	}
}

// TestLocalServesTheMetricsOfEveryReplica: the single node serves what the
// Postgres electors serve (leading, the newest tick, the interval), so the
// same alert rules watch both.
func TestLocalServesTheMetricsOfEveryReplica(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := NewLocal("a", reg)
	if got := gauge(t, reg, LeaderMetric); got != 1 {
		t.Fatalf("%s %v, want 1", LeaderMetric, got)
	}
	clk := clock.NewFake(time.Unix(1000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan time.Time, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunTicks(ctx, l, clk, 10*time.Second, func(_ context.Context, tick time.Time) { got <- tick })
	}()
	waitTimer(t, clk)
	if v := gauge(t, reg, TickIntervalMetric); v != 10 {
		t.Fatalf("%s %v, want 10", TickIntervalMetric, v)
	}
	clk.Advance(10 * time.Second)
	tick := <-got
	if v := gauge(t, reg, LastTickMetric); v != unixSeconds(tick) {
		t.Fatalf("%s %v, want %v", LastTickMetric, v, unixSeconds(tick))
	}
	cancel()
	<-done
	if n := testutil.CollectAndCount(reg); n != 3 {
		t.Fatalf("%d series, want 3", n)
	}
	// A Local without a registerer serves nothing and still works.
	if won, err := (&Local{ID: "b"}).ClaimTick(ctx, tick); err != nil || !won {
		t.Fatalf("bare Local claim: %v %v", won, err)
	}
}
