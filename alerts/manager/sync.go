package manager

import (
	"context"
	"errors"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
)

// Sync reads from the store what every replica on it shares and another
// may have changed: the silences and acknowledgements, made through any
// replica's web UI, and, on a standby, the alert states the leader saved,
// which Alerts shows and Acknowledge looks up. Each Step syncs first, the
// leader's and a standby's alike, so that a silence or acknowledgement
// made through a standby mutes the leader's alerts from its next step and
// a standby's UI is at most one step behind. On a store error what this
// replica holds is kept whole and the error returned.
func (m *Manager) Sync(ctx context.Context) error {
	if m.isClosed() {
		return alerts.ErrClosed
	}
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	return m.storeErr(m.syncLocked(ctx, !m.isLeading()))
}

// syncLocked replaces the silences and acknowledgements in memory with the
// store's, and with states the alerts shown too (a standby's, which does
// not evaluate). Nothing is replaced unless everything was read. The
// caller holds syncMu, which every write of a silence or acknowledgement
// holds from its store write to its memory update, so that a read made
// before a write never replaces what the write put in memory.
func (m *Manager) syncLocked(ctx context.Context, states bool) error {
	sils, err := m.o.Store.Silences(ctx)
	if err != nil {
		return err
	}
	acks, err := m.o.Store.Acks(ctx)
	if err != nil {
		return err
	}
	var cur []alerts.Alert
	if states {
		sts, err := m.o.Store.LoadStates(ctx)
		if err != nil {
			return err
		}
		cur = m.shown(sts)
	}
	m.replaceShared(sils, acks)
	if states {
		m.mu.Lock()
		m.current, m.firingAt = cur, nil
		m.mu.Unlock()
	}
	return nil
}

// replaceShared puts the silences and acknowledgements read from the store
// in place of those in memory; New, Lead and Sync call it. The caller
// holds syncMu (New: before anything else can run).
func (m *Manager) replaceShared(sils []silence.Silence, acks []alerts.Ack) {
	m.silences.Store(silence.NewSet(sils...))
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.acks)
	for _, a := range acks {
		m.acks[a.Fingerprint] = a
	}
}

// shown returns the alerts of states that Alerts lists: firing, or
// resolved after firing, of the rules in force.
func (m *Manager) shown(states []rule.Active) []alerts.Alert {
	enabled := map[string]bool{}
	for _, r := range m.eval.Rules() {
		enabled[r.Name] = !r.Disabled
	}
	var out []alerts.Alert
	for _, st := range states {
		if !enabled[st.Rule] {
			continue
		}
		if st.State == alerts.StateFiring || (!st.ResolvedAt.IsZero() && !st.FiredAt.IsZero()) {
			out = append(out, st.Alert())
		}
	}
	return out
}

// sils returns the silences in force in this replica.
func (m *Manager) sils() *silence.Set { return m.silences.Load() }

// announceAcks tells the receivers of the acknowledgements of firing
// alerts that this replica has not announced while leading: those made
// through another replica and read by Sync, and, after Lead, every one
// (the log keeps one message per group and episode, so one already logged
// is not sent again). The caller holds stepMu and routeMu for reading.
func (m *Manager) announceAcks(ctx context.Context, now time.Time, firing []alerts.Alert, acks map[alerts.Fingerprint]alerts.Ack) error {
	if len(acks) == 0 {
		m.mu.Lock()
		clear(m.announced)
		m.mu.Unlock()
		return nil
	}
	var due []alerts.Alert
	m.mu.Lock()
	live := map[episode]bool{}
	for _, a := range firing {
		ack, ok := acks[a.Fingerprint()]
		if !ok || !ack.Covers(a) {
			continue
		}
		ep := episode{fp: ack.Fingerprint, startsAt: ack.StartsAt.UnixNano()}
		live[ep] = true
		if !m.announced[ep] {
			m.announced[ep] = true
			due = append(due, a)
		}
	}
	for ep := range m.announced {
		if !live[ep] {
			delete(m.announced, ep)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, a := range due {
		for _, msg := range m.disp.Acknowledge(now, a) {
			// After a takeover every acknowledgement comes here, most
			// long closed in the log: a read skips those at less than
			// the cost of a write the log would refuse.
			if _, closed, err := m.o.Store.Delivered(ctx, msg.ID); err == nil && closed {
				continue
			}
			errs = append(errs, m.send(ctx, nil, msg))
		}
	}
	return errors.Join(errs...)
}
