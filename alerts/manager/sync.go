package manager

import (
	"context"
	"errors"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

// Sync reads from the store what every replica on it shares and another
// may have changed: the silences and acknowledgements, made through any
// replica's web UI, and, on a standby, the alert states the leader saved,
// which Alerts shows and Acknowledge looks up. Each Step syncs first, the
// leader's and a standby's alike, so that a silence or acknowledgement
// made through a standby mutes the leader's alerts from its next step and
// a standby's UI is at most one step behind. On a store error what this
// replica holds is kept whole and the error returned.
//
// A sync reads the store's write counters first (store.SharedVersions, one
// small query) and reads again only the tables whose counter moved since
// this replica last read them, so that steps with nothing changed cost one
// query. Every table is read again after a failed sync, when the counters
// cannot be read, and at least once every 20 syncs, for the writes of a
// version that keeps no counters (a rolling upgrade); ExpireSilence and
// a standby's Acknowledge read every table.
func (m *Manager) Sync(ctx context.Context) error {
	if m.isClosed() {
		return alerts.ErrClosed
	}
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	return m.storeErr(m.syncLocked(ctx, !m.isLeading(), false))
}

// fullSyncEvery bounds the syncs between two that read every table.
const fullSyncEvery = 20

// syncState is what Sync keeps between syncs; guarded by syncMu.
type syncState struct {
	// sinceFull counts the syncs since the last that read every table.
	sinceFull int
	// states are the alert states of the last read, from which the alerts
	// shown are derived again at each sync (the rules in force may have
	// changed since).
	states []rule.Active
	// countersFailing: the last read of the counters failed (it was
	// logged).
	countersFailing bool
}

// unknownVersions are counters that match no store's: the tables are read.
var unknownVersions = store.SharedVersions{Silences: -1, Acks: -1, States: -1}

// syncLocked replaces the silences and acknowledgements in memory with the
// store's, and with states the alerts shown too (a standby's, which does
// not evaluate). Nothing is replaced unless everything was read. A table
// whose write counter has not moved since the read that put it in memory
// is not read again, unless full or the last full read is fullSyncEvery-1
// syncs old. The caller holds syncMu, which every write of a silence or
// acknowledgement holds from its store write to its memory update, so that
// a read made before a write never replaces what the write put in memory.
func (m *Manager) syncLocked(ctx context.Context, states, full bool) error {
	full = full || m.lastSync.sinceFull >= fullSyncEvery-1
	cur, err := m.o.Store.SharedVersions(ctx)
	if err != nil {
		if !m.lastSync.countersFailing {
			m.log.Warn("alerts: the shared tables' write counters cannot be read: every sync reads every table", "err", err)
		}
		cur, full = unknownVersions, true
	}
	m.lastSync.countersFailing = err != nil
	m.mu.Lock()
	seen := m.seen
	m.mu.Unlock()
	stale := func(seen, cur int64) bool { return full || seen != cur }
	readSils, readAcks, readStates := stale(seen.Silences, cur.Silences), stale(seen.Acks, cur.Acks),
		states && stale(seen.States, cur.States)
	fail := func(err error) error {
		m.mu.Lock()
		m.seen = unknownVersions
		m.mu.Unlock()
		return err
	}
	var sils []silence.Silence
	if readSils {
		if sils, err = m.o.Store.Silences(ctx); err != nil {
			return fail(err)
		}
	}
	var acks []alerts.Ack
	if readAcks {
		if acks, err = m.o.Store.Acks(ctx); err != nil {
			return fail(err)
		}
	}
	if readStates {
		sts, err := m.o.Store.LoadStates(ctx)
		if err != nil {
			return fail(err)
		}
		m.lastSync.states = sts
	}
	var shown []alerts.Alert
	if states {
		shown = m.shown(m.lastSync.states)
	}
	m.mu.Lock()
	if readSils {
		m.silences.Store(silence.NewSet(sils...))
		m.seen.Silences = cur.Silences
	}
	if readAcks {
		m.setAcks(acks)
		m.seen.Acks = cur.Acks
	}
	if states {
		m.current, m.firingAt = shown, nil
		if readStates {
			m.seen.States = cur.States
		}
	}
	m.mu.Unlock()
	if readSils && readAcks && (readStates || !states) {
		m.lastSync.sinceFull = 0
	} else {
		m.lastSync.sinceFull++
	}
	return nil
}

// replaceShared puts the silences and acknowledgements read from the store
// in place of those in memory; New and Lead call it. The next Sync reads
// every table: what was read here has no counter. The caller holds syncMu
// (New: before anything else can run).
func (m *Manager) replaceShared(sils []silence.Silence, acks []alerts.Ack) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.silences.Store(silence.NewSet(sils...))
	m.setAcks(acks)
	m.seen = unknownVersions
}

// setAcks replaces the acknowledgements in memory; the caller holds mu.
func (m *Manager) setAcks(acks []alerts.Ack) {
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
