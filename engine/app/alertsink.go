package app

import (
	"context"

	alerts "governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/events"
)

// alertSink feeds engine events to the alerts manager: alerts.EngineSink
// maps the kinds it knows; an instance_recovered event clears the
// instance's stale and nacked alerts at once instead of leaving them to
// expire.
type alertSink struct{ m *alerts.Manager }

var _ events.Sink = alertSink{}

// Emit implements events.Sink.
func (s alertSink) Emit(ctx context.Context, e events.Event) {
	if e.Kind != evaluate.InstanceRecovered {
		alerts.EngineSink{M: s.m}.Emit(ctx, e)
		return
	}
	for _, ev := range recoveryEvents(e) {
		// Observe refuses only invalid events, and these are valid.
		_ = s.m.Observe(ev)
	}
}

// recoveryEvents are the resolving conditions of an instance_recovered
// event: stale and nacked, for the same service and instance labels the
// raising events carried.
func recoveryEvents(e events.Event) []rule.Event {
	r, ok := e.Detail.(evaluate.Recovery)
	if !ok || e.At.IsZero() {
		return nil
	}
	labels := map[string]string{"instance": r.Instance.Instance}
	return []rule.Event{
		{Kind: rule.EventInstanceStale, Service: e.Service, Labels: labels, At: e.At, Resolved: true},
		{Kind: rule.EventInstanceNacked, Service: e.Service, Labels: labels, At: e.At, Resolved: true},
	}
}
