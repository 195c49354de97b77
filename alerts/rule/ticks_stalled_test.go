package rule

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/engine/leader"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/sdk/clock"
)

// A leader that claims no tick (its claims fail, or nothing runs them)
// raises the built-in P1 once the newest tick has been more than three
// intervals old (at least 30s) for a minute, and it resolves at the next
// claim. The scrape interval, three tick intervals here, adds no false
// lag while ticks are claimed.
func TestBuiltinRuleFiresWhenNoTickIsClaimed(t *testing.T) {
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	const interval, scrapeEvery = 5 * time.Second, 15 * time.Second
	// The ticks run on a clock of their own, which stops while they stall.
	clk, tickClk := clock.NewFake(t0), clock.NewFake(t0)
	reg := prometheus.NewRegistry()
	el := leader.NewLocal("engine-0", reg)
	ctx, cancel := context.WithCancel(context.Background())
	ticked := make(chan time.Time, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		leader.RunTicks(ctx, el, tickClk, interval, func(_ context.Context, tick time.Time) { ticked <- tick })
	}()
	t.Cleanup(func() { cancel(); <-done })
	armed := func() {
		for tickClk.Pending() == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	ev, err := NewEvaluator(Builtin())
	if err != nil {
		t.Fatal(err)
	}
	firing := func(at time.Time) (alerts.Alert, bool) {
		t.Helper()
		res := ev.Eval(context.Background(), at, queryDB(db))
		if len(res.Errors) > 0 {
			t.Fatalf("eval: %v", res.Errors)
		}
		for _, a := range res.Alerts {
			if a.Labels[AlertNameLabel] == TicksStalledRule && a.EndsAt.IsZero() {
				return a, true
			}
		}
		return alerts.Alert{}, false
	}

	const stallAt, resumeAt = 2 * time.Minute, 5 * time.Minute
	var firedAt time.Duration
	for at := time.Duration(0); at <= 6*time.Minute; at += interval {
		if at > 0 {
			clk.Advance(interval)
			if at == resumeAt {
				// The stopped tick clock catches up in two steps: a
				// fake clock fires an overdue timer at its deadline
				// (2m05s) and only then reaches the target, so the
				// ticker may read either; the tick of resumeAt comes
				// next, on its own.
				armed()
				tickClk.Advance(clk.Now().Add(-interval).Sub(tickClk.Now()))
				<-ticked
			}
			if at <= stallAt || at >= resumeAt {
				armed()
				tickClk.Advance(clk.Now().Sub(tickClk.Now()))
				if tick := <-ticked; !tick.Equal(clk.Now()) {
					t.Fatalf("tick %v at %v", tick, clk.Now())
				}
			}
		}
		if at%scrapeEvery != 0 {
			continue
		}
		scrape(t, reg, db, clk.Now())
		a, ok := firing(clk.Now())
		switch {
		case ok && (at <= stallAt || at >= resumeAt):
			t.Fatalf("firing at %s while ticks are claimed: %v", at, a.Annotations)
		case ok && firedAt == 0:
			firedAt = at
			if a.Severity() != alerts.P1 || a.Annotations["summary"] != "The decision engine has evaluated nothing for 105s" {
				t.Fatalf("alert %v %v: want P1 naming the 105s since the last tick", a.Labels, a.Annotations)
			}
		case !ok && firedAt != 0 && at < resumeAt:
			t.Fatalf("resolved at %s while ticks still stall", at)
		}
	}
	// Past 30s (three intervals are less) at 2m45s, then held for 1m.
	if want := stallAt + 45*time.Second + time.Minute; firedAt != want {
		t.Fatalf("fired at %s, want %s", firedAt, want)
	}
}

// The built-in rules read the elector's series by the names engine/leader
// serves; a renamed series breaks this test rather than silencing the
// alert.
func TestTicksStalledRuleReadsTheElectorsSeries(t *testing.T) {
	for _, name := range []string{leader.LastTickMetric, leader.TickIntervalMetric} {
		if !strings.Contains(ticksStalled, name) {
			t.Errorf("%s does not read %s", TicksStalledRule, name)
		}
	}
}
