package manager

import (
	"context"
	"slices"
	"time"

	"governor.dev/governor/alerts/rule"
)

// maxForward bounds the events a standby holds for the store (the oldest
// go first when it is full), and takeBatch the events the leader takes
// from the store per step.
const (
	maxForward = 1000
	takeBatch  = 1000
)

// Observe feeds an engine condition to the event rules. Only the leader
// evaluates: on a standby the event is held and stored by its next Step
// for the leader, whose next Step evaluates it; when the lead ends, the
// events the evaluator holds unevaluated are handed on the same way
// (Standby), so that an event observed on any replica is evaluated once,
// by whichever replica leads, and never later, stale, by one that leads
// again. Observe never blocks on the store.
func (m *Manager) Observe(ev rule.Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	if !m.observing {
		m.holdLocked(ev)
		return nil
	}
	n, err := m.eval.Observe(ev)
	if err != nil {
		return err
	}
	m.countObserved(n)
	return nil
}

func (m *Manager) countObserved(n int) {
	if n == 0 {
		m.m.events.WithLabelValues("unmatched").Inc()
	} else {
		m.m.events.WithLabelValues("matched").Inc()
	}
}

// holdLocked adds ev to the events to forward, dropping the oldest when
// full; the caller holds obsMu.
func (m *Manager) holdLocked(ev rule.Event) {
	if len(m.forward) >= maxForward {
		old := m.forward[0]
		m.forward = slices.Delete(m.forward, 0, 1)
		m.fwdDropped++
		m.m.eventsDrop.WithLabelValues("full").Inc()
		m.log.Warn("alert event dropped: standby forward buffer full (store unreachable?)", "kind", old.Kind,
			"service", old.Service, "at", old.At, "held", maxForward)
	}
	m.forward = append(m.forward, ev)
}

// startObserving makes Observe feed the evaluator, with the events held
// meanwhile first; lead calls it.
func (m *Manager) startObserving() {
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	m.observing = true
	for _, ev := range m.forward {
		if n, err := m.eval.Observe(ev); err == nil {
			m.countObserved(n)
		}
	}
	m.forward = nil
}

// stopObserving makes Observe hold events for the store, and takes from
// the evaluator those it had not evaluated, for the next leader; Standby
// calls it with stepMu held, so no Eval runs meanwhile.
func (m *Manager) stopObserving() {
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	m.observing = false
	queued := m.eval.TakeEvents()
	for _, ev := range queued {
		m.holdLocked(ev)
	}
	if len(queued) > 0 {
		m.log.Info("alert events left unevaluated at the end of the lead: forwarded to the next leader", "events", len(queued))
	}
}

// flushForward stores the events held for the leader; those older than
// EventMaxAge are dropped. On a store error they are kept for the next
// step. The caller holds stepMu.
func (m *Manager) flushForward(ctx context.Context, now time.Time) error {
	m.obsMu.Lock()
	held := slices.Clone(m.forward)
	dropped := m.fwdDropped
	m.obsMu.Unlock()
	if len(held) == 0 {
		return nil
	}
	fresh := slices.DeleteFunc(slices.Clone(held), func(ev rule.Event) bool { return m.stale(ev, now) })
	if err := m.o.Store.PutEvents(ctx, fresh); err != nil {
		return m.storeErr(err)
	}
	m.m.events.WithLabelValues("forwarded").Add(float64(len(fresh)))
	// Events held meanwhile stay, after those stored; those of held that
	// a full buffer dropped meanwhile are gone from its front already.
	m.obsMu.Lock()
	n := max(0, len(held)-(m.fwdDropped-dropped))
	m.forward = slices.Delete(m.forward, 0, min(n, len(m.forward)))
	m.obsMu.Unlock()
	return nil
}

// takeForwarded takes from the store the events the other replicas
// forwarded and queues them, oldest first, for this step's evaluation;
// those older than EventMaxAge are dropped. The caller holds stepMu and
// leads.
func (m *Manager) takeForwarded(ctx context.Context, now time.Time) error {
	evs, err := m.o.Store.TakeEvents(ctx, takeBatch)
	if err != nil {
		return m.storeErr(err)
	}
	evs = slices.DeleteFunc(evs, func(ev rule.Event) bool { return m.stale(ev, now) })
	slices.SortStableFunc(evs, func(a, b rule.Event) int { return a.At.Compare(b.At) })
	for _, ev := range evs {
		n, err := m.eval.Observe(ev)
		if err != nil {
			m.log.Warn("forwarded alert event refused", "kind", ev.Kind, "err", err)
			continue
		}
		m.countObserved(n)
	}
	return nil
}

// stale reports, and counts and logs, an event too old to evaluate.
func (m *Manager) stale(ev rule.Event, now time.Time) bool {
	if now.Sub(ev.At) <= m.o.EventMaxAge {
		return false
	}
	m.m.eventsDrop.WithLabelValues("stale").Inc()
	m.log.Warn("alert event dropped: older than the event max age", "kind", ev.Kind, "service", ev.Service,
		"resolved", ev.Resolved, "at", ev.At, "age", now.Sub(ev.At), "max_age", m.o.EventMaxAge)
	return true
}
