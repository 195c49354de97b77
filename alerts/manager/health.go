package manager

import (
	"maps"
	"slices"
	"time"

	"governor.dev/governor/alerts/rule"
)

// receiverHealth is what makes a receiver failing, which
// GovernorAlertReceiverFailing reports: it gave up on its last
// notification, or its full queue has kept dropping notifications for
// Options.DroppingFor.
type receiverHealth struct {
	gaveUp bool
	// dropFrom and dropLast bound the current run of drops; dropping is
	// set once the run has lasted DroppingFor.
	dropFrom, dropLast time.Time
	dropping           bool
}

func (h receiverHealth) failing() bool { return h.gaveUp || h.dropping }

// dropGap is how long a receiver's queue must drop nothing for its run of
// drops to end: DroppingFor, or, if longer, the group interval plus the
// step interval, as a dropped notification is sent again, and may be
// dropped again, at the group interval after it.
func (m *Manager) dropGap(groupInterval time.Duration) time.Duration {
	return max(m.o.DroppingFor, groupInterval+m.o.Interval)
}

// updateHealth applies f to the health of a receiver in force and raises or
// clears its failing alert when that changes; a receiver no longer routed
// (one finishing its queue after Reconfigure) raises nothing. The event is
// observed under m.mu so that the raises and clears of one receiver reach
// the evaluator in the order they were decided.
func (m *Manager) updateHealth(name string, at time.Time, f func(*receiverHealth)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.routed[name] {
		return
	}
	h := m.health[name]
	was := h.failing()
	f(&h)
	m.health[name] = h
	if h.failing() != was {
		_, _ = m.eval.Observe(rule.Event{Kind: rule.EventReceiverFailing, Labels: map[string]string{"receiver": name},
			At: at, Resolved: !h.failing()})
	}
}

// noteDrop records that the queue of a receiver dropped a notification at
// at; the receiver counts as failing once its run of drops has lasted
// DroppingFor.
func (m *Manager) noteDrop(name string, at time.Time) {
	m.mu.Lock()
	gap := m.gap
	m.mu.Unlock()
	m.updateHealth(name, at, func(h *receiverHealth) {
		if h.dropLast.IsZero() || at.Sub(h.dropLast) >= gap {
			h.dropFrom, h.dropping = at, false
		}
		h.dropLast = at
		if at.Sub(h.dropFrom) >= m.o.DroppingFor {
			h.dropping = true
		}
	})
}

// endDropRuns ends the runs of drops of the receivers whose queues have
// dropped nothing for the drop gap at now: they keep up again.
func (m *Manager) endDropRuns(now time.Time) {
	m.mu.Lock()
	gap := m.gap
	var ended []string
	for _, name := range slices.Sorted(maps.Keys(m.health)) {
		if h := m.health[name]; !h.dropLast.IsZero() && now.Sub(h.dropLast) >= gap {
			ended = append(ended, name)
		}
	}
	m.mu.Unlock()
	for _, name := range ended {
		m.updateHealth(name, now, func(h *receiverHealth) {
			if !h.dropLast.IsZero() && now.Sub(h.dropLast) >= gap { // no drop since
				h.dropFrom, h.dropLast, h.dropping = time.Time{}, time.Time{}, false
			}
		})
	}
}
