package manager

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
)

// owedAck is an acknowledgement message its receiver gave up on or its
// full queue dropped: its log entry stays open, and a later step queues it
// again while the acknowledgement lasts (resendAcks). Its message ID is
// fixed per group and firing episode, so neither a second Acknowledge nor
// a new leader's announceAcks logs it again.
type owedAck struct {
	msg *notify.Message
	// attempts are those made so far, added to the log entry when it is
	// closed; err is the last failure and at its time.
	attempts int
	err      string
	at       time.Time
	// queued: queued again, awaiting its result.
	queued bool
}

// oweAck records that the acknowledgement msg failed (attempts made, err)
// at now and is still owed; the caller holds mu.
func (m *Manager) oweAck(msg *notify.Message, attempts int, err string, now time.Time) {
	o := m.owed[msg.ID]
	if o == nil {
		o = &owedAck{msg: msg}
		m.owed[msg.ID] = o
	}
	o.attempts += attempts
	o.err, o.at, o.queued = err, now, false
}

// ackDelivered forgets an owed acknowledgement now delivered and returns
// the attempts made before, for its log entry; the caller holds mu.
func (m *Manager) ackDelivered(id string) (earlier int) {
	if o := m.owed[id]; o != nil {
		earlier = o.attempts
		delete(m.owed, id)
	}
	return earlier
}

// resendAcks queues again each owed acknowledgement whose acknowledgement
// still covers its firing alert, a group interval after it failed, so that
// the receiver (PagerDuty) stops escalating an incident a person handles
// however long it was down or refused the message; one a step is still
// waiting for is left queued. The log entry of one whose acknowledgement
// ended (the alert resolved), or whose receiver is no longer configured,
// is closed with its last error. The caller holds stepMu and routeMu for
// reading.
func (m *Manager) resendAcks(ctx context.Context, now time.Time, firing []alerts.Alert, acks map[alerts.Fingerprint]alerts.Ack) error {
	wait := m.disp.Timing().GroupInterval
	var due []*notify.Message
	var closed []owedAck
	m.mu.Lock()
	if len(m.owed) == 0 {
		m.mu.Unlock()
		return nil
	}
	live := firingEpisodes(firing)
	for _, id := range slices.Sorted(maps.Keys(m.owed)) {
		o := m.owed[id]
		if o.queued {
			continue
		}
		var a alerts.Alert // an acknowledgement reports one alert
		if len(o.msg.Alerts) > 0 {
			a = o.msg.Alerts[0].Alert
		}
		fp := a.Fingerprint()
		ack, ok := acks[fp]
		ep := episode{fp: fp, startsAt: a.StartsAt.UnixNano()}
		switch {
		case len(o.msg.Alerts) == 0 || !ok || !ack.StartsAt.Equal(a.StartsAt) || !live[ep]:
			closed = append(closed, *o)
			delete(m.owed, id)
		case m.queues[o.msg.Receiver] == nil:
			o.err = errReceiverGone
			closed = append(closed, *o)
			delete(m.owed, id)
		case now.Sub(o.at) >= wait:
			// Marked before it is queued: the queue may be done with it
			// before Enqueue returns.
			o.queued = true
			due = append(due, o.msg)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, o := range closed {
		errs = append(errs, m.markDelivered(ctx, mark{id: o.msg.ID, at: o.at, attempts: o.attempts, err: o.err}))
	}
	for _, msg := range due {
		m.enqueue(m.queues[msg.Receiver], msg)
	}
	return errors.Join(errs...)
}
