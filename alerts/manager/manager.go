package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/inhibit"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

// Manager runs the pipeline. It is safe for concurrent use.
type Manager struct {
	o        Options
	log      *slog.Logger
	eval     *rule.Evaluator
	silences atomic.Pointer[silence.Set] // replaced whole by Sync
	m        *metrics

	// syncMu makes each write of a silence or acknowledgement (the store,
	// then memory) one step with respect to Sync (a read of the store,
	// then memory replaced), so that Sync never undoes a write it did not
	// read.
	syncMu   sync.Mutex
	lastSync syncState // guarded by syncMu

	// routeMu guards the routing: Reconfigure swaps it under the write
	// lock; flushing, sending and acknowledging hold the read lock.
	routeMu  sync.RWMutex
	disp     *dispatch.Dispatcher
	inhib    *inhibit.Inhibitor
	queues   map[string]*notify.Queue
	retiring []*notify.Queue // replaced queues finishing their messages
	// receivers and routes are those of the routing in force: Standby
	// gives the receivers fresh queues, Lead the routes a fresh
	// dispatcher.
	receivers map[string]notify.Notifier
	routes    []dispatch.Route
	// leading: this replica sends notifications (Lead, Standby). A
	// standby's queues stay empty.
	leading bool
	// resend holds the resend interval of each receiver that is a
	// notify.Resender.
	resend map[string]time.Duration

	stepMu sync.Mutex // one Step at a time
	mu     sync.Mutex
	acks   map[alerts.Fingerprint]alerts.Ack
	// seen holds the store's write counters as of the reads that put the
	// silences, the acknowledgements and the shown states in memory; -1
	// when memory may differ from the store as of any counter (Sync reads
	// that table again). Guarded by mu, so that a read's counter is
	// recorded with what it read, and a change of memory made without the
	// store unrecords it at once.
	seen store.SharedVersions
	// announced holds the acknowledged firing episodes whose
	// acknowledgement this replica has logged for the receivers while
	// leading (announceAcks); cleared by Lead.
	announced map[episode]bool
	current   []alerts.Alert
	// firingAt indexes the firing alerts of current by fingerprint; built
	// by the first Acknowledge after current changes (nil until then), so
	// that acknowledging k alerts of a storm of n costs O(n+k), not O(n·k),
	// and steps without acknowledgements pay nothing.
	firingAt map[alerts.Fingerprint]int
	// health says which receivers in force are failing, and why.
	health map[string]receiverHealth
	// gap is the drop gap (dropGap) of the timing in force.
	gap time.Duration
	// routed names the receivers in force: a replaced receiver finishing
	// its queue raises no failing alert.
	routed map[string]bool
	closed bool

	// failed holds the notifications given up by their receiver, for the
	// next step to take back from their groups (dispatch.Undo); guarded by
	// mu. undone holds those taken back whose log entries stay open until
	// the groups are stored; guarded by stepMu.
	failed, undone []failure
	// owed holds the acknowledgements given up or dropped, by message ID,
	// for a later step to queue again (resendAcks); guarded by mu.
	owed map[string]*owedAck
	// unmarked holds the log entries whose closing write failed (the
	// store down), for the next steps to write again (retryMarks);
	// guarded by mu.
	unmarked []mark
	// unrecorded holds the notifications queued although their log entry
	// could not be written (the store down), for the next steps to log
	// (retryRecords) before their closing writes; guarded by mu.
	unrecorded []record

	// resentAt is when each Resender's firing alerts were last queued
	// again (guarded by stepMu); resending names those whose resend is
	// still queued (guarded by mu).
	resentAt  map[string]time.Time
	resending map[string]bool

	// obsMu guards observing: whether Observe feeds the evaluator (the
	// leader) or forward (a standby), and forward, the events a standby
	// observed and has not yet stored for the leader (forward.go).
	obsMu     sync.Mutex
	observing bool
	forward   []rule.Event
	// fwdDropped counts the events dropped from the front of forward.
	fwdDropped int
	// fwdMu makes each store attempt of forward (the writer's, a standby
	// Step's, Close's) and startObserving one step with respect to each
	// other, so that no event is both stored and evaluated locally. Taken
	// after stepMu, before obsMu.
	fwdMu sync.Mutex
	// fwdWake wakes the forward writer (capacity 1, never blocks);
	// fwdStop stops it and fwdExit is closed when it has (forward.go).
	fwdWake, fwdStop, fwdExit chan struct{}
	fwdFailing                bool // the writer's last attempt failed; writer only

	lastPrune time.Time // guarded by stepMu
	saved     bool      // guarded by stepMu: the store holds the states
	// groupsPut and groupsDrop are the group changes (dispatch.TakeChanges)
	// not yet in the store; guarded by stepMu.
	groupsPut, groupsDrop map[dispatch.GroupRef]bool
}

