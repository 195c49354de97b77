package rule

import (
	"fmt"
	"maps"
	"time"

	"governor.dev/governor/alerts"
)

// Engine condition kinds the built-in rules listen to. The engine's event
// kinds (engine/events) map onto them by name.
const (
	EventBreakerOpen      = "breaker_open"
	EventInstanceStale    = "instance_stale"
	EventInstanceNacked   = "instance_nacked"
	EventAutoRollback     = "auto_rollback"
	EventEmergencyPublish = "emergency_publish"
	EventLeaderLost       = "leader_lost"
	EventAnomaly          = "anomaly"
	// EventAlertLevel: a service's p99 latency or error ratio is above one
	// of its alert levels (labels signal and level; tier P1 for critical,
	// P2 for warn), raised by the engine's level_crossed events and
	// cleared by level_cleared.
	EventAlertLevel = "alert_level"
	// EventReceiverFailing is raised by the alerts manager itself when a
	// receiver gives up on a notification, or its full queue keeps dropping
	// notifications, and cleared when it delivers again, or keeps up again.
	EventReceiverFailing = "receiver_failing"
)

// Event is an engine condition: raised (Resolved false) or cleared.
type Event struct {
	Kind    string
	Service string
	// Labels further identify the subject (instance, downstream, signal).
	Labels map[string]string
	// Severity is the tier for rules that leave theirs empty (anomaly
	// levels); a rule with a tier keeps it.
	Severity alerts.Severity
	At       time.Time
	// Resolved clears the condition for the same subject.
	Resolved bool
}

// Validate names the first bad field.
func (ev Event) Validate() error {
	if ev.Kind == "" {
		return fmt.Errorf("%w: event: kind must not be empty", alerts.ErrInvalid)
	}
	if ev.At.IsZero() {
		return fmt.Errorf("%w: event %s: at must be set", alerts.ErrInvalid, ev.Kind)
	}
	if ev.Severity != "" {
		if _, err := alerts.ParseSeverity(string(ev.Severity)); err != nil {
			return fmt.Errorf("event %s: severity: %w", ev.Kind, err)
		}
	}
	return nil
}

// Observe queues an event for the rules listening to its kind; the next Eval
// applies it. It returns the number of rules that listen.
func (e *Evaluator) Observe(ev Event) (int, error) {
	if err := ev.Validate(); err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.rules {
		if r.Event == ev.Kind && !r.Disabled {
			e.events[r.Name] = append(e.events[r.Name], ev)
			n++
		}
	}
	return n, nil
}

// observeEvents computes which subjects of an event rule hold at t: those
// with a recent raising event and no later resolving one. Callers hold e.mu.
func (r Rule) observeEvents(current map[alerts.Fingerprint]*Active, evs []Event, t time.Time) map[alerts.Fingerprint]observation {
	out := map[alerts.Fingerprint]observation{}
	for fp, a := range current {
		if a.State != alerts.StateInactive && !a.LastEventAt.IsZero() && t.Sub(a.LastEventAt) < r.resolveAfter() {
			out[fp] = observation{labels: a.Labels, value: a.Value, eventAt: a.LastEventAt}
		}
	}
	for _, ev := range evs {
		base := maps.Clone(ev.Labels)
		if base == nil {
			base = map[string]string{}
		}
		if ev.Service != "" {
			base["service"] = ev.Service
		}
		// The rule's tier wins; the event's applies to rules without one.
		sev := r.Severity
		if sev == "" {
			sev = ev.Severity
		}
		l := r.alertLabels(base, sev)
		fp := l.Fingerprint()
		if ev.Resolved {
			delete(out, fp)
			// A resolving event clears every tier of the subject.
			for f, o := range out {
				if sameSubject(o.labels, l) {
					delete(out, f)
				}
			}
			continue
		}
		if t.Sub(ev.At) >= r.resolveAfter() {
			continue
		}
		out[fp] = observation{labels: l, value: 1, eventAt: ev.At}
	}
	return out
}

func sameSubject(a, b alerts.Labels) bool {
	for k, v := range a {
		if k != alerts.SeverityLabel && b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}
