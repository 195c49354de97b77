package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	alerts "governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/sdk/clock"
)

// TestRecoveryClearsInstanceAlerts: an instance that turns STALE, then
// NACKED on another, fires the built-in alerts; instance_recovered clears
// each on the next step, long before an event alert would expire.
func TestRecoveryClearsInstanceAlerts(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, ":memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	var eventRules []rule.Rule // the built-in event rules (PromQL rules need a source)
	for _, r := range rule.Builtin() {
		if r.Event != "" {
			eventRules = append(eventRules, r)
		}
	}
	m, err := alerts.New(ctx, alerts.Options{Rules: eventRules, Store: st, Clock: clk,
		Receivers: map[string]notify.Notifier{"log": logReceiver{log: slog.New(slog.DiscardHandler)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	sink := alertSink{m: m}
	firing := func() map[string]bool {
		out := map[string]bool{}
		for _, s := range m.Alerts(clk.Now()) {
			if s.EndsAt.IsZero() {
				out[s.Labels["alertname"]+"/"+s.Labels["instance"]] = true
			}
		}
		return out
	}
	step := func() {
		t.Helper()
		clk.Advance(15 * time.Second)
		if err := m.Step(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	stale := distribution.Instance{Service: "checkout", Instance: "checkout-1", State: distribution.StateStale}
	nacked := distribution.Instance{Service: "checkout", Instance: "checkout-2", State: distribution.StateNacked}
	for _, in := range []distribution.Instance{stale, nacked} {
		sink.Emit(ctx, events.Event{Kind: events.InstanceStale, Severity: events.Warning, At: clk.Now(), Service: in.Service, Detail: in})
	}
	step()
	if f := firing(); !f["GovernorInstanceStale/checkout-1"] || !f["GovernorInstanceNacked/checkout-2"] {
		t.Fatalf("firing %v, want the stale and the nacked instance", f)
	}
	for _, in := range []distribution.Instance{stale, nacked} {
		sink.Emit(ctx, events.Event{Kind: evaluate.InstanceRecovered, At: clk.Now(), Service: in.Service,
			Detail: evaluate.Recovery{Instance: distribution.Instance{Service: in.Service, Instance: in.Instance, State: distribution.StateSynced}, From: in.State}})
		step()
		if f := firing(); f["GovernorInstanceStale/"+in.Instance] || f["GovernorInstanceNacked/"+in.Instance] {
			t.Fatalf("%s recovered but still firing: %v", in.Instance, f)
		}
	}
	if f := firing(); len(f) != 0 {
		t.Fatalf("still firing %v", f)
	}
	if evs := recoveryEvents(events.Event{Kind: evaluate.InstanceRecovered, At: clk.Now(), Detail: "not a recovery"}); evs != nil {
		t.Fatalf("recovery without its detail: %v", evs)
	}
}
