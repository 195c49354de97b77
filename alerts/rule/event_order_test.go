package rule

import (
	"context"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

func firingOf(res Result) int {
	n := 0
	for _, a := range res.Alerts {
		if a.EndsAt.IsZero() {
			n++
		}
	}
	return n
}

// TestLateRaiseOlderThanClearIsIgnored: a raising event that arrives after
// a later clearing one was evaluated (forwarded late by another replica)
// raises nothing; an older clear arriving late does not resolve a newer
// raise.
func TestLateRaiseOlderThanClearIsIgnored(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	e, err := NewEvaluator([]Rule{{Name: "LeaderLost", Event: EventLeaderLost, Severity: alerts.P0}})
	if err != nil {
		t.Fatal(err)
	}
	obs := func(ev Event) {
		t.Helper()
		if _, err := e.Observe(ev); err != nil {
			t.Fatal(err)
		}
	}
	// Cleared at t0+5s, then the raise of t0+3s arrives.
	obs(Event{Kind: EventLeaderLost, Service: "engine", At: t0.Add(5 * time.Second), Resolved: true})
	if res := e.Eval(ctx, t0.Add(10*time.Second), nil); firingOf(res) != 0 {
		t.Fatalf("firing after clear: %+v", res.Alerts)
	}
	obs(Event{Kind: EventLeaderLost, Service: "engine", At: t0.Add(3 * time.Second)})
	if res := e.Eval(ctx, t0.Add(20*time.Second), nil); firingOf(res) != 0 {
		t.Fatalf("a raise older than the last clear fires: %+v", res.Alerts)
	}
	// A newer raise fires; a clear older than it, arriving late, leaves it.
	obs(Event{Kind: EventLeaderLost, Service: "engine", At: t0.Add(30 * time.Second)})
	if res := e.Eval(ctx, t0.Add(40*time.Second), nil); firingOf(res) != 1 {
		t.Fatalf("newer raise does not fire: %+v", res.Alerts)
	}
	obs(Event{Kind: EventLeaderLost, Service: "engine", At: t0.Add(25 * time.Second), Resolved: true})
	if res := e.Eval(ctx, t0.Add(50*time.Second), nil); firingOf(res) != 1 {
		t.Fatalf("a clear older than the raise resolves it: %+v", res.Alerts)
	}
	obs(Event{Kind: EventLeaderLost, Service: "engine", At: t0.Add(45 * time.Second), Resolved: true})
	if res := e.Eval(ctx, t0.Add(60*time.Second), nil); firingOf(res) != 0 {
		t.Fatalf("a newer clear does not resolve: %+v", res.Alerts)
	}
}
