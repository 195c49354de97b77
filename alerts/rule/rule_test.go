package rule

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func TestBuiltinRulesValid(t *testing.T) {
	if err := ValidateSet(Builtin()); err != nil {
		t.Fatal(err)
	}
}

// GovernorLeaderLost is no longer built in: only a leader evaluates rules,
// so it could not say that no replica leads, and clock skew between
// replicas made it fire while one did.
func TestBuiltinRulesLeaveOutLeaderLost(t *testing.T) {
	for _, r := range Builtin() {
		if r.Name == "GovernorLeaderLost" || r.Event == EventLeaderLost {
			t.Fatalf("built-in rule %q listens to %q", r.Name, r.Event)
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		want string
	}{
		{"bad promql with position", Rule{Name: "x", Expr: "rate(foo[5m]", Severity: alerts.P1}, "expr: position 12 (1:13)"},
		{"bad promql token", Rule{Name: "x", Expr: "foo >> 2", Severity: alerts.P1}, "expr: position"},
		{"no source", Rule{Name: "x", Severity: alerts.P1}, "one of expr and event"},
		{"both sources", Rule{Name: "x", Expr: "up", Event: "e", Severity: alerts.P1}, "exclusive"},
		{"no name", Rule{Expr: "up", Severity: alerts.P1}, "name: must not be empty"},
		{"bad severity", Rule{Name: "x", Expr: "up", Severity: "P5"}, "severity"},
		{"missing severity on expr", Rule{Name: "x", Expr: "up"}, "severity"},
		{"negative for", Rule{Name: "x", Expr: "up", Severity: alerts.P1, For: -time.Second}, "for: must not be negative"},
		{"bad label", Rule{Name: "x", Expr: "up", Severity: alerts.P1, Labels: map[string]string{"a-b": "1"}}, "labels"},
		{"reserved label", Rule{Name: "x", Expr: "up", Severity: alerts.P1, Labels: map[string]string{"severity": "P0"}}, "set from the rule"},
		{"bad template", Rule{Name: "x", Expr: "up", Severity: alerts.P1, Annotations: map[string]string{"summary": "{{ .Nope"}}, "annotations.summary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rule.Validate()
			if err == nil || !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.want)
			}
		})
	}
	if err := ValidateSet([]Rule{{Name: "a", Expr: "up", Severity: alerts.P1}, {Name: "a", Expr: "up", Severity: alerts.P1}}); err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Fatalf("duplicate names: %v", err)
	}
}

// series is a scripted query: the value of every series at each minute.
type series map[time.Duration][]Sample

func (s series) query(_ context.Context, _ string, at time.Time) ([]Sample, error) {
	return s[at.Sub(t0)], nil
}

func TestForAndKeepFiringTimeline(t *testing.T) {
	svc := map[string]string{"__name__": "x", "service": "checkout"}
	on := []Sample{{Labels: svc, Value: 0.9}}
	// Condition holds at 0..3m, drops at 4m (flap), back at 5m, gone from 6m.
	s := series{0: on, time.Minute: on, 2 * time.Minute: on, 3 * time.Minute: on, 5 * time.Minute: on}
	r := Rule{Name: "High", Expr: "x > 0.8", Severity: alerts.P1, For: 2 * time.Minute, KeepFiringFor: 2 * time.Minute,
		Annotations: map[string]string{"summary": "{{ $labels.service }} at {{ $value }}"}}
	e, err := NewEvaluator([]Rule{r})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		at     time.Duration
		state  alerts.State
		firing bool
	}{
		{0, alerts.StatePending, false},
		{time.Minute, alerts.StatePending, false},
		{2 * time.Minute, alerts.StateFiring, true},
		{3 * time.Minute, alerts.StateFiring, true},
		{4 * time.Minute, alerts.StateFiring, true}, // kept firing through the flap
		{5 * time.Minute, alerts.StateFiring, true},
		{6 * time.Minute, alerts.StateFiring, true},    // keep-firing since 6m
		{7 * time.Minute, alerts.StateFiring, true},    // 1m < 2m
		{8 * time.Minute, alerts.StateInactive, false}, // resolved
	}
	changed := map[time.Duration]bool{0: true, 2 * time.Minute: true, 4 * time.Minute: true, 5 * time.Minute: true,
		6 * time.Minute: true, 8 * time.Minute: true}
	for _, w := range want {
		res := e.Eval(context.Background(), t0.Add(w.at), s.query)
		if res.Changed != changed[w.at] {
			t.Fatalf("at %s: Changed = %v, want %v", w.at, res.Changed, changed[w.at])
		}
		st := e.States()
		if len(st) != 1 || st[0].State != w.state {
			t.Fatalf("at %s: states %+v, want %s", w.at, st, w.state)
		}
		firing := len(res.Alerts) == 1 && res.Alerts[0].EndsAt.IsZero()
		if firing != w.firing {
			t.Fatalf("at %s: alerts %+v, firing want %v", w.at, res.Alerts, w.firing)
		}
	}
	st := e.States()[0]
	if st.Labels["service"] != "checkout" || st.Labels["alertname"] != "High" || st.Labels["severity"] != "P1" || st.Labels["__name__"] != "" {
		t.Fatalf("labels %v", st.Labels)
	}
	if !st.FiredAt.Equal(t0.Add(2*time.Minute)) || !st.ResolvedAt.Equal(t0.Add(8*time.Minute)) {
		t.Fatalf("fired %s resolved %s", st.FiredAt, st.ResolvedAt)
	}
	if st.Annotations["summary"] != "checkout at 0.9" {
		t.Fatalf("summary %q", st.Annotations["summary"])
	}
	// The resolved alert is reported until the retention ends, then dropped.
	if res := e.Eval(context.Background(), t0.Add(9*time.Minute), s.query); len(res.Alerts) != 1 || res.Alerts[0].EndsAt.IsZero() {
		t.Fatalf("resolved alert not reported: %+v", res.Alerts)
	}
	e.Eval(context.Background(), t0.Add(8*time.Minute+ResolvedRetention), s.query)
	if st := e.States(); len(st) != 0 {
		t.Fatalf("resolved alert kept past retention: %+v", st)
	}
}

