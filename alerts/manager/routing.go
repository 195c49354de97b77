package manager

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/inhibit"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
)

// Routing is where notifications go: the part of the configuration that
// Reconfigure replaces while the manager runs.
type Routing struct {
	// Routes are required with several receivers; with one receiver they
	// default to a single route to it. One must catch every alert
	// (dispatch.ValidateRoutes).
	Routes []dispatch.Route
	Timing dispatch.Timing
	// Inhibit defaults to inhibit.Defaults(); NoInhibition turns it off.
	Inhibit      []inhibit.Rule
	NoInhibition bool
	// Receivers by name; at least one.
	Receivers map[string]notify.Notifier
}

func (r Routing) withDefaults() (Routing, error) {
	if len(r.Receivers) == 0 {
		return r, fmt.Errorf("%w: manager: at least one receiver is required", alerts.ErrInvalid)
	}
	if len(r.Routes) == 0 {
		if len(r.Receivers) != 1 {
			return r, fmt.Errorf("%w: manager: routes are required with more than one receiver", alerts.ErrInvalid)
		}
		for name := range r.Receivers {
			r.Routes = []dispatch.Route{{Receiver: name}}
		}
	}
	for i, rt := range r.Routes {
		if r.Receivers[rt.Receiver] == nil {
			return r, fmt.Errorf("%w: manager: routes[%d]: receiver %q is not configured", alerts.ErrInvalid, i, rt.Receiver)
		}
	}
	if r.Inhibit == nil && !r.NoInhibition {
		r.Inhibit = inhibit.Defaults()
	}
	if r.NoInhibition {
		r.Inhibit = nil
	}
	return r, nil
}

// Reconfigure replaces the routes, timing, inhibition rules and receivers
// at once, between two steps. The new routing is validated whole first; on
// any error the old one stays. Notifications already queued finish on the
// receivers that accepted them (with their retries); every notification
// decided after Reconfigure returns uses the new routing. A receiver kept
// by name gets a new queue that holds back a notification while its
// replaced queue still holds an earlier one of the same group or alert
// (notify.QueueOptions.Replaces), so that a resolve decided after the swap
// never reaches the receiver before the trigger the replaced queue is
// still retrying. Groups keep what
// they have notified when their receiver is still routed to, so a swap
// neither repeats nor loses a page; when the receiver's group_by changed,
// the alerts it notified move to their new groups (dispatch.Restore), so
// none is reported resolved, or paged again, because its grouping changed,
// and its resolve comes from the new group (the next Step stores the new
// groups and removes the stored states of the groups they left, in one
// transaction); groups of receivers no route names any more are forgotten,
// and their stored states removed at the next Step, so a receiver added back
// later starts afresh; a removed receiver's failing alert is resolved.
func (m *Manager) Reconfigure(r Routing) error {
	r, err := r.withDefaults()
	if err != nil {
		return err
	}
	disp, err := dispatch.New(r.Routes, r.Timing)
	if err != nil {
		return err
	}
	inhib, err := inhibit.New(r.Inhibit)
	if err != nil {
		return err
	}
	// No step flushes while the routing changes.
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	if m.isClosed() {
		return alerts.ErrClosed
	}
	m.routeMu.Lock()
	disp.Restore(m.disp.States())
	// The replaced queues stop taking messages first: a new queue of the
	// same receiver holds back what must follow a message they still hold.
	for _, name := range slices.Sorted(maps.Keys(m.queues)) {
		q := m.queues[name]
		q.Retire()
		m.retiring = append(m.retiring, q)
	}
	m.retiring = slices.DeleteFunc(m.retiring, func(q *notify.Queue) bool {
		select {
		case <-q.Retire():
			return true
		default:
			return false
		}
	})
	m.disp, m.inhib, m.queues = disp, inhib, m.newQueues(r.Receivers, m.retiring)
	m.receivers, m.routes = r.Receivers, r.Routes
	m.resend = resendIntervals(r.Receivers)
	m.routeMu.Unlock()

	m.mu.Lock()
	m.routed = map[string]bool{}
	for name := range r.Receivers {
		m.routed[name] = true
	}
	m.gap = m.dropGap(disp.Timing().GroupInterval)
	var gone []string
	for name, h := range m.health {
		if _, ok := r.Receivers[name]; !ok {
			if h.failing() {
				gone = append(gone, name)
			}
			delete(m.health, name)
		}
	}
	m.mu.Unlock()
	m.resolveFailing(gone)
	warnShortRepeats(m.log, disp.Timing())
	return nil
}

// warnShortRepeats logs, as Alertmanager does, each tier whose repeat
// interval is below the group interval: its groups repeat every group
// interval (dispatch.Timing.Repeat).
func warnShortRepeats(log *slog.Logger, t dispatch.Timing) {
	for _, s := range t.ShortRepeats() {
		log.Warn("alert repeat interval is below the group interval: notifications repeat every group interval",
			"severity", s, "repeat", t.Repeat[s], "group_interval", t.GroupInterval)
	}
}

// resolveFailing clears the failing alerts of receivers that are gone.
func (m *Manager) resolveFailing(receivers []string) {
	now := m.o.Clock.Now()
	for _, name := range receivers {
		_, _ = m.eval.Observe(rule.Event{Kind: rule.EventReceiverFailing, Labels: map[string]string{"receiver": name},
			At: now, Resolved: true})
	}
}

// Receivers lists the receivers in force, sorted.
func (m *Manager) Receivers() []string {
	m.routeMu.RLock()
	defer m.routeMu.RUnlock()
	return slices.Sorted(maps.Keys(m.queues))
}
