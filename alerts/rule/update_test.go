package rule

import (
	"context"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

// An Update that lands while Eval runs a query (queries run outside the
// lock) must not let that Eval apply the replaced rule to the new state: a
// removed rule's alert must not be recreated (no later Eval would ever
// resolve it), and a changed rule's alerts follow the new definition only.
func TestEvalDoesNotApplyRuleReplacedDuringItsQuery(t *testing.T) {
	on := []Sample{{Labels: map[string]string{"service": "checkout"}, Value: 1}}
	tests := []struct {
		name   string
		before []Rule
		after  []Rule
		// event, if set, is observed right after the update.
		event Event
		// rule is the rule whose alert must not fire, nor, when removed,
		// keep any state.
		rule    string
		removed bool
	}{
		{name: "rule removed",
			before: []Rule{{Name: "Old", Expr: "up", Severity: alerts.P1}},
			after:  []Rule{{Name: "Other", Expr: "other", Severity: alerts.P2}},
			rule:   "Old", removed: true},
		{name: "for grows from 0 to 1h",
			before: []Rule{{Name: "A", Expr: "up", Severity: alerts.P1}},
			after:  []Rule{{Name: "A", Expr: "up", Severity: alerts.P1, For: time.Hour}},
			rule:   "A"},
		{name: "event rule's for grows while an earlier rule queries",
			before: []Rule{{Name: "A", Expr: "up", Severity: alerts.P1}, {Name: "E", Event: "down", Severity: alerts.P1}},
			after:  []Rule{{Name: "A", Expr: "up", Severity: alerts.P1}, {Name: "E", Event: "down", Severity: alerts.P1, For: time.Hour}},
			event:  Event{Kind: "down", Service: "checkout", At: t0},
			rule:   "E"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewEvaluator(tt.before)
			if err != nil {
				t.Fatal(err)
			}
			updated := false
			q := func(context.Context, string, time.Time) ([]Sample, error) {
				if !updated {
					updated = true
					if err := e.Update(tt.after); err != nil {
						t.Fatal(err)
					}
					if tt.event.Kind != "" {
						if _, err := e.Observe(tt.event); err != nil {
							t.Fatal(err)
						}
					}
				}
				return on, nil
			}
			// The first Eval sees the update; the next ones run on the new
			// set, within the new for (1h).
			for _, d := range []time.Duration{0, time.Minute, 30 * time.Minute} {
				res := e.Eval(context.Background(), t0.Add(d), q)
				for _, a := range res.Alerts {
					if a.Labels[AlertNameLabel] == tt.rule {
						t.Fatalf("at %s: alert %v reported (firing=%v), the rule in force does not fire it", d, a.Labels, a.EndsAt.IsZero())
					}
				}
			}
			for _, s := range e.States() {
				if s.Rule == tt.rule && (tt.removed || s.State != alerts.StatePending) {
					t.Fatalf("state %+v, want none for a removed rule, pending for one whose for is 1h", s)
				}
			}
		})
	}
}

