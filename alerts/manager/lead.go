package manager

import (
	"context"
	"errors"
	"fmt"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

// ErrStandby is returned by Step on a manager that does not lead
// (Options.Standby, or Standby called since the last Lead).
var ErrStandby = errors.New("alerts: manager: standby")

var errStandby = fmt.Errorf("%w: this replica does not lead (Lead not called since the start or the last Standby)", ErrStandby)

// Lead makes this replica's manager the one that sends notifications,
// when the replica takes the lead. It first takes over what the store
// holds, as a restart would, since the replica that led meanwhile changed
// it: the alert states (restored over those in memory), the silences and
// acknowledgements, and what each group has notified (a fresh dispatcher
// restored from the stored groups, so that nothing the last leader sent is
// sent again, nor a resolve it owed lost; the one exception is a page the
// last leader sent while its log entry could not be written and did not
// log before it lost the lead, which this one sends again: see send). Then it queues the
// notifications the log holds undelivered, oldest first, those the last
// leader logged and did not deliver included, closes unsent those of
// receivers no longer configured, and lets Step run; its first step tells
// the receivers of every acknowledgement whose message the log does not
// hold yet (one made through a standby the last leader had not read
// included). New calls it unless
// Options.Standby is set, without reading the store twice. A manager that
// leads already is left as it is; a store error leaves it a standby, for
// the caller to try again.
//
// Undelivered notifications are queued as at a restart, so the queues
// keep their order guarantees (notify.Queue): a message still waits for
// the earlier messages of its group and alerts queued before it.
func (m *Manager) Lead(ctx context.Context) error {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	if m.isClosed() {
		return alerts.ErrClosed
	}
	if m.isLeading() {
		return nil
	}
	p, err := loadPersisted(ctx, m.o.Store)
	if err != nil {
		return m.storeErr(err)
	}
	return m.lead(ctx, &p)
}

// persisted is what New and Lead take over from the store besides the log.
type persisted struct {
	states   []rule.Active
	silences []silence.Silence
	acks     []alerts.Ack
	groups   []dispatch.GroupState
}

// loadPersisted reads what a manager takes over from st at its start and
// whenever it takes the lead.
func loadPersisted(ctx context.Context, st store.Store) (p persisted, err error) {
	if p.states, err = st.LoadStates(ctx); err != nil {
		return p, err
	}
	if p.silences, err = st.Silences(ctx); err != nil {
		return p, err
	}
	if p.acks, err = st.Acks(ctx); err != nil {
		return p, err
	}
	p.groups, err = st.Groups(ctx)
	return p, err
}

// lead takes over p (nil: New has just loaded it) and queues the
// undelivered notifications; the caller holds stepMu.
func (m *Manager) lead(ctx context.Context, p *persisted) error {
	// The routing and the leading flag stay as they are while the log is
	// read: a notification logged meanwhile (Acknowledge) is either in the
	// log read or queued by its sender once this returns.
	m.routeMu.Lock()
	if m.leading {
		m.routeMu.Unlock()
		return nil
	}
	pending, err := m.o.Store.Undelivered(ctx)
	if err != nil {
		m.routeMu.Unlock()
		return m.storeErr(err)
	}
	if p != nil {
		disp, err := dispatch.New(m.routes, m.disp.Timing())
		if err != nil { // the routes in force were validated
			m.routeMu.Unlock()
			return err
		}
		disp.Restore(p.groups)
		m.disp = disp
		clear(m.groupsPut)
		clear(m.groupsDrop)
	}
	var gone []store.Pending
	for _, pd := range pending {
		if q := m.queues[pd.Message.Receiver]; q != nil {
			m.enqueue(q, pd.Message)
		} else {
			gone = append(gone, pd)
		}
	}
	m.leading = true
	m.routeMu.Unlock()
	m.startObserving()
	// Every acknowledgement is told to the receivers once more by this
	// leader's first step; the log keeps those already logged from
	// being sent twice.
	m.mu.Lock()
	clear(m.announced)
	m.mu.Unlock()
	if p != nil {
		m.eval.Restore(p.states)
		m.syncMu.Lock()
		m.replaceShared(p.silences, p.acks)
		m.syncMu.Unlock()
		m.adoptFailing()
		m.saved = false
	}
	for _, pd := range gone {
		m.discard(ctx, pd)
	}
	if len(pending) > 0 {
		m.log.Info("alert notifications: leading, undelivered notifications queued", "queued", len(pending)-len(gone),
			"discarded", len(gone))
	}
	return nil
}

// Standby stops this replica's manager from sending when the replica
// loses the lead: it waits for a running Step to end, then stops every
// queue, a delivery in flight included (its attempt is cancelled), and
// gives each receiver an empty queue. What was queued stays undelivered in
// the log, for the next leader's Lead to queue; a delivery the receiver
// accepted before its attempt was cancelled is sent once more by it, as
// after a crash. The engine events the evaluator holds unevaluated are
// stored for the next leader before Standby returns (within
// forwardTimeout; what the store does not take then is kept and tried
// again at the next event or Step, as Observe's). Step refuses
// (ErrStandby) until Lead. Standby on a
// standby or a closed manager does nothing.
func (m *Manager) Standby() {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	if m.isClosed() {
		return
	}
	m.routeMu.Lock()
	if !m.leading {
		m.routeMu.Unlock()
		return
	}
	m.leading = false
	m.stopQueues()
	m.queues = m.newQueues(m.receivers, nil)
	m.routeMu.Unlock()
	m.stopObserving()
	m.storeHeld("standing by")

	// What the queues reported and the next step would have handled is
	// the next leader's: the log keeps those notifications open.
	m.mu.Lock()
	m.failed = nil
	clear(m.owed)    // open in the log, for the next leader
	m.unmarked = nil // likewise
	// Never logged: the next leader, which does not know they were sent,
	// sends them again (send).
	m.unrecorded = nil
	clear(m.resending)
	m.mu.Unlock()
	m.undone = nil
	clear(m.resentAt)
	m.log.Info("alert notifications: standing by, queued notifications left to the next leader")
}

// Leading reports whether this replica's manager sends notifications
// (Lead), or stands by.
func (m *Manager) Leading() bool { return m.isLeading() }

func (m *Manager) isLeading() bool {
	m.routeMu.RLock()
	defer m.routeMu.RUnlock()
	return m.leading
}