// New validates the options, loads the persisted state from the store and
// starts a queue per receiver; undelivered notifications are queued again,
// those of receivers no longer configured closed unsent (discard), and the
// stored groups of receivers no route names are removed at the first Step.
// With Options.Standby the undelivered notifications are left in the log
// until Lead.
func New(ctx context.Context, o Options) (*Manager, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	ev, err := rule.NewEvaluator(o.Rules)
	if err != nil {
		return nil, err
	}
	disp, err := dispatch.New(o.Routes, o.Timing)
	if err != nil {
		return nil, err
	}
	warnShortRepeats(o.Logger, disp.Timing())
	inhib, err := inhibit.New(o.Inhibit)
	if err != nil {
		return nil, err
	}
	p, err := loadPersisted(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	ev.Restore(p.states)
	disp.Restore(p.groups)
	m := &Manager{o: o, log: o.Logger, eval: ev, disp: disp, inhib: inhib, announced: map[episode]bool{},
		queues: map[string]*notify.Queue{}, m: newMetrics(o.Registerer), acks: map[alerts.Fingerprint]alerts.Ack{},
		health: map[string]receiverHealth{}, routed: map[string]bool{}, groupsPut: map[dispatch.GroupRef]bool{},
		groupsDrop: map[dispatch.GroupRef]bool{}, resend: resendIntervals(o.Receivers), resentAt: map[string]time.Time{},
		resending: map[string]bool{}, owed: map[string]*owedAck{}, receivers: o.Receivers, routes: o.Routes}
	m.fwdWake, m.fwdStop, m.fwdExit = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	m.gap = m.dropGap(disp.Timing().GroupInterval)
	for name := range o.Receivers {
		m.routed[name] = true
	}
	m.replaceShared(p.silences, p.acks)
	// The alerts are those of the states the evaluator kept: the states of
	// rules removed or disabled since the last run are not shown, not even
	// before the first step.
	m.current = m.shown(ev.States())
	m.adoptFailing()
	m.queues = m.newQueues(o.Receivers, nil)
	if !o.Standby {
		m.stepMu.Lock()
		err := m.lead(ctx, nil)
		m.stepMu.Unlock()
		if err != nil {
			m.closeQueues()
			return nil, err
		}
	}
	go m.writeForward()
	return m, nil
}

// adoptFailing takes over, from the restored alert states, which receivers
// were failing: one still configured clears its alert with its next
// delivery, one no longer configured at once (Reconfigure).
func (m *Manager) adoptFailing() {
	var gone []string
	m.mu.Lock()
	for _, st := range m.eval.States() {
		if st.Rule != rule.ReceiverFailingRule || st.State == alerts.StateInactive {
			continue
		}
		if name := st.Labels["receiver"]; m.routed[name] {
			h := m.health[name]
			h.gaveUp = true
			m.health[name] = h
		} else {
			gone = append(gone, name)
		}
	}
	m.mu.Unlock()
	m.resolveFailing(gone)
}

// errReceiverGone is the log entry's error of an undelivered notification
// whose receiver is no longer configured.
const errReceiverGone = "receiver no longer configured"

// discard closes, unsent, the log entry of an undelivered notification
// whose receiver is no longer configured: nothing could ever send it, and
// it would otherwise be loaded again at every start. It is counted and
// logged; a store error leaves it for the next start.
func (m *Manager) discard(ctx context.Context, p store.Pending) {
	msg := p.Message
	m.m.discarded.Inc()
	m.log.Warn("alert notification discarded: receiver no longer configured", "receiver", msg.Receiver,
		"group", msg.GroupKey, "kind", msg.Kind, "id", msg.ID, "created_at", msg.CreatedAt)
	if err := m.o.Store.MarkDelivered(ctx, msg.ID, m.o.Clock.Now(), 0, errReceiverGone); err != nil {
		m.m.storeErrors.Inc()
		m.log.Error("alert notification log not updated", "id", msg.ID, "err", err)
	}
}

// Close stops the queues. Undelivered notifications stay in the log and
// are sent by the next manager on the same store. The engine events this
// replica holds for the leader (Observe) are stored, within
// forwardTimeout, for the next leader to evaluate: a standby's, and a
// leader's not yet evaluated, as at Standby (Close waits for a running
// Step to end); those the store does not take by then are lost, counted
// and logged. The store is not closed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.closeQueues()
	m.stepMu.Lock()
	m.stopObserving()
	m.stepMu.Unlock()
	m.closeForward()
	return nil
}

// closeQueues stops every queue, the retiring ones too, abandoning what
// they hold (the log keeps it undelivered).
func (m *Manager) closeQueues() {
	m.routeMu.Lock()
	defer m.routeMu.Unlock()
	m.stopQueues()
}

// stopQueues closes every queue and forgets the retiring ones; the caller
// holds routeMu.
func (m *Manager) stopQueues() {
	for _, q := range m.queues {
		q.Close()
	}
	for _, q := range m.retiring {
		q.Close()
	}
	m.retiring = nil
}

// newQueues starts a queue per receiver; one named like a retiring queue
// replaces it (notify.QueueOptions.Replaces), retiring oldest first.
func (m *Manager) newQueues(receivers map[string]notify.Notifier, retiring []*notify.Queue) map[string]*notify.Queue {
	out := make(map[string]*notify.Queue, len(receivers))
	for _, name := range slices.Sorted(maps.Keys(receivers)) {
		qo := m.o.Queue
		qo.Clock, qo.Logger, qo.Metrics, qo.OnResult, qo.OnDrop = m.o.Clock, m.o.Logger, m.m.delivery, m.onResult, m.onDrop
		qo.Replaces = slices.DeleteFunc(slices.Clone(retiring), func(q *notify.Queue) bool { return q.Name() != name })
		out[name] = notify.NewQueue(name, receivers[name], qo)
	}
	return out
}

