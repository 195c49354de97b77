package rule

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

// stormEvaluator returns an evaluator after three evaluations of a storm:
// pending, firing and resolved (inactive) alerts of three tiers, plus event
// alerts whose tier comes from the event.
func stormEvaluator(t *testing.T) (*Evaluator, Result) {
	t.Helper()
	rules := []Rule{
		{Name: "Down", Expr: "down", Severity: alerts.P0},
		{Name: "Load", Expr: "load", Severity: alerts.P1, For: time.Minute},
		{Name: "Shed", Expr: "shed", Severity: alerts.P2},
		{Name: "Anomaly", Event: EventAnomaly},
	}
	e, err := NewEvaluator(rules)
	if err != nil {
		t.Fatal(err)
	}
	samples := func(n, from int) []Sample {
		var out []Sample
		for i := from; i < n; i++ {
			out = append(out, Sample{Value: float64(i), Labels: map[string]string{"service": fmt.Sprintf("svc%03d", i%40), "instance": fmt.Sprintf("i%d", i)}})
		}
		return out
	}
	ctx := context.Background()
	q := func(n, from int) QueryFunc {
		return func(_ context.Context, expr string, _ time.Time) ([]Sample, error) {
			switch expr {
			case "down":
				return samples(n, from), nil
			case "load":
				return samples(n/2, 0), nil
			}
			return samples(n, 0), nil
		}
	}
	for i, sev := range []alerts.Severity{alerts.P0, alerts.P1, alerts.P1} {
		if _, err := e.Observe(Event{Kind: EventAnomaly, Service: fmt.Sprintf("svc%d", i), Severity: sev, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	e.Eval(ctx, t0, q(300, 0))
	e.Eval(ctx, t0.Add(30*time.Second), q(300, 0))
	// A third of the Down alerts resolve; Load stays pending.
	res := e.Eval(ctx, t0.Add(time.Minute-time.Second), q(300, 100))
	return e, res
}

func TestStatesOrderedByRuleThenFingerprint(t *testing.T) {
	e, _ := stormEvaluator(t)
	got := e.States()
	want := slices.Clone(got)
	slices.SortFunc(want, func(a, b Active) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Labels.Fingerprint(), b.Labels.Fingerprint()))
	})
	if len(got) != 300+150+300+3 {
		t.Fatalf("%d states, want %d", len(got), 300+150+300+3)
	}
	for i := range got {
		if got[i].Rule != want[i].Rule || got[i].Labels.Fingerprint() != want[i].Labels.Fingerprint() {
			t.Fatalf("States()[%d] = %s %s, want %s %s", i, got[i].Rule, got[i].Labels, want[i].Rule, want[i].Labels)
		}
	}
}

func TestEvalAlertsOrderedByFingerprint(t *testing.T) {
	_, res := stormEvaluator(t)
	// Firing: 300 Down (100 of them resolved, still reported), 300 Shed,
	// 3 anomalies; Load is pending.
	if len(res.Alerts) != 603 {
		t.Fatalf("%d alerts, want 603", len(res.Alerts))
	}
	resolved := 0
	for i, a := range res.Alerts {
		if !a.EndsAt.IsZero() {
			resolved++
		}
		if a.GeneratorURL != "governor://alerts/rules/"+a.Labels[AlertNameLabel] {
			t.Fatalf("alert %s: generator URL %q", a.Labels, a.GeneratorURL)
		}
		if i > 0 && res.Alerts[i-1].Fingerprint() >= a.Fingerprint() {
			t.Fatalf("alerts %d and %d not in strictly increasing fingerprint order", i-1, i)
		}
	}
	if resolved != 100 {
		t.Fatalf("%d resolved alerts reported, want 100", resolved)
	}
}

func TestCountsTallyStatesByStateAndSeverity(t *testing.T) {
	e, _ := stormEvaluator(t)
	want := map[StateKey]int{}
	for _, st := range e.States() {
		want[StateKey{State: st.State, Severity: alerts.Severity(st.Labels[alerts.SeverityLabel])}]++
	}
	got := e.Counts()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Counts() = %v, want %v", got, want)
	}
	if got[StateKey{alerts.StateFiring, alerts.P1}] != 2 || got[StateKey{alerts.StatePending, alerts.P1}] != 150 ||
		got[StateKey{alerts.StateInactive, alerts.P0}] != 100 {
		t.Fatalf("Counts() = %v", got)
	}
}

// TestRestoredStatesKeepTheirOrderAndLabels: a state restored from the
// store is listed where its labels put it, and changing the caller's copy
// afterwards changes nothing in the evaluator.
func TestRestoredStatesKeepTheirOrderAndLabels(t *testing.T) {
	e, _ := stormEvaluator(t)
	states := e.States()
	e2, err := NewEvaluator(e.Rules())
	if err != nil {
		t.Fatal(err)
	}
	e2.Restore(states)
	for _, st := range states {
		st.Labels["service"] = "changed"
	}
	got := e2.States()
	if len(got) != len(states) {
		t.Fatalf("%d states restored, want %d", len(got), len(states))
	}
	for i := range got {
		if got[i].Labels["service"] == "changed" {
			t.Fatalf("restored state %d shares its labels with the caller", i)
		}
		if i > 0 && got[i-1].Rule == got[i].Rule && got[i-1].Labels.Fingerprint() >= got[i].Labels.Fingerprint() {
			t.Fatalf("restored states %d and %d out of order", i-1, i)
		}
	}
}