func TestPendingThatStopsNeverFires(t *testing.T) {
	s := series{0: {{Labels: map[string]string{"service": "a"}, Value: 1}}}
	e, _ := NewEvaluator([]Rule{{Name: "R", Expr: "x", Severity: alerts.P2, For: time.Minute}})
	res := e.Eval(context.Background(), t0, s.query)
	res2 := e.Eval(context.Background(), t0.Add(time.Minute), s.query)
	if len(res.Alerts)+len(res2.Alerts) != 0 || len(e.States()) != 0 {
		t.Fatalf("pending alert fired or lingered: %+v %+v %+v", res, res2, e.States())
	}
	if len(res2.Transitions) != 1 || res2.Transitions[0].To != alerts.StateInactive {
		t.Fatalf("transitions %+v", res2.Transitions)
	}
}

func TestUpdateKeepsStateOfUnchangedRules(t *testing.T) {
	on := []Sample{{Labels: map[string]string{"service": "a"}, Value: 1}}
	s := series{0: on, time.Minute: on}
	a := Rule{Name: "A", Expr: "x", Severity: alerts.P1, For: time.Minute}
	b := Rule{Name: "B", Expr: "y", Severity: alerts.P1, For: time.Minute}
	e, _ := NewEvaluator([]Rule{a, b})
	e.Eval(context.Background(), t0, s.query)
	if err := e.Update([]Rule{a, {Name: "B", Expr: "y(", Severity: alerts.P1}}); err == nil {
		t.Fatal("bad set accepted")
	}
	if len(e.Rules()) != 2 || e.Rules()[1].Expr != "y" {
		t.Fatal("bad set half-applied")
	}
	b.For = 2 * time.Minute
	if err := e.Update([]Rule{a, b}); err != nil {
		t.Fatal(err)
	}
	res := e.Eval(context.Background(), t0.Add(time.Minute), s.query)
	if len(res.Alerts) != 1 || res.Alerts[0].Labels["alertname"] != "A" {
		t.Fatalf("want only A firing (B restarted its For), got %+v", res.Alerts)
	}
}

func TestRestoreResumesState(t *testing.T) {
	on := []Sample{{Labels: map[string]string{"service": "a"}, Value: 1}}
	s := series{0: on, time.Minute: on}
	r := Rule{Name: "A", Expr: "x", Severity: alerts.P1, For: time.Minute}
	e, _ := NewEvaluator([]Rule{r})
	e.Eval(context.Background(), t0, s.query)
	e2, _ := NewEvaluator([]Rule{r})
	e2.Restore(e.States())
	if res := e2.Eval(context.Background(), t0.Add(time.Minute), s.query); len(res.Alerts) != 1 {
		t.Fatalf("restored pending alert did not fire after For: %+v", res)
	}
}

// A rule disabled across a restart (its state stored while it fired) does
// not get its alerts back: Eval never evaluates a disabled rule, so a
// restored alert would fire, and page, for good.
func TestRestoreDropsStatesOfDisabledRules(t *testing.T) {
	on := []Sample{{Labels: map[string]string{"service": "a"}, Value: 1}}
	s := series{0: on}
	r := Rule{Name: "A", Expr: "x", Severity: alerts.P1}
	e, _ := NewEvaluator([]Rule{r})
	if res := e.Eval(context.Background(), t0, s.query); len(res.Alerts) != 1 {
		t.Fatalf("A should fire: %+v", res)
	}
	r.Disabled = true
	e2, _ := NewEvaluator([]Rule{r})
	e2.Restore(e.States())
	if st := e2.States(); len(st) != 0 {
		t.Fatalf("states restored for a disabled rule: %+v", st)
	}
	for _, d := range []time.Duration{time.Minute, time.Hour} {
		if res := e2.Eval(context.Background(), t0.Add(d), s.query); len(res.Alerts) != 0 {
			t.Fatalf("at %s: the disabled rule's alert fires: %+v", d, res.Alerts)
		}
	}
}

