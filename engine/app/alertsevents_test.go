package app

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	alertsmanager "governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/engine/events"
)

type discardReceiver struct{}

func (discardReceiver) Notify(context.Context, *notify.Message) (bool, error) { return false, nil }

// leadingAlerts starts, on a's database, the alerts manager of another
// replica that leads, with the built-in event rules.
func leadingAlerts(t *testing.T, a *App) *alertsmanager.Manager {
	t.Helper()
	ctx := context.Background()
	st, err := store.New(ctx, a.ledgerDB, a.dialect(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var eventRules []rule.Rule
	for _, r := range rule.Builtin() {
		if r.Event != "" {
			eventRules = append(eventRules, r)
		}
	}
	m, err := alertsmanager.New(ctx, alertsmanager.Options{Rules: eventRules, Store: st, Clock: a.o.Clock,
		Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"discard": discardReceiver{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func fires(m *alertsmanager.Manager, now time.Time, name, service string) bool {
	for _, s := range m.Alerts(now) {
		if s.EndsAt.IsZero() && s.Labels["alertname"] == name && s.Labels["service"] == service {
			return true
		}
	}
	return false
}

// TestEngineEventOnStandbyReplicaAlertsThroughTheLeader: an engine event
// emitted on a standby replica (its sink feeds its own alerts manager,
// which does not evaluate) fires on the leading replica at its next step
// after the standby's.
func TestEngineEventOnStandbyReplicaAlertsThroughTheLeader(t *testing.T) {
	ctx := context.Background()
	a, _, _ := alertsReplica(t, func(*App) {})
	other := leadingAlerts(t, a)
	a.sink.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", Severity: events.Warning, At: a.o.Clock.Now()})
	a.stepAlerts(ctx, a.alerts) // standby: stores the event for the leader
	if err := other.Step(ctx, a.o.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if !fires(other, a.o.Clock.Now(), "GovernorAutoRollback", "checkout") {
		t.Fatalf("the leader does not fire the standby's auto_rollback: %+v", other.Alerts(a.o.Clock.Now()))
	}
}

// TestEngineEventQueuedWhenTheLeadEndsAlertsThroughTheNextLeader: an
// event the leading replica observed but had not evaluated when its lead
// ended is evaluated by the next leader, not kept for this replica's next
// lead.
func TestEngineEventQueuedWhenTheLeadEndsAlertsThroughTheNextLeader(t *testing.T) {
	ctx := context.Background()
	a, _, e := alertsReplica(t, func(*App) {})
	e.setLead(true)
	a.stepAlerts(ctx, a.alerts)
	a.sink.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", Severity: events.Warning, At: a.o.Clock.Now()})
	e.setLead(false)
	a.stepAlerts(ctx, a.alerts) // stands by, then stores the event
	other := leadingAlerts(t, a)
	if err := other.Step(ctx, a.o.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if !fires(other, a.o.Clock.Now(), "GovernorAutoRollback", "checkout") {
		t.Fatalf("the next leader does not fire the event queued at the end of the lead: %+v", other.Alerts(a.o.Clock.Now()))
	}
}