// Events are queued for the rule definition in force when they arrived: an
// Update keeps them for unchanged rules only, so a rule now listening to
// another kind is not raised by an old-kind event, and a removed rule's
// queue does not linger.
func TestUpdateKeepsQueuedEventsOfUnchangedRulesOnly(t *testing.T) {
	kept := Rule{Name: "Kept", Event: "down", Severity: alerts.P1}
	e, err := NewEvaluator([]Rule{kept, {Name: "X", Event: "old_kind", Severity: alerts.P1}, {Name: "Gone", Event: "down", Severity: alerts.P2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"old_kind", "down"} {
		if _, err := e.Observe(Event{Kind: kind, Service: "checkout", At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Update([]Rule{kept, {Name: "X", Event: "new_kind", Severity: alerts.P1}}); err != nil {
		t.Fatal(err)
	}
	res := e.Eval(context.Background(), t0.Add(time.Second), nil)
	if len(res.Alerts) != 1 || res.Alerts[0].Labels[AlertNameLabel] != "Kept" {
		t.Fatalf("alerts %v, want only Kept (its event queued before an update that left it unchanged)", res.Alerts)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.events) != 0 {
		t.Fatalf("queued events left after Eval: %v", e.events)
	}
}

// An Update that drops alert states must make the next Eval report Changed,
// even when nothing else changes, so that the store forgets them too; one
// that drops nothing does not.
func TestUpdateDroppingAlertsReportsChanged(t *testing.T) {
	on := []Sample{{Labels: map[string]string{"service": "a"}, Value: 1}}
	// x and y hold; the changed B's y2 does not.
	q := func(_ context.Context, expr string, _ time.Time) ([]Sample, error) {
		if expr == "x" || expr == "y" {
			return on, nil
		}
		return nil, nil
	}
	a := Rule{Name: "A", Expr: "x", Severity: alerts.P1}
	b := Rule{Name: "B", Expr: "y", Severity: alerts.P1}
	e, err := NewEvaluator([]Rule{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if res := e.Eval(context.Background(), t0, q); len(res.Alerts) != 2 || !res.Changed {
		t.Fatalf("want A and B firing: %+v", res)
	}
	// Adding a rule drops nothing.
	if err := e.Update([]Rule{a, b, {Name: "C", Expr: "z", Severity: alerts.P2}}); err != nil {
		t.Fatal(err)
	}
	if res := e.Eval(context.Background(), t0.Add(time.Minute), q); res.Changed {
		t.Fatalf("Eval after an Update that dropped nothing: Changed true")
	}
	// Changing B drops its alert; B's new condition does not hold, so no
	// transition reports it.
	b.Expr = "y2"
	if err := e.Update([]Rule{a, b}); err != nil {
		t.Fatal(err)
	}
	res := e.Eval(context.Background(), t0.Add(2*time.Minute), q)
	if !res.Changed || len(res.Transitions) != 0 {
		t.Fatalf("Eval after an Update that dropped B's alert: Changed %v, transitions %+v; want Changed, none", res.Changed, res.Transitions)
	}
	if res := e.Eval(context.Background(), t0.Add(3*time.Minute), q); res.Changed {
		t.Fatalf("second Eval: Changed true, nothing changed")
	}
}

// An Update that changes only a rule's annotations (a runbook link fixed)
// keeps its alerts: a firing alert keeps firing, in the same episode, with
// the new annotations, instead of resolving and paging again after For.
func TestUpdateOfAnnotationsKeepsFiringAlerts(t *testing.T) {
	on := []Sample{{Labels: map[string]string{"service": "a"}, Value: 1}}
	q := func(context.Context, string, time.Time) ([]Sample, error) { return on, nil }
	r := Rule{Name: "High", Expr: "x", Severity: alerts.P1, For: 5 * time.Minute,
		Annotations: map[string]string{"runbook_url": "https://wiki/typo"}}
	e, err := NewEvaluator([]Rule{r})
	if err != nil {
		t.Fatal(err)
	}
	e.Eval(context.Background(), t0, q)
	res := e.Eval(context.Background(), t0.Add(5*time.Minute), q)
	if len(res.Alerts) != 1 || !res.Alerts[0].StartsAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("want firing: %+v", res.Alerts)
	}
	r.Annotations = map[string]string{"runbook_url": "https://wiki/fixed"}
	if err := e.Update([]Rule{r}); err != nil {
		t.Fatal(err)
	}
	res = e.Eval(context.Background(), t0.Add(6*time.Minute), q)
	if len(res.Alerts) != 1 || !res.Alerts[0].StartsAt.Equal(t0.Add(5*time.Minute)) || !res.Alerts[0].EndsAt.IsZero() ||
		res.Alerts[0].Annotations["runbook_url"] != "https://wiki/fixed" || len(res.Transitions) != 0 {
		t.Fatalf("after an annotation edit: alerts %+v, transitions %+v; want the same episode firing with the new annotation",
			res.Alerts, res.Transitions)
	}
}
