package manager

import (
	"context"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/distribution"
)

// EngineSink adapts the manager to the engine's event sink: engine events
// become conditions of the event rules. It never blocks the engine.
type EngineSink struct{ M *Manager }

var _ events.Sink = EngineSink{}

// Emit implements events.Sink.
func (s EngineSink) Emit(_ context.Context, e events.Event) {
	for _, ev := range Conditions(e) {
		if err := s.M.Observe(ev); err != nil {
			s.M.log.Warn("engine event refused by alerts", "kind", e.Kind, "err", err)
		}
	}
}

// Conditions maps an engine event to the rule conditions it raises or
// clears: FromEngine's one, or for instance_recovered two, clearing the
// instance's stale and nacked alerts at once instead of leaving them to
// expire. Kinds without an alert give none.
func Conditions(e events.Event) []rule.Event {
	if e.Kind == events.InstanceRecovered {
		r, ok := e.Detail.(events.Recovery)
		if !ok {
			return nil
		}
		labels := map[string]string{"instance": r.Instance.Instance}
		return []rule.Event{
			{Kind: rule.EventInstanceStale, Service: e.Service, Labels: labels, At: e.At, Resolved: true},
			{Kind: rule.EventInstanceNacked, Service: e.Service, Labels: labels, At: e.At, Resolved: true},
		}
	}
	if ev, ok := FromEngine(e); ok {
		return []rule.Event{ev}
	}
	return nil
}

// FromEngine maps an engine event to a rule condition. Leadership acquired
// resolves leader lost; kinds without an alert report false.
func FromEngine(e events.Event) (rule.Event, bool) {
	ev := rule.Event{Service: e.Service, At: e.At, Severity: severityOf(e.Severity)}
	switch e.Kind {
	case events.AutoRollback:
		ev.Kind = rule.EventAutoRollback
	case events.EmergencyPublish:
		ev.Kind = rule.EventEmergencyPublish
	case events.LeaderLost:
		ev.Kind = rule.EventLeaderLost
	case events.LeaderAcquired:
		ev.Kind, ev.Resolved = rule.EventLeaderLost, true
	case events.InstanceStale:
		// The engine reports stale and nacked instances under one kind,
		// with the ledger record as detail.
		ev.Kind = rule.EventInstanceStale
		switch d := e.Detail.(type) {
		case distribution.Instance:
			ev.Labels = map[string]string{"instance": d.Instance}
			if d.State == distribution.StateNacked {
				ev.Kind = rule.EventInstanceNacked
			}
		case map[string]string:
			if d["instance"] != "" {
				ev.Labels = map[string]string{"instance": d["instance"]}
			}
		}
	case events.BreakerOpen:
		ev.Kind = rule.EventBreakerOpen
	case events.LevelCrossed, events.LevelCleared:
		// One alert per service, signal and level: P1 for critical, P2
		// for warn, whatever the event's severity.
		d, ok := e.Detail.(events.Level)
		if !ok {
			return rule.Event{}, false
		}
		ev.Kind, ev.Resolved, ev.Severity = rule.EventAlertLevel, e.Kind == events.LevelCleared, alerts.P2
		if d.Level == events.LevelCritical {
			ev.Severity = alerts.P1
		}
		ev.Labels = map[string]string{"signal": d.Signal, "level": d.Level}
	default:
		return rule.Event{}, false
	}
	return ev, true
}

func severityOf(s events.Severity) alerts.Severity {
	switch s {
	case events.Critical:
		return alerts.P0
	case events.Warning:
		return alerts.P1
	}
	return alerts.P2
}