func TestQueryErrorKeepsState(t *testing.T) {
	e, _ := NewEvaluator([]Rule{{Name: "A", Expr: "x", Severity: alerts.P1}})
	fail := func(context.Context, string, time.Time) ([]Sample, error) { return nil, errors.New("down") }
	res := e.Eval(context.Background(), t0, fail)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error(), `rule "A"`) {
		t.Fatalf("errors %v", res.Errors)
	}
}

func TestEventRules(t *testing.T) {
	e, err := NewEvaluator(Builtin())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	noQuery := func(context.Context, string, time.Time) ([]Sample, error) { return nil, nil }
	if n, err := e.Observe(Event{Kind: EventInstanceStale, Service: "checkout", Labels: map[string]string{"instance": "i1"}, At: t0}); err != nil || n != 1 {
		t.Fatalf("observe: %d %v", n, err)
	}
	if _, err := e.Observe(Event{Kind: EventAnomaly, Service: "checkout", Severity: alerts.P0, Labels: map[string]string{"signal": "latency"}, At: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Observe(Event{Kind: "", At: t0}); err == nil {
		t.Fatal("event without kind accepted")
	}
	res := e.Eval(ctx, t0, noQuery)
	if len(res.Alerts) != 2 {
		t.Fatalf("want stale and anomaly firing, got %+v", res.Alerts)
	}
	for _, a := range res.Alerts {
		if a.Labels["alertname"] == "GovernorAnomaly" && a.Severity() != alerts.P0 {
			t.Fatalf("anomaly severity %s, want P0 from the event", a.Severity())
		}
		if a.Labels["alertname"] == "GovernorInstanceStale" && a.Annotations["summary"] != "checkout instance i1 is stale on the latest rule version" {
			t.Fatalf("summary %q", a.Annotations["summary"])
		}
	}
	// Still firing without new events until ResolveAfter.
	if res := e.Eval(ctx, t0.Add(5*time.Minute), noQuery); countFiring(res) != 2 {
		t.Fatalf("event alerts dropped early: %+v", res.Alerts)
	}
	// A resolving event clears the stale instance at once.
	_, _ = e.Observe(Event{Kind: EventInstanceStale, Service: "checkout", Labels: map[string]string{"instance": "i1"}, At: t0.Add(6 * time.Minute), Resolved: true})
	if res := e.Eval(ctx, t0.Add(6*time.Minute), noQuery); countFiring(res) != 1 {
		t.Fatalf("resolving event ignored: %+v", res.Alerts)
	}
	// The anomaly resolves after DefaultResolveAfter without events.
	if res := e.Eval(ctx, t0.Add(DefaultResolveAfter), noQuery); countFiring(res) != 0 {
		t.Fatalf("anomaly did not resolve: %+v", res.Alerts)
	}
}

func countFiring(r Result) int {
	n := 0
	for _, a := range r.Alerts {
		if a.EndsAt.IsZero() {
			n++
		}
	}
	return n
}

// TestEmptyLabelValueIsNoLabel: as in Prometheus, a label with an empty
// value is no label: a rule label set to "" removes the series' label, and
// an event label with an empty value is left out, so that the alert's
// labels, fingerprint and group are those of the same alert without it.
func TestEmptyLabelValueIsNoLabel(t *testing.T) {
	r := Rule{Name: "High", Expr: "x > 1", Severity: alerts.P1, Labels: map[string]string{"instance": ""}}
	ev := Rule{Name: "Stale", Event: EventInstanceStale, Severity: alerts.P1}
	e, err := NewEvaluator([]Rule{r, ev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Observe(Event{Kind: EventInstanceStale, Service: "checkout", Labels: map[string]string{"instance": "i1", "zone": ""}, At: t0}); err != nil {
		t.Fatal(err)
	}
	s := series{0: {{Labels: map[string]string{"service": "checkout", "instance": "i1", "zone": ""}, Value: 2}}}
	res := e.Eval(context.Background(), t0, s.query)
	if len(res.Alerts) != 2 {
		t.Fatalf("alerts %+v", res.Alerts)
	}
	for _, a := range res.Alerts {
		for k, v := range a.Labels {
			if v == "" {
				t.Errorf("%s: label %s has an empty value: %v", a.Labels["alertname"], k, a.Labels)
			}
		}
	}
}