// Idle waits until every queued notification has had its last attempt,
// on the receivers in force and on those being replaced.
func (m *Manager) Idle(ctx context.Context) error {
	m.routeMu.RLock()
	qs := slices.Clone(m.retiring)
	for _, name := range slices.Sorted(maps.Keys(m.queues)) {
		qs = append(qs, m.queues[name])
	}
	m.routeMu.RUnlock()
	for _, q := range qs {
		if err := q.Idle(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Run steps every Interval on the clock until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	for {
		if err := m.Step(ctx, m.o.Clock.Now()); err != nil {
			m.log.Error("alert step failed", "err", err)
		}
		t := m.o.Clock.NewTimer(m.o.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// Step reads what other replicas changed in the store (Sync), evaluates
// the rules at now, with the engine events the other replicas forwarded
// through the store, and sends what is due. Errors of single rules and of
// the store are counted and joined; the step still completes, a failed
// Sync with the silences and acknowledgements of the last one. A
// standby's Step only syncs, stores the engine events it observed for the
// leader (Observe), sends nothing and returns ErrStandby (Lead), joined
// with the Sync's or the store's error if any.
func (m *Manager) Step(ctx context.Context, now time.Time) error {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	if m.isClosed() {
		return alerts.ErrClosed
	}
	if !m.isLeading() {
		return errors.Join(errStandby, m.follow(ctx, now))
	}
	return m.step(ctx, now)
}

// Follow is the step of a replica that stands by, for a caller that knows
// it does: it reads what other replicas changed in the store (Sync, alert
// states included) and stores the engine events observed for the leader,
// and returns only what failed in that (nil when nothing did), never
// ErrStandby. On a manager that leads it is Step.
func (m *Manager) Follow(ctx context.Context, now time.Time) error {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	if m.isClosed() {
		return alerts.ErrClosed
	}
	if m.isLeading() {
		return m.step(ctx, now)
	}
	return m.follow(ctx, now)
}

// follow is a standby's step (stepMu held).
func (m *Manager) follow(ctx context.Context, now time.Time) error {
	m.syncMu.Lock()
	syncErr := m.storeErr(m.syncLocked(ctx, true, false))
	m.syncMu.Unlock()
	return errors.Join(syncErr, m.flushForward(ctx, now))
}

// step is a leader's step (stepMu held).
func (m *Manager) step(ctx context.Context, now time.Time) error {
	m.syncMu.Lock()
	syncErr := m.storeErr(m.syncLocked(ctx, false, false))
	m.syncMu.Unlock()
	m.m.evals.Inc()
	m.endDropRuns(now)
	takeErr := m.takeForwarded(ctx, now)
	res := m.eval.Eval(ctx, now, m.o.Query)
	errs := append([]error{syncErr, takeErr}, res.Errors...)
	m.m.evalErrors.Add(float64(len(res.Errors)))
	// States are written when they changed, and on the first step (the
	// values and annotations of a restored set are refreshed).
	if res.Changed || !m.saved {
		err := m.storeErr(m.o.Store.SaveStates(ctx, m.eval.States()))
		m.saved = err == nil
		errs = append(errs, err)
	}
	errs = append(errs, m.storeErr(m.o.Store.AppendHistory(ctx, res.Transitions)))

	firing := slices.DeleteFunc(slices.Clone(res.Alerts), func(a alerts.Alert) bool { return !a.EndsAt.IsZero() })
	// An acknowledgement lasts until its alert resolves, then re-arms.
	m.mu.Lock()
	m.current = res.Alerts
	m.firingAt = nil
	m.seen.States = -1 // the alerts shown are this leader's, not the store's
	var expired []alerts.Fingerprint
	var episodes map[episode]bool
	if len(m.acks) > 0 {
		episodes = firingEpisodes(firing)
	}
	for fp, ack := range m.acks {
		if !episodes[episode{fp: ack.Fingerprint, startsAt: ack.StartsAt.UnixNano()}] {
			expired = append(expired, fp)
			delete(m.acks, fp)
		}
	}
	if len(expired) > 0 {
		// Memory leads the store until DeleteAck: should it fail, the
		// next Sync reads the acknowledgements back.
		m.seen.Acks = -1
	}
	acks := maps.Clone(m.acks)
	m.mu.Unlock()
	for _, fp := range expired {
		errs = append(errs, m.storeErr(m.o.Store.DeleteAck(ctx, fp)))
	}

	// What keeps each firing alert quiet, decided once per step, and what
	// is sent, on one routing.
	m.routeMu.RLock()
	defer m.routeMu.RUnlock()
	quiet := map[alerts.Fingerprint]string{}
	var silenced, inhibited, acked int
	inhibition := m.inhib.Snapshot(firing)
	for _, a := range firing {
		r := m.quietReason(a, inhibition, acks, now)
		switch r {
		case "silenced":
			silenced++
		case "inhibited":
			inhibited++
		case "acknowledged":
			acked++
		default:
			continue
		}
		quiet[a.Fingerprint()] = r
	}
	// Notifications given up are taken back before the flush, so that
	// what they failed to report is due again at the group interval.
	m.mu.Lock()
	failed := m.failed
	m.failed = nil
	m.mu.Unlock()
	for _, f := range failed {
		m.disp.Undo(f.msg)
	}
	m.undone = append(m.undone, failed...)
	// The log entries first, then their closing writes.
	errs = append(errs, m.retryRecords(ctx), m.retryMarks(ctx), m.announceAcks(ctx, now, firing, acks), m.resendAcks(ctx, now, firing, acks))
	filter := dispatch.Filter{
		Muted: func(fp alerts.Fingerprint, _ alerts.Alert) bool {
			r := quiet[fp]
			return r == "silenced" || r == "inhibited"
		},
		Acknowledged: func(fp alerts.Fingerprint, _ alerts.Alert) bool { return quiet[fp] == "acknowledged" },
	}
	for _, n := range m.disp.Flush(now, res.Alerts, filter) {
		errs = append(errs, m.send(ctx, &n.State, n.Message))
	}
	m.resendFiring(now, firing, filter)
	if err := m.storeErr(m.syncGroups(ctx)); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, m.closeUndone(ctx))
	}
	m.updateGauges(silenced, inhibited, acked)
	if now.Sub(m.lastPrune) >= time.Hour {
		m.lastPrune = now
		_, err := m.o.Store.Prune(ctx, now.Add(-m.o.Retention))
		errs = append(errs, m.storeErr(err), m.pruneSilences(ctx, now))
	}
	return errors.Join(errs...)
}

// pruneSilences deletes the silences that ended SilenceRetention before
// now, from the store first: one the store still holds would come back at
// the next start.
func (m *Manager) pruneSilences(ctx context.Context, now time.Time) error {
	before := now.Add(-m.o.SilenceRetention)
	if _, err := m.o.Store.PruneSilences(ctx, before); err != nil {
		return m.storeErr(err)
	}
	m.sils().Prune(before)
	return nil
}

// resendIntervals returns the resend interval of each receiver that is a
// notify.Resender.
func resendIntervals(receivers map[string]notify.Notifier) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, n := range receivers {
		if r, ok := n.(notify.Resender); ok && r.ResendInterval() > 0 {
			out[name] = r.ResendInterval()
		}
	}
	return out
}

// resendFiring queues again, every resend interval, the firing alerts each
// Resender was notified of (dispatch.Firing), in one message per receiver,
// whatever the repeat interval of their tier: Alertmanager resolves an
// alert that is not posted again before its end. Resends are not logged:
// a restarted manager resends at its first step. A receiver gets its next
// resend once the last one had its last attempt, so one that is down does
// not fill its queue with them. The caller holds stepMu and routeMu for
// reading.
func (m *Manager) resendFiring(now time.Time, firing []alerts.Alert, f dispatch.Filter) {
	for _, name := range slices.Sorted(maps.Keys(m.resend)) {
		if last, ok := m.resentAt[name]; ok && now.Sub(last) < m.resend[name] {
			continue
		}
		as := m.disp.Firing(now, name, firing, f)
		m.mu.Lock()
		busy := m.resending[name]
		// Marked before it is queued: the queue may be done with it
		// before Enqueue returns.
		m.resending[name] = busy || len(as) > 0
		m.mu.Unlock()
		if busy {
			continue
		}
		m.resentAt[name] = now
		if len(as) == 0 {
			continue
		}
		msg := notify.NewMessage(notify.KindResend, name, "", nil, as, now)
		msg.ID = fmt.Sprintf("resend-%s-%d", name, now.UnixNano())
		if !m.queues[name].Enqueue(msg) {
			m.onDrop(msg)
		}
	}
}

// quietReason says what keeps a firing alert from notifying: "silenced",
// "inhibited", "acknowledged", or "" for nothing.
// inhibition is the step's snapshot of the firing alerts.
func (m *Manager) quietReason(a alerts.Alert, inhibition *inhibit.Snapshot, acks map[alerts.Fingerprint]alerts.Ack, now time.Time) string {
	if len(m.sils().Muted(a.Labels, now)) > 0 {
		return "silenced"
	}
	if _, ok := inhibition.MutedBy(a.Labels); ok {
		return "inhibited"
	}
	if len(acks) == 0 { // no fingerprint to compute
		return ""
	}
	if ack, ok := acks[a.Fingerprint()]; ok && ack.Covers(a) {
		return "acknowledged"
	}
	return ""
}

// episode is one firing episode of an alert: what an acknowledgement
// covers (alerts.Ack.Covers).
type episode struct {
	fp       alerts.Fingerprint
	startsAt int64 // UnixNano
}

// firingEpisodes returns the episodes of the firing alerts, so that the
// acknowledgements are checked against them in one pass, not each against
// every firing alert.
func firingEpisodes(firing []alerts.Alert) map[episode]bool {
	out := make(map[episode]bool, len(firing))
	for _, a := range firing {
		if a.EndsAt.IsZero() {
			out[episode{fp: a.Fingerprint(), startsAt: a.StartsAt.UnixNano()}] = true
		}
	}
	return out
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func (m *Manager) storeErr(err error) error {
	if err != nil {
		m.m.storeErrors.Inc()
	}
	return err
}

// syncGroups brings the store's group states in line with the
// dispatcher's after the step's notifications: the groups a regroup
// changed are stored, and the groups the dispatcher dropped are removed
// (a group whose alerts moved away when its receiver's group_by changed,
// one with nothing left to resolve), in one transaction, so the store
// never holds a moved alert in neither group. What the store refuses is
// tried again at the next step. The caller holds stepMu and routeMu for
// reading.
func (m *Manager) syncGroups(ctx context.Context) error {
	changed, forgotten := m.disp.TakeChanges()
	for _, r := range changed {
		m.groupsPut[r] = true
		delete(m.groupsDrop, r)
	}
	for _, r := range forgotten {
		m.groupsDrop[r] = true
		delete(m.groupsPut, r)
	}
	if len(m.groupsPut) == 0 && len(m.groupsDrop) == 0 {
		return nil
	}
	var put []dispatch.GroupState
	var drop []dispatch.GroupRef
	for _, r := range sortedRefs(m.groupsPut) {
		if st, ok := m.disp.State(r); ok {
			put = append(put, st)
		} else {
			drop = append(drop, r)
		}
	}
	for _, r := range sortedRefs(m.groupsDrop) {
		// A group formed again since keeps its row until it notifies.
		if _, ok := m.disp.State(r); !ok {
			drop = append(drop, r)
		}
	}
	if err := m.o.Store.UpdateGroups(ctx, put, drop); err != nil {
		return err
	}
	clear(m.groupsPut)
	clear(m.groupsDrop)
	return nil
}

func sortedRefs(set map[dispatch.GroupRef]bool) []dispatch.GroupRef {
	return slices.SortedFunc(maps.Keys(set), func(a, b dispatch.GroupRef) int {
		if c := strings.Compare(a.Receiver, b.Receiver); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}

// send logs the message with its group state, then queues it; the caller
// holds routeMu for reading. A message already in the log is not queued
// again. A replica whose lead ended meanwhile only logs it: the next
// replica to take the lead (Lead) sends it.
//
// If the log cannot be written (the database failing over) the message is
// still sent and the error returned: a page that waits for the database
// is worse than one sent twice, and Alertmanager's notifications are
// at-least-once too. The log entry is written by the next steps once the
// store is back (retryRecords), and its group's state with it, so that a
// leader taking over after that step does not send it again. Only a lead
// that changes before (Standby drops what is left to write) sends it a
// second time: the next leader knows nothing of it.
func (m *Manager) send(ctx context.Context, g *dispatch.GroupState, msg *notify.Message) error {
	inserted, err := m.o.Store.RecordNotification(ctx, g, msg)
	if err != nil {
		m.m.storeErrors.Inc()
	} else if !inserted {
		return nil
	}
	if !m.leading {
		return err
	}
	q := m.queues[msg.Receiver]
	if q == nil {
		return errors.Join(err, fmt.Errorf("%w: receiver %q", alerts.ErrNotFound, msg.Receiver))
	}
	if err != nil {
		r := record{msg: msg}
		if g != nil {
			r.group = &dispatch.GroupRef{Receiver: g.Receiver, Key: g.Key}
		}
		m.mu.Lock()
		m.unrecorded = append(m.unrecorded, r)
		m.mu.Unlock()
	}
	m.enqueue(q, msg)
	return err
}

// record is a notification queued without its log entry.
type record struct {
	msg *notify.Message
	// group is the group that sent it, nil for an acknowledgement.
	group *dispatch.GroupRef
}

// retryRecords writes the log entries that could not be written when
// their notifications were queued (send), oldest first, stopping at the
// first failure (the store is still down). The group of each is stored
// again by the step's syncGroups, as the dispatcher holds it now: its
// state as of the notification may be older than one stored since. The
// caller holds stepMu and routeMu for reading, and not mu.
func (m *Manager) retryRecords(ctx context.Context) error {
	m.mu.Lock()
	pending := m.unrecorded
	m.unrecorded = nil
	m.mu.Unlock()
	for i, r := range pending {
		// Not inserted: a write reported failed had been committed.
		if _, err := m.o.Store.RecordNotification(ctx, nil, r.msg); err != nil {
			m.mu.Lock()
			m.unrecorded = append(pending[i:], m.unrecorded...)
			m.mu.Unlock()
			return m.storeErr(err)
		}
		if r.group != nil {
			m.groupsPut[*r.group] = true
		}
	}
	return nil
}

// errQueueFull is the log entry's error of a notification its receiver's
// queue had no room for.
const errQueueFull = "receiver queue full"

// enqueue queues a logged message. A notification the queue has no room
// for (the queue counts and logs the drop) counts as not sent, as one its
// receiver gave up on does: the next step takes it back from its group, so
// what it reports goes out again at the group interval, and closes its log
// entry. A dropped acknowledgement keeps its log entry open and is owed: a
// later step queues it again while it lasts (resendAcks), and the next
// leader queues it from the log. Every drop counts towards the receiver
// failing (noteDrop).
func (m *Manager) enqueue(q *notify.Queue, msg *notify.Message) {
	if !q.Enqueue(msg) {
		m.onDrop(msg)
	}
}

// onDrop handles a logged message its receiver's full queue dropped: the
// new one (enqueue) or, to make room for a more urgent one, one it held
// (notify.QueueOptions.OnDrop); either counts as not sent, as in enqueue.
func (m *Manager) onDrop(msg *notify.Message) {
	now := m.o.Clock.Now()
	switch msg.Kind {
	case notify.KindNotify:
		m.mu.Lock()
		m.failed = append(m.failed, failure{msg: msg, err: errQueueFull, at: now})
		m.mu.Unlock()
	case notify.KindResend:
		m.mu.Lock()
		delete(m.resending, msg.Receiver)
		m.mu.Unlock()
	case notify.KindAcknowledge:
		m.mu.Lock()
		m.oweAck(msg, 0, errQueueFull, now)
		m.mu.Unlock()
	}
	m.noteDrop(msg.Receiver, now)
}

// failure is a notification its receiver gave up on.
type failure struct {
	msg      *notify.Message
	attempts int
	err      string
	at       time.Time
}

// closeUndone closes the log entries of the notifications taken back, once
// their groups are stored: until then a restart queues them again from the
// log, so what they report is neither lost nor, for long, sent twice. The
// caller holds stepMu.
func (m *Manager) closeUndone(ctx context.Context) error {
	var errs []error
	for _, f := range m.undone {
		errs = append(errs, m.markDelivered(ctx, mark{id: f.msg.ID, at: f.at, attempts: f.attempts, err: f.err}))
	}
	m.undone = nil
	return errors.Join(errs...)
}

// mark is the closing write of a notification's log entry.
type mark struct {
	id       string
	at       time.Time
	attempts int
	err      string
}

// markDelivered closes a log entry; when the write fails (the store is
// down) it is kept for the next steps to write again (retryMarks): an entry
// left open is sent once more by the next leader or start, and after a
// database failover that is every notification delivered during the
// outage. The caller must not hold mu.
func (m *Manager) markDelivered(ctx context.Context, k mark) error {
	err := m.o.Store.MarkDelivered(ctx, k.id, k.at, k.attempts, k.err)
	if err != nil {
		m.mu.Lock()
		m.unmarked = append(m.unmarked, k)
		m.mu.Unlock()
	}
	return m.storeErr(err)
}

// retryMarks writes again the closing writes that failed. The caller holds
// stepMu and not mu.
func (m *Manager) retryMarks(ctx context.Context) error {
	m.mu.Lock()
	pending := m.unmarked
	m.unmarked = nil
	m.mu.Unlock()
	var errs []error
	for _, k := range pending {
		errs = append(errs, m.markDelivered(ctx, k))
	}
	return errors.Join(errs...)
}

// onResult closes the log entry and raises or clears the receiver's alert.
// A notification given up is closed by the next step, after it took the
// message back from its group (Step, closeUndone); the queue cannot do
// that here, as a flush may be running. One that reached part of its
// destinations (notify.ErrDeliveredIncomplete) is not taken back, which
// would send it again to those that got it: its log entry is closed with
// the error, and the receiver counts as failing until its next delivery.
// An acknowledgement given up keeps its log entry open and is owed
// (resendAcks): a later step sends it again while it lasts.
func (m *Manager) onResult(msg *notify.Message, attempts int, err error) {
	ctx := context.Background()
	now := m.o.Clock.Now()
	switch {
	case msg.Kind == notify.KindResend: // not in the log
		m.mu.Lock()
		delete(m.resending, msg.Receiver)
		m.mu.Unlock()
	case err != nil && msg.Kind == notify.KindNotify && !errors.Is(err, notify.ErrDeliveredIncomplete):
		m.mu.Lock()
		m.failed = append(m.failed, failure{msg: msg, attempts: attempts, err: err.Error(), at: now})
		m.mu.Unlock()
	case err != nil && msg.Kind == notify.KindAcknowledge && !errors.Is(err, notify.ErrDeliveredIncomplete):
		m.mu.Lock()
		m.oweAck(msg, attempts, err.Error(), now)
		m.mu.Unlock()
	default:
		text := ""
		if err != nil {
			text = err.Error()
		}
		if msg.Kind == notify.KindAcknowledge {
			m.mu.Lock()
			attempts += m.ackDelivered(msg.ID)
			m.mu.Unlock()
		}
		if e := m.markDelivered(ctx, mark{id: msg.ID, at: now, attempts: attempts, err: text}); e != nil {
			m.log.Error("alert notification log not updated: written again at the next steps", "id", msg.ID, "err", e)
		}
	}
	m.updateHealth(msg.Receiver, now, func(h *receiverHealth) { h.gaveUp = err != nil })
}

func (m *Manager) updateGauges(silenced, inhibited, acked int) {
	counts := m.eval.Counts()
	for _, st := range []alerts.State{alerts.StatePending, alerts.StateFiring} {
		for _, s := range []alerts.Severity{alerts.P0, alerts.P1, alerts.P2} {
			m.m.alerts.WithLabelValues(st.String(), string(s)).Set(float64(counts[rule.StateKey{State: st, Severity: s}]))
		}
	}
	m.m.muted.WithLabelValues("silenced").Set(float64(silenced))
	m.m.muted.WithLabelValues("inhibited").Set(float64(inhibited))
	m.m.muted.WithLabelValues("acknowledged").Set(float64(acked))
}

// UpdateRules replaces the rule set. The whole set is validated first and
// refused, with the old set kept, on any error; unchanged rules keep the
// state of their alerts, and the alerts of the others are dropped from the
// store too at the next step. A step running meanwhile skips the replaced
// rules. The receiver-failing rule is kept when missing.
func (m *Manager) UpdateRules(rules []rule.Rule) error {
	if !slices.ContainsFunc(rules, func(r rule.Rule) bool { return r.Name == rule.ReceiverFailingRule }) {
		rules = append(slices.Clone(rules), rule.ReceiverFailing())
	}
	return m.eval.Update(rules)
}

// Rules returns the rule set in force.
func (m *Manager) Rules() []rule.Rule { return m.eval.Rules() }

// AddSilence validates and stores a silence; it applies from the next
// step, of the leader too when added through a standby (Sync). One with
// the ID of a silence this replica holds is an edit of that silence as this
// replica last read it (Sync): it replaces the stored silence only if the
// store still holds that version, and is refused with an error wrapping
// alerts.ErrConflict, naming the silence, when another replica edited,
// expired or pruned it since, so that no edit silently undoes another.
// One with an ID this replica does not hold replaces whatever the store
// holds under it. A silence that has already ended on the manager's clock
// is refused, as Alertmanager does: it would mute nothing, and whoever
// mistyped its end would believe the alert silenced. Its UpdatedAt is set
// to now on the manager's clock, which changes its version.
func (m *Manager) AddSilence(ctx context.Context, s silence.Silence) (silence.Silence, error) {
	return m.addSilence(ctx, nil, s)
}

// EditSilence stores next, an edit of prev (the silence as the caller read
// it, with next's ID), in prev's place only if the store still holds prev:
// otherwise it is refused with an error wrapping alerts.ErrConflict that
// names the silence. Unlike AddSilence, the version the edit is based on
// is the caller's, not whatever this replica read last: a step that read
// another replica's expiry between the caller's read and this call does
// not make the edit pass over it.
func (m *Manager) EditSilence(ctx context.Context, prev, next silence.Silence) (silence.Silence, error) {
	return m.addSilence(ctx, &prev, next) // the store refuses an ID changed
}

// addSilence is AddSilence, and EditSilence with base set.
func (m *Manager) addSilence(ctx context.Context, base *silence.Silence, s silence.Silence) (silence.Silence, error) {
	if err := s.Validate(); err != nil {
		return silence.Silence{}, err
	}
	if now := m.o.Clock.Now(); !s.EndsAt.After(now) {
		return silence.Silence{}, fmt.Errorf("%w: silence: ends_at: %s is in the past (now %s)", alerts.ErrInvalid,
			s.EndsAt.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	if s.ID == "" {
		s.ID = silence.NewID()
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = m.o.Clock.Now()
	}
	s.UpdatedAt = m.o.Clock.Now()
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	var err error
	if base != nil {
		err = m.o.Store.ReplaceSilence(ctx, *base, s)
	} else if prev, held := m.sils().Get(s.ID); held == nil {
		err = m.o.Store.ReplaceSilence(ctx, prev, s)
	} else {
		err = m.o.Store.PutSilence(ctx, s)
	}
	if err != nil {
		return silence.Silence{}, err
	}
	return m.sils().Add(s)
}

// ExpireSilence ends a silence at now, whatever it was edited into since
// the caller read it. It reads the silences from the store first (Sync),
// so that one added or edited through another replica since the last step
// is found and expired as it is now, and writes the end only if the store
// still holds what it read (store.ReplaceSilence), reading again when
// another replica wrote the silence meanwhile, so that its edit is what
// ends, not overwritten by the silence as read. The store is written
// first and the running set changed only once it holds the end, as
// AddSilence does: a silence the store still holds active would come back
// after a restart. A silence that has already ended is left as it is. An
// unknown id wraps alerts.ErrNotFound.
func (m *Manager) ExpireSilence(ctx context.Context, id string, now time.Time) error {
	return m.expireSilence(ctx, id, "", now)
}

// ExpireSilenceIf is ExpireSilence for a caller that showed the silence at
// version (silence.Silence.Version): if the silence has changed since,
// through any replica (edited in place, expired, replaced by an edit that
// expired it), nothing is written and the error wraps alerts.ErrConflict,
// saying who edited it and when, or when it ended. An empty version is
// ExpireSilence.
func (m *Manager) ExpireSilenceIf(ctx context.Context, id, version string, now time.Time) error {
	return m.expireSilence(ctx, id, version, now)
}

// expireAttempts bounds the reads and writes of an expiry racing other
// replicas' writes of the same silence.
const expireAttempts = 3

func (m *Manager) expireSilence(ctx context.Context, id, version string, now time.Time) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	var err error
	for range expireAttempts {
		if err := m.storeErr(m.syncLocked(ctx, false, true)); err != nil {
			return err
		}
		s, gerr := m.sils().Get(id)
		if gerr != nil {
			return gerr
		}
		if version != "" && s.Version() != version {
			return changedSince(s, version, now)
		}
		if !s.EndsAt.After(now) {
			return nil // ended already
		}
		if err = m.o.Store.ReplaceSilence(ctx, s, s.Expired(now)); err == nil {
			_, err = m.sils().Expire(id, now)
			return err
		}
		if !errors.Is(err, alerts.ErrConflict) {
			return err
		}
		// Another replica wrote the silence since the read: read it again.
	}
	return err
}

// changedSince is the conflict of an expiry of version when the store
// holds cur.
func changedSince(cur silence.Silence, version string, now time.Time) error {
	var what string
	switch {
	case cur.State(now) == silence.StateExpired:
		what = fmt.Sprintf("it ended at %s (an edit of its matchers or start ends it and creates a new silence)",
			cur.EndsAt.UTC().Format(time.RFC3339))
	case cur.UpdatedAt.IsZero():
		what = fmt.Sprintf("it was edited by %s and now ends at %s", cur.CreatedBy, cur.EndsAt.UTC().Format(time.RFC3339))
	default:
		what = fmt.Sprintf("it was edited by %s at %s and now ends at %s", cur.CreatedBy,
			cur.UpdatedAt.UTC().Format(time.RFC3339), cur.EndsAt.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: silence %q changed since version %s was read: %s; read it again (version %s)",
		alerts.ErrConflict, cur.ID, version, what, cur.Version())
}

// Silences lists the silences, as of this replica's last Sync or Step
// and its own changes since.
func (m *Manager) Silences() []silence.Silence { return m.sils().List() }

// Acknowledge marks the firing alert fp as handled by a person until it
// resolves: no repeats meanwhile, receivers with acknowledgements
// (PagerDuty) are told. Acknowledging again replaces the author and comment.
// On the leader the receivers are told at once; through a standby, which
// first reads the alerts the leader saved (Sync) to find the alert, the
// acknowledgement is stored and the leader mutes the alert and tells the
// receivers at its next step.
func (m *Manager) Acknowledge(ctx context.Context, fp alerts.Fingerprint, by, comment string, now time.Time) (alerts.Ack, error) {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	leading := m.isLeading()
	if !leading {
		if err := m.storeErr(m.syncLocked(ctx, true, true)); err != nil {
			return alerts.Ack{}, err
		}
	}
	m.mu.Lock()
	a, ok := m.firingAlert(fp)
	m.mu.Unlock()
	if !ok {
		return alerts.Ack{}, fmt.Errorf("%w: no firing alert with fingerprint %s", alerts.ErrNotFound, fp)
	}
	ack := alerts.Ack{Fingerprint: fp, StartsAt: a.StartsAt, By: by, Comment: comment, At: now}
	if err := ack.Validate(); err != nil {
		return alerts.Ack{}, err
	}
	if err := m.o.Store.PutAck(ctx, ack); err != nil {
		return alerts.Ack{}, err
	}
	m.mu.Lock()
	m.acks[fp] = ack
	m.mu.Unlock()
	if !leading {
		return ack, nil
	}
	var errs []error
	m.routeMu.RLock()
	defer m.routeMu.RUnlock()
	if !m.leading { // the lead ended meanwhile: the next leader tells them
		return ack, nil
	}
	for _, msg := range m.disp.Acknowledge(now, a) {
		errs = append(errs, m.send(ctx, nil, msg))
	}
	m.mu.Lock()
	m.announced[episode{fp: fp, startsAt: a.StartsAt.UnixNano()}] = true
	m.mu.Unlock()
	return ack, errors.Join(errs...)
}

// firingAlert returns the firing alert fp of the last step, indexing the
// step's firing alerts at the first call after it. The caller holds mu.
func (m *Manager) firingAlert(fp alerts.Fingerprint) (alerts.Alert, bool) {
	if m.firingAt == nil {
		m.firingAt = make(map[alerts.Fingerprint]int, len(m.current))
		for i, a := range m.current {
			if !a.EndsAt.IsZero() {
				continue
			}
			// The first of equal fingerprints, as a scan finds it.
			fp := a.Fingerprint()
			if _, dup := m.firingAt[fp]; !dup {
				m.firingAt[fp] = i
			}
		}
	}
	i, ok := m.firingAt[fp]
	if !ok {
		return alerts.Alert{}, false
	}
	return m.current[i], true
}

// Status is an alert as the API shows it.
type Status struct {
	alerts.Alert
	Fingerprint  string      `json:"fingerprint"`
	SilencedBy   []string    `json:"silenced_by,omitempty"`
	InhibitedBy  string      `json:"inhibited_by,omitempty"`
	Acknowledged *alerts.Ack `json:"acknowledged,omitempty"`
}

// Alerts returns the alerts of the last step with what keeps them quiet.
func (m *Manager) Alerts(now time.Time) []Status {
	m.mu.Lock()
	cur := slices.Clone(m.current)
	acks := maps.Clone(m.acks)
	m.mu.Unlock()
	firing := slices.DeleteFunc(slices.Clone(cur), func(a alerts.Alert) bool { return !a.EndsAt.IsZero() })
	m.routeMu.RLock()
	defer m.routeMu.RUnlock()
	out := make([]Status, 0, len(cur))
	inhibition := m.inhib.Snapshot(firing)
	for _, a := range cur {
		s := Status{Alert: a, Fingerprint: a.Fingerprint().String(), SilencedBy: m.sils().Muted(a.Labels, now)}
		if fp, ok := inhibition.MutedBy(a.Labels); ok {
			s.InhibitedBy = fp.String()
		}
		if ack, ok := acks[a.Fingerprint()]; ok && ack.Covers(a) {
			s.Acknowledged = &ack
		}
		out = append(out, s)
	}
	return out
}

// History returns the newest state changes of an alert (0: all).
func (m *Manager) History(ctx context.Context, fp alerts.Fingerprint, limit int) ([]store.HistoryEntry, error) {
	return m.o.Store.History(ctx, fp, limit)
}
