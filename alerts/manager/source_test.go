package manager

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/config"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/rules/distribution"
)

// The built-in PromQL rules, evaluated by the real PromQL engine of the
// embedded store over SDK series named as in docs/metrics.md.
func TestBuiltinRulesOnEmbeddedStore(t *testing.T) {
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	app := db.Appender(context.Background())
	add := func(v float64, at time.Duration, kv ...string) {
		t.Helper()
		if _, err := app.Append(0, labels.FromStrings(kv...), start.Add(at).UnixMilli(), v); err != nil {
			t.Fatal(err)
		}
	}
	// checkout: 1000 critical requests/15s, 2 shed per scrape (0.2%);
	// search: none shed. checkout has two instances with the breaker to
	// payments open; search one.
	for i := range 41 {
		at := time.Duration(i) * 15 * time.Second
		n := float64(i)
		for _, svc := range []string{"checkout", "search"} {
			shed := 0.0
			if svc == "checkout" {
				shed = 2 * n
			}
			add(1000*n, at, "__name__", "governor_sdk_requests_total", "service", svc, "instance", "a", "route", "/", "class", "critical", "outcome", "admitted")
			add(shed, at, "__name__", "governor_sdk_requests_total", "service", svc, "instance", "a", "route", "/", "class", "critical", "outcome", "shed")
			// Shadow counts do not dilute the ratio.
			add(1e6*n, at, "__name__", "governor_sdk_requests_total", "service", svc, "instance", "a", "route", "/", "class", "critical", "outcome", "shadow_would_shed")
		}
		add(2, at, "__name__", "governor_sdk_breaker_state", "service", "checkout", "instance", "a", "downstream", "payments")
		add(2, at, "__name__", "governor_sdk_breaker_state", "service", "checkout", "instance", "b", "downstream", "payments")
		add(2, at, "__name__", "governor_sdk_breaker_state", "service", "search", "instance", "a", "downstream", "index")
		add(0.9, at, "__name__", "governor_engine_load_score", "service", "search")
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	ev, err := rule.NewEvaluator(rule.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	q := QueryFromSource(db)
	var res rule.Result
	for i := range 41 {
		res = ev.Eval(context.Background(), start.Add(time.Duration(i)*15*time.Second), q)
		if len(res.Errors) > 0 {
			t.Fatalf("eval: %v", res.Errors)
		}
	}
	got := map[string]alerts.Severity{}
	for _, a := range res.Alerts {
		got[a.Labels["alertname"]+"/"+a.Labels["service"]] = a.Severity()
	}
	want := map[string]alerts.Severity{
		"GovernorCriticalShed/checkout":     alerts.P0, // 0.2% > 0.1%
		"GovernorBreakerOpenFleet/checkout": alerts.P1, // two instances
		"GovernorBreakerOpen/search":        alerts.P2, // one instance
		"GovernorLoadHigh/search":           alerts.P1, // 10m above 0.8
	}
	if len(got) != len(want) {
		t.Fatalf("firing %v, want %v", got, want)
	}
	for k, s := range want {
		if got[k] != s {
			t.Fatalf("firing %v, want %v", got, want)
		}
	}
}

func TestFromEngine(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in       events.Event
		kind     string
		resolved bool
		ok       bool
	}{
		{events.Event{Kind: events.AutoRollback, Service: "a", At: at}, rule.EventAutoRollback, false, true},
		{events.Event{Kind: events.EmergencyPublish, Service: "a", At: at}, rule.EventEmergencyPublish, false, true},
		{events.Event{Kind: events.LeaderLost, At: at}, rule.EventLeaderLost, false, true},
		{events.Event{Kind: events.LeaderAcquired, At: at}, rule.EventLeaderLost, true, true},
		{events.Event{Kind: events.InstanceStale, Service: "a", At: at, Detail: map[string]string{"instance": "i1"}}, rule.EventInstanceStale, false, true},
		{events.Event{Kind: events.InstanceStale, Service: "a", At: at, Detail: distribution.Instance{Instance: "i2", State: distribution.StateNacked}}, rule.EventInstanceNacked, false, true},
		{events.Event{Kind: events.AutoApply, At: at}, "", false, false},
	}
	for _, tt := range tests {
		ev, ok := FromEngine(tt.in)
		if ok != tt.ok || ev.Kind != tt.kind || ev.Resolved != tt.resolved {
			t.Fatalf("FromEngine(%s) = %+v %v", tt.in.Kind, ev, ok)
		}
	}
	ev, _ := FromEngine(tests[4].in)
	if ev.Labels["instance"] != "i1" || ev.Service != "a" {
		t.Fatalf("stale instance labels %+v", ev)
	}
	if ev, _ := FromEngine(tests[5].in); ev.Labels["instance"] != "i2" {
		t.Fatalf("nacked instance labels %+v", ev)
	}
}

// leaderLostRule is GovernorLeaderLost as a configuration may declare it:
// it is no longer built in.
var leaderLostRule = rule.Rule{Name: "GovernorLeaderLost", Event: rule.EventLeaderLost, Severity: alerts.P0}

func TestEngineSinkRaisesAndClearsLeaderLost(t *testing.T) {
	h := newHarness(t)
	if err := h.m.UpdateRules([]rule.Rule{{Name: "x", Expr: "up(", Severity: alerts.P1}}); err == nil {
		t.Fatal("bad rule set accepted")
	}
	if len(h.m.Rules()) != len(testRules)+1 {
		t.Fatalf("bad rule set half-applied: %d rules", len(h.m.Rules()))
	}
	if err := h.m.UpdateRules(append(append(slices.Clone(testRules), rule.Builtin()...), leaderLostRule)); err != nil {
		t.Fatal(err)
	}
	sink := EngineSink{M: h.m}
	// The engine emits leader lost as a warning; the rule's P0 stands.
	sink.Emit(context.Background(), events.Event{Kind: events.LeaderLost, Severity: events.Warning, At: t0})
	h.timeline(0, 30*time.Second, map[time.Duration][]string{30 * time.Second: {"firing GovernorLeaderLost@/firing"}})
	if got := h.pdActions(); len(got) != 1 || got[0] != "trigger" {
		t.Fatalf("leader lost did not page as P0: %v", got)
	}
	sink.Emit(context.Background(), events.Event{Kind: events.LeaderAcquired, At: t0.Add(time.Minute)})
	h.timeline(time.Minute, 2*time.Minute, map[time.Duration][]string{time.Minute + 30*time.Second: {"resolved GovernorLeaderLost@/resolved"}})
}

// GovernorLeaderLost is not built in: with the built-in rules alone an
// engine's leader_lost raises nothing, and a configuration that declares
// the rule gets it raised by leader_lost and cleared by leader_acquired.
func TestConfiguredLeaderLostRaisesAndClears(t *testing.T) {
	h := newHarness(t)
	sink := EngineSink{M: h.m}
	builtin, err := config.Parse([]byte(`{"builtin_rules": "enabled", "receivers": [{"name": "hook", "webhook": {"url": "http://127.0.0.1:1"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.m.UpdateRules(builtin.RuleSet()); err != nil {
		t.Fatal(err)
	}
	sink.Emit(context.Background(), events.Event{Kind: events.LeaderLost, Severity: events.Warning, At: t0})
	h.timeline(0, time.Minute, nil)
	if got := h.pdActions(); len(got) != 0 {
		t.Fatalf("built-in rules paged on leader_lost: %v", got)
	}
	sink.Emit(context.Background(), events.Event{Kind: events.LeaderAcquired, At: t0.Add(time.Minute)})
	h.timeline(time.Minute, 2*time.Minute, nil)

	declared, err := config.Parse([]byte(`{"builtin_rules": "enabled",
		"receivers": [{"name": "hook", "webhook": {"url": "http://127.0.0.1:1"}}],
		"rules": [{"name": "GovernorLeaderLost", "event": "leader_lost", "severity": "P0"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.m.UpdateRules(declared.RuleSet()); err != nil {
		t.Fatal(err)
	}
	sink.Emit(context.Background(), events.Event{Kind: events.LeaderLost, Severity: events.Warning, At: t0.Add(3 * time.Minute)})
	h.timeline(3*time.Minute, 4*time.Minute, map[time.Duration][]string{3*time.Minute + 30*time.Second: {"firing GovernorLeaderLost@/firing"}})
	if got := h.pdActions(); len(got) != 1 || got[0] != "trigger" {
		t.Fatalf("declared GovernorLeaderLost did not page as P0: %v", got)
	}
	sink.Emit(context.Background(), events.Event{Kind: events.LeaderAcquired, At: t0.Add(4 * time.Minute)})
	h.timeline(4*time.Minute, 5*time.Minute, map[time.Duration][]string{4*time.Minute + 30*time.Second: {"resolved GovernorLeaderLost@/resolved"}})
}
