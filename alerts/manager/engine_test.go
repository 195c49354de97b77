package manager

import (
	"context"
	"testing"
	"time"

	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/sdk/clock"
)

// discardNotifier accepts every notification.
type discardNotifier struct{}

func (discardNotifier) Notify(context.Context, *notify.Message) (bool, error) { return false, nil }

// engineHarness is a manager with the built-in event rules (PromQL rules
// need a source) fed through EngineSink on a fake clock.
type engineHarness struct {
	t    *testing.T
	m    *Manager
	clk  *clock.Fake
	sink EngineSink
}

func newEngineHarness(t *testing.T) *engineHarness {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, ":memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := clock.NewFake(t0)
	var eventRules []rule.Rule
	for _, r := range rule.Builtin() {
		if r.Event != "" {
			eventRules = append(eventRules, r)
		}
	}
	m, err := New(ctx, Options{Rules: eventRules, Store: st, Clock: clk, Receivers: map[string]notify.Notifier{"discard": discardNotifier{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return &engineHarness{t: t, m: m, clk: clk, sink: EngineSink{M: m}}
}

func (h *engineHarness) emit(e events.Event) {
	e.At = h.clk.Now()
	h.sink.Emit(context.Background(), e)
}

// step advances the clock by d and evaluates.
func (h *engineHarness) step(d time.Duration) {
	h.t.Helper()
	h.clk.Advance(d)
	if err := h.m.Step(context.Background(), h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
}

// firing returns the firing alerts as alertname/key -> severity, key
// being the label named by key.
func (h *engineHarness) firing(key string) map[string]string {
	out := map[string]string{}
	for _, s := range h.m.Alerts(h.clk.Now()) {
		if s.EndsAt.IsZero() {
			out[s.Labels["alertname"]+"/"+s.Labels[key]] = s.Labels["severity"]
		}
	}
	return out
}

// TestRecoveryClearsInstanceAlerts: an instance that turns STALE, then
// NACKED on another, fires the built-in alerts; instance_recovered clears
// each on the next step, long before an event alert would expire.
func TestRecoveryClearsInstanceAlerts(t *testing.T) {
	h := newEngineHarness(t)
	stale := distribution.Instance{Service: "checkout", Instance: "checkout-1", State: distribution.StateStale}
	nacked := distribution.Instance{Service: "checkout", Instance: "checkout-2", State: distribution.StateNacked}
	for _, in := range []distribution.Instance{stale, nacked} {
		h.emit(events.Event{Kind: events.InstanceStale, Severity: events.Warning, Service: in.Service, Detail: in})
	}
	h.step(15 * time.Second)
	if f := h.firing("instance"); f["GovernorInstanceStale/checkout-1"] == "" || f["GovernorInstanceNacked/checkout-2"] == "" {
		t.Fatalf("firing %v, want the stale and the nacked instance", f)
	}
	for _, in := range []distribution.Instance{stale, nacked} {
		h.emit(events.Event{Kind: events.InstanceRecovered, Service: in.Service,
			Detail: events.Recovery{Instance: distribution.Instance{Service: in.Service, Instance: in.Instance, State: distribution.StateSynced}, From: in.State}})
		h.step(15 * time.Second)
		if f := h.firing("instance"); f["GovernorInstanceStale/"+in.Instance] != "" || f["GovernorInstanceNacked/"+in.Instance] != "" {
			t.Fatalf("%s recovered but still firing: %v", in.Instance, f)
		}
	}
	if f := h.firing("instance"); len(f) != 0 {
		t.Fatalf("still firing %v", f)
	}
	if evs := Conditions(events.Event{Kind: events.InstanceRecovered, At: t0, Detail: "not a recovery"}); evs != nil {
		t.Fatalf("recovery without its detail: %v", evs)
	}
	evs := Conditions(events.Event{Kind: events.InstanceRecovered, Service: "a", At: t0,
		Detail: events.Recovery{Instance: distribution.Instance{Instance: "i1"}}})
	if len(evs) != 2 || evs[0].Kind != rule.EventInstanceStale || evs[1].Kind != rule.EventInstanceNacked ||
		!evs[0].Resolved || !evs[1].Resolved || evs[0].Labels["instance"] != "i1" || evs[1].Service != "a" {
		t.Fatalf("conditions of a recovery %+v", evs)
	}
}

// TestLevelConditions: level events become alert_level conditions labelled
// by signal and level, P1 for critical and P2 for warn, cleared by
// level_cleared; without their detail they are dropped.
func TestLevelConditions(t *testing.T) {
	d := events.Level{Signal: events.SignalErrorRatio, Level: events.LevelCritical, Value: 0.2, Threshold: 0.05}
	evs := Conditions(events.Event{Kind: events.LevelCrossed, Severity: events.Critical, Service: "a", At: t0, Detail: d})
	if len(evs) != 1 || evs[0].Kind != rule.EventAlertLevel || evs[0].Severity != "P1" || evs[0].Resolved ||
		evs[0].Labels["signal"] != "error_ratio" || evs[0].Labels["level"] != "critical" || evs[0].Service != "a" {
		t.Fatalf("critical crossed: %+v", evs)
	}
	d.Level = events.LevelWarn
	evs = Conditions(events.Event{Kind: events.LevelCleared, Severity: events.Info, Service: "a", At: t0, Detail: d})
	if len(evs) != 1 || evs[0].Severity != "P2" || !evs[0].Resolved || evs[0].Labels["level"] != "warn" {
		t.Fatalf("warn cleared: %+v", evs)
	}
	if evs := Conditions(events.Event{Kind: events.LevelCrossed, At: t0, Detail: "no level"}); len(evs) != 0 {
		t.Fatalf("without detail: %+v", evs)
	}
}
