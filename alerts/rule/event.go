package rule

import (
	"fmt"
	"maps"
	"time"

	"governor.dev/governor/alerts"
)

// Engine condition kinds event rules listen to. The engine's event kinds
// (engine/events) map onto them by name. No built-in rule listens to
// EventLeaderLost (raised by leader_lost, cleared by leader_acquired); a
// configured rule may.
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

// Event is an engine condition: raised (Resolved false) or cleared. Its
// JSON form is how a standby replica hands it to the leader through the
// alerts store.
type Event struct {
	Kind    string `json:"kind"`
	Service string `json:"service,omitempty"`
	// Labels further identify the subject (instance, downstream, signal).
	Labels map[string]string `json:"labels,omitempty"`
	// Severity is the tier for rules that leave theirs empty (anomaly
	// levels); a rule with a tier keeps it.
	Severity alerts.Severity `json:"severity,omitempty"`
	At       time.Time       `json:"at"`
	// Resolved clears the condition for the same subject.
	Resolved bool `json:"resolved,omitempty"`
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
// with a recent raising event and no later clearing one. Events may come
// out of order (a standby forwards its own through the store), so cleared
// holds when each subject was last cleared: a raise no later than that is
// ignored, and a clear removes only raises no later than itself. Entries
// older than the rule's resolve-after are pruned, as a raise that old is
// ignored anyway. Callers hold e.mu.
func (r Rule) observeEvents(current map[alerts.Fingerprint]*Active, evs []Event, t time.Time, cleared map[alerts.Fingerprint]time.Time) map[alerts.Fingerprint]observation {
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
		subj := subjectOf(l)
		if ev.Resolved {
			if ev.At.After(cleared[subj]) {
				cleared[subj] = ev.At
			}
			// A clearing event clears every tier of the subject, raised
			// no later than itself.
			for f, o := range out {
				if (f == fp || sameSubject(o.labels, l)) && !o.eventAt.After(ev.At) {
					delete(out, f)
				}
			}
			continue
		}
		if t.Sub(ev.At) >= r.resolveAfter() {
			continue
		}
		if c, ok := cleared[subj]; ok && !ev.At.After(c) {
			continue
		}
		if o, ok := out[fp]; ok && o.eventAt.After(ev.At) {
			continue
		}
		out[fp] = observation{labels: l, value: 1, eventAt: ev.At}
	}
	for subj, at := range cleared {
		if t.Sub(at) >= r.resolveAfter() {
			delete(cleared, subj)
		}
	}
	return out
}

// subjectOf identifies the subject of alert labels, whatever their tier.
func subjectOf(l alerts.Labels) alerts.Fingerprint {
	c := maps.Clone(l)
	delete(c, alerts.SeverityLabel)
	return c.Fingerprint()
}

func sameSubject(a, b alerts.Labels) bool {
	for k, v := range a {
		if k != alerts.SeverityLabel && b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// TakeEvents removes and returns the events queued for the next Eval, each
// once however many rules listen to it, in the order observed per rule
// (the first listening rule's order first): what a replica that stops
// evaluating (it lost the lead) hands on, so that the events are neither
// lost nor applied, stale, when it evaluates again. An Eval running
// meanwhile may already have applied some of them.
func (e *Evaluator) TakeEvents() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	type key struct {
		kind, service string
		labels        alerts.Fingerprint
		severity      alerts.Severity
		at            int64
		resolved      bool
	}
	seen := map[key]bool{}
	var out []Event
	for _, r := range e.rules {
		for _, ev := range e.events[r.Name] {
			k := key{ev.Kind, ev.Service, alerts.Labels(ev.Labels).Fingerprint(), ev.Severity, ev.At.UnixNano(), ev.Resolved}
			if !seen[k] {
				seen[k] = true
				out = append(out, ev)
			}
		}
	}
	clear(e.events)
	return out
}
