package manager

import (
	"context"
	"slices"
	"time"

	"governor.dev/governor/alerts/rule"
)

// maxForward bounds the events a standby holds for the store (the oldest
// go first when it is full), takeBatch the events the leader takes from
// the store per step, and forwardTimeout each attempt to store the held
// events.
const (
	maxForward     = 1000
	takeBatch      = 1000
	forwardTimeout = 3 * time.Second
)

// Observe feeds an engine condition to the event rules. Only the leader
// evaluates: on a standby the event is held and handed to a background
// writer that stores it at once for the leader, whose next Step evaluates
// it (if the store refuses, the event is kept, up to maxForward, and
// tried again at the next event or Step); when the lead ends, the events
// the evaluator holds unevaluated are handed on the same way (Standby),
// so that an event observed on any replica is evaluated once, by
// whichever replica leads, and never later, stale, by one that leads
// again. Observe never blocks on the store.
func (m *Manager) Observe(ev rule.Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	if !m.observing {
		m.holdLocked(ev)
		select {
		case m.fwdWake <- struct{}{}:
		default:
		}
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

// writeForward is the forward writer: woken by Observe, it stores the
// events held, until closeForward stops it.
func (m *Manager) writeForward() {
	defer close(m.fwdExit)
	for {
		select {
		case <-m.fwdStop:
			return
		case <-m.fwdWake:
		}
		ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
		err := m.flushForward(ctx, m.o.Clock.Now())
		cancel()
		switch {
		case err != nil && !m.fwdFailing:
			m.fwdFailing = true
			m.log.Warn("alert events not forwarded to the store: kept for the next attempt (next event or step)",
				"held", m.heldForward(), "err", err)
		case err == nil && m.fwdFailing:
			m.fwdFailing = false
			m.log.Info("alert events forwarded to the store again")
		}
	}
}

// storeHeld stores the events held for the leader within forwardTimeout
// and logs, saying when, those the store did not take.
func (m *Manager) storeHeld(when string) {
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	err := m.flushForward(ctx, m.o.Clock.Now())
	if n := m.heldForward(); n > 0 {
		m.log.Warn("alert events not forwarded to the store", "when", when, "held", n, "err", err)
	}
}

// closeForward stops the forward writer, then stores what is held; what
// the store does not take is lost, counted and logged.
func (m *Manager) closeForward() {
	close(m.fwdStop)
	<-m.fwdExit
	m.storeHeld("closing: lost")
	m.obsMu.Lock()
	lost := len(m.forward)
	m.forward = nil
	m.obsMu.Unlock()
	if lost > 0 {
		m.m.eventsDrop.WithLabelValues("closed").Add(float64(lost))
	}
}

func (m *Manager) heldForward() int {
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	return len(m.forward)
}

// startObserving makes Observe feed the evaluator, with the events held
// meanwhile first; lead calls it.
func (m *Manager) startObserving() {
	m.fwdMu.Lock()
	defer m.fwdMu.Unlock()
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
// attempt. It runs one at a time (fwdMu).
func (m *Manager) flushForward(ctx context.Context, now time.Time) error {
	m.fwdMu.Lock()
	defer m.fwdMu.Unlock()
	m.obsMu.Lock()
	// Stale events go at once, so that a failing store does not count
	// and log them again at every attempt.
	m.forward = slices.DeleteFunc(m.forward, func(ev rule.Event) bool { return m.stale(ev, now) })
	held := slices.Clone(m.forward)
	dropped := m.fwdDropped
	m.obsMu.Unlock()
	if len(held) == 0 {
		return nil
	}
	if err := m.o.Store.PutEvents(ctx, held); err != nil {
		return m.storeErr(err)
	}
	m.m.events.WithLabelValues("forwarded").Add(float64(len(held)))
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
