package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/sdk/clock"
)

// DefaultCapacity is the number of messages a receiver queue holds unless
// QueueOptions.Capacity says otherwise.
const DefaultCapacity = 256

// DefaultMaxDeferral bounds the total wait of a message for attempts its
// receiver did not make unless QueueOptions.MaxDeferral says otherwise:
// six of the longest Retry-After (MaxRetryAfter), time for PagerDuty's
// pacing to clear a storm of thousands of events on a routing key, and
// within the half hour that an SRE notices a page that never came.
const DefaultMaxDeferral = 30 * time.Minute

// minDeferral is the shortest wait after an attempt not made, so that a
// receiver naming a time already past is not called in a loop.
const minDeferral = 100 * time.Millisecond

// DefaultInitialBackoff is the first wait between two attempts unless
// QueueOptions.InitialBackoff says otherwise.
const DefaultInitialBackoff = time.Second

// QueueOptions tune a receiver queue. Zero fields take the defaults;
// negative ones are refused by Validate.
type QueueOptions struct {
	// Capacity bounds the queued messages; default DefaultCapacity. A full
	// queue drops the new message, or the newest of its least urgent ones
	// when the new one is more urgent (OnDrop), counts it and logs a
	// warning; Enqueue reports the new message's drop.
	Capacity int
	// InitialBackoff and MaxBackoff shape the exponential back-off between
	// attempts; defaults 1s and 1m. A receiver's Retry-After (StatusError)
	// lengthens a wait, up to MaxRetryAfter.
	InitialBackoff, MaxBackoff time.Duration
	// MaxAttempts bounds the attempts per message; default 8. An attempt
	// that made progress (ErrPartial) or was not made (ErrNotAttempted)
	// does not count.
	MaxAttempts int
	// MaxDeferral bounds the total wait of a message for attempts its
	// receiver did not make (ErrNotAttempted), which use up no attempt;
	// default DefaultMaxDeferral. Past it the message is given up.
	MaxDeferral time.Duration
	// Timeout bounds one attempt; default 10s.
	Timeout time.Duration
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *Metrics
	// OnResult is called after the last attempt of a message with nil on
	// success, outside any lock of the queue.
	OnResult func(m *Message, attempts int, err error)
	// OnDrop is called with a queued message that a more urgent one took
	// the place of in the full queue (Enqueue), outside any lock of the
	// queue. It gets no OnResult.
	OnDrop func(m *Message)
	// Replaces holds the retired queues of the same receiver that still
	// deliver, oldest first: a message of this queue waits for the
	// messages they hold that report its group or one of its alerts (see
	// Queue).
	Replaces []*Queue
}

// Validate names the first bad field: a negative capacity, attempt count,
// back-off, timeout or deferral, or a maximum back-off below the initial one.
func (o QueueOptions) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: queue: %s: %s", alerts.ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Capacity < 0:
		return bad("capacity", "must not be negative, got %d", o.Capacity)
	case o.MaxAttempts < 0:
		return bad("max_attempts", "must not be negative, got %d", o.MaxAttempts)
	case o.InitialBackoff < 0:
		return bad("initial_backoff", "must not be negative, got %s", o.InitialBackoff)
	case o.MaxBackoff < 0:
		return bad("max_backoff", "must not be negative, got %s", o.MaxBackoff)
	case o.Timeout < 0:
		return bad("timeout", "must not be negative, got %s", o.Timeout)
	case o.MaxDeferral < 0:
		return bad("max_deferral", "must not be negative, got %s", o.MaxDeferral)
	}
	initial := o.InitialBackoff
	if initial == 0 {
		initial = DefaultInitialBackoff
	}
	if o.MaxBackoff > 0 && o.MaxBackoff < initial {
		return bad("max_backoff", "%s is below initial_backoff %s", o.MaxBackoff, initial)
	}
	return nil
}

func (o QueueOptions) withDefaults() QueueOptions {
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = DefaultInitialBackoff
	}
	if o.MaxBackoff < o.InitialBackoff {
		o.MaxBackoff = max(time.Minute, o.InitialBackoff)
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxDeferral <= 0 {
		o.MaxDeferral = DefaultMaxDeferral
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return o
}

// Metrics are the delivery series, shared by every queue.
type Metrics struct {
	sent, failed, dropped, attempts *prometheus.CounterVec
	running                         *runningCollector
}

// NewMetrics registers governor_alerts_notifications_* on r (nil: unregistered).
func NewMetrics(r prometheus.Registerer) *Metrics {
	m := &Metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "governor_alerts_notifications_sent_total",
			Help: "Notifications delivered, by receiver."}, []string{"receiver"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "governor_alerts_notifications_failed_total",
			Help: "Notifications given up after their last attempt, by receiver."}, []string{"receiver"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "governor_alerts_notifications_dropped_total",
			Help: "Notifications dropped because the receiver queue was full, by receiver."}, []string{"receiver"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "governor_alerts_notification_attempts_total",
			Help: "Delivery attempts, by receiver and result (ok, retry, partial, fail, and deferred: held back by the receiver, no attempt)."}, []string{"receiver", "result"}),
		running: &runningCollector{
			depth: prometheus.NewDesc("governor_alerts_notification_queue_depth",
				"Messages waiting in the receiver's queues (a retiring one included), not counting those being delivered.",
				[]string{"receiver"}, nil),
			oldest: prometheus.NewDesc("governor_alerts_notification_oldest_seconds",
				"Age of the receiver's oldest undelivered message, queued or being delivered (retries and waits "+
					"for the receiver included), since it was queued; 0 when none.", []string{"receiver"}, nil),
			running: map[*Queue]struct{}{},
		},
	}
	if r != nil {
		r.MustRegister(m.sent, m.failed, m.dropped, m.attempts, m.running)
	}
	return m
}

func (m *Metrics) init(receiver string) {
	m.sent.WithLabelValues(receiver)
	m.failed.WithLabelValues(receiver)
	m.dropped.WithLabelValues(receiver)
	for _, r := range []string{"ok", "retry", "partial", "fail", "deferred"} {
		m.attempts.WithLabelValues(receiver, r)
	}
}

// runningCollector computes governor_alerts_notification_queue_depth and
// governor_alerts_notification_oldest_seconds at scrape time from the
// queues whose worker runs. A receiver has both series while one of its
// queues runs, a retiring one included: its depth is the sum of theirs
// and its age the oldest of theirs, so a receiver replaced by a new
// configuration shows what its retiring queue still has to deliver. The
// series are gone once no queue of the receiver runs.
type runningCollector struct {
	depth, oldest *prometheus.Desc
	mu            sync.Mutex
	running       map[*Queue]struct{} // queues whose worker runs
}

func (c *runningCollector) add(q *Queue) {
	c.mu.Lock()
	c.running[q] = struct{}{}
	c.mu.Unlock()
}

func (c *runningCollector) remove(q *Queue) {
	c.mu.Lock()
	delete(c.running, q)
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *runningCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.oldest
}

// Collect implements prometheus.Collector. It takes each queue's lock
// after letting go of its own, so it never holds both.
func (c *runningCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	queues := make([]*Queue, 0, len(c.running))
	for q := range c.running {
		queues = append(queues, q)
	}
	c.mu.Unlock()
	depths := make(map[string]int, len(queues))
	ages := make(map[string]time.Duration, len(queues))
	for _, q := range queues {
		depth, age := q.load()
		depths[q.name] += depth
		ages[q.name] = max(ages[q.name], age)
	}
	for receiver, age := range ages {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(depths[receiver]), receiver)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age.Seconds(), receiver)
	}
}

// Queue delivers the messages of one receiver one at a time, the most
// urgent tier first (Message.Severity: P0, then P1, then P2), in order of
// arrival within a tier, except that a message goes out after every
// message queued before it that reports its group or one of its alerts
// (by Alert.Fingerprint): such an earlier message goes out first, ahead of
// its tier, so that a receiver never hears a group's older news last, nor
// an alert's resolve before its trigger when the alert is in several
// groups (routes that continue) or in a resend. The same holds across a
// configuration change: a queue made to replace retired ones
// (QueueOptions.Replaces) holds a message back while a replaced queue,
// which goes on delivering what it accepted, still holds an earlier one
// of its group or alerts; it delivers its other messages meanwhile. A
// full queue takes a message more urgent than its least urgent one in
// that one's place (the newest of them; OnDrop is told) and drops any
// other, so a receiver that is down for long keeps its P0 pages and loses
// P2s first. A message waiting for the time its receiver named (after
// ErrPartial or ErrNotAttempted) gives way to a more urgent one queued
// meanwhile that need not follow it, and keeps its place and state; one
// waiting out the back-off after a failed attempt does not.
type Queue struct {
	name string
	n    Notifier
	o    QueueOptions
	wake chan struct{} // a message was queued or a replaced queue finished one; capacity 1

	mu      sync.Mutex
	cond    *sync.Cond
	items   []*entry // in order of arrival
	pending int      // queued and being delivered
	// current is the message being delivered, nil when none.
	current *entry
	// last holds, by order key (orderKeys), the latest message queued
	// here, or in a replaced queue, that is not done yet.
	last map[string]*entry
	// followers are the queues that replace this one (Replaces): they
	// are woken when a message of this queue is done.
	followers []*Queue
	// paused holds the delivery state of queued messages that gave way
	// to a more urgent one, so that they keep their attempts, deferral
	// and slot.
	paused  map[*Message]*delivery
	closed  bool
	retired bool

	cancel context.CancelFunc
	retire chan struct{} // closed by Retire
	done   chan struct{}
}

// entry is a message in a receiver queue, the time it was queued, which
// its age (governor_alerts_notification_oldest_seconds) counts from, and
// the earlier messages it follows.
type entry struct {
	m    *Message
	at   time.Time
	q    *Queue
	keys []string // orderKeys(m)
	// after holds the messages queued before it, here or in a replaced
	// queue, that report its group or one of its alerts: it goes out once
	// they are done.
	after []*entry
	// done: delivered, given up, dropped or abandoned. Set under the
	// owning queue's lock, read under a follower's.
	done atomic.Bool
}

// orderKeys returns what a message's order depends on: its group and
// each of its alerts, of its receiver.
func orderKeys(m *Message) []string {
	keys := make([]string, 0, len(m.Alerts)+1)
	keys = append(keys, m.Receiver+"\x00g"+m.GroupKey)
	for _, a := range m.Alerts {
		if a.Fingerprint != "" {
			keys = append(keys, m.Receiver+"\x00a"+a.Fingerprint)
		}
	}
	return keys
}

// NewQueue starts the worker of a receiver. Close stops it. When the
// worker stops, it closes n if n is a Closer. The queues of
// QueueOptions.Replaces must be retired already.
func NewQueue(name string, n Notifier, o QueueOptions) *Queue {
	o = o.withDefaults()
	o.Metrics.init(name)
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{name: name, n: n, o: o, wake: make(chan struct{}, 1), cancel: cancel, last: map[string]*entry{},
		retire: make(chan struct{}), done: make(chan struct{}), paused: map[*Message]*delivery{}}
	q.cond = sync.NewCond(&q.mu)
	for _, p := range o.Replaces {
		// p takes no more messages: what it holds is older than
		// anything queued here. A later replaced queue's messages are
		// newer than an earlier one's.
		p.mu.Lock()
		for k, e := range p.last {
			if !e.done.Load() {
				q.last[k] = e
			}
		}
		p.followers = append(p.followers, q)
		p.mu.Unlock()
	}
	q.o.Replaces = nil
	o.Metrics.running.add(q)
	go q.run(ctx)
	return q
}

// Name returns the receiver's name.
func (q *Queue) Name() string { return q.name }

// Enqueue queues m without blocking; it returns false and counts a drop
// when the queue is retired or closed, or full of messages at least as
// urgent as m. A full queue holding a less urgent message drops the newest
// of the least urgent ones instead, counts and logs it and passes it to
// QueueOptions.OnDrop, and queues m.
func (q *Queue) Enqueue(m *Message) bool {
	q.mu.Lock()
	if q.closed || q.retired {
		q.mu.Unlock()
		q.o.Metrics.dropped.WithLabelValues(q.name).Inc()
		return false
	}
	var displaced *entry
	if len(q.items) >= q.o.Capacity {
		i := q.leastUrgent()
		if i < 0 || !m.Severity.MoreUrgent(q.items[i].m.Severity) {
			q.mu.Unlock()
			q.o.Metrics.dropped.WithLabelValues(q.name).Inc()
			q.o.Logger.Warn("alert notification dropped: receiver queue full", "receiver", q.name, "group", m.GroupKey,
				"severity", m.Severity, "capacity", q.o.Capacity)
			return false
		}
		displaced = q.items[i]
		q.items = slices.Delete(q.items, i, i+1)
		delete(q.paused, displaced.m)
		q.finish(displaced)
		q.pending--
	}
	e := &entry{m: m, at: q.o.Clock.Now(), q: q, keys: orderKeys(m)}
	for _, k := range e.keys {
		// l == e: a message may hold an alert twice (resolved, then
		// firing again).
		if l := q.last[k]; l != nil && l != e && !l.done.Load() && !slices.Contains(e.after, l) {
			e.after = append(e.after, l)
		}
		q.last[k] = e
	}
	q.items = append(q.items, e)
	q.pending++
	followers := q.followers
	q.mu.Unlock()
	q.signal()
	if displaced != nil {
		wakeAll(followers)
		m := displaced.m
		q.o.Metrics.dropped.WithLabelValues(q.name).Inc()
		q.o.Logger.Warn("alert notification dropped: receiver queue full, a more urgent one took its place", "receiver", q.name,
			"group", m.GroupKey, "severity", m.Severity, "for_severity", e.m.Severity, "capacity", q.o.Capacity)
		if q.o.OnDrop != nil {
			q.o.OnDrop(m)
		}
	}
	return true
}

// signal wakes the worker without blocking.
func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func wakeAll(qs []*Queue) {
	for _, f := range qs {
		f.signal()
	}
}

// finish marks e done, so that the messages following it may go; q.mu
// held. The caller wakes the followers (wakeAll) once it let go of q.mu.
func (q *Queue) finish(e *entry) {
	e.done.Store(true)
	for _, k := range e.keys {
		if q.last[k] == e {
			delete(q.last, k)
		}
	}
}

// leastUrgent returns the index of the newest of the least urgent queued
// messages, -1 when none is queued; q.mu held.
func (q *Queue) leastUrgent() int {
	at := -1
	for i, it := range q.items {
		if at < 0 || !it.m.Severity.MoreUrgent(q.items[at].m.Severity) {
			at = i
		}
	}
	return at
}

// root returns the message that must go out first for e to go: e when
// every message it follows is done, else the root of the first of them
// still in this queue; nil when e waits only for a replaced queue. q.mu
// held. The walk ends: a message follows only earlier ones.
func (q *Queue) root(e *entry) *entry {
	for {
		var next *entry
		blocked := false
		for _, d := range e.after {
			switch {
			case d.done.Load():
			case d.q != q:
				blocked = true
			case next == nil:
				next = d
			}
		}
		switch {
		case next != nil:
			e = next
		case blocked:
			return nil
		default:
			return e
		}
	}
}

// byUrgency returns the indices of the queued messages, the most urgent
// tier first, in queue order within a tier; q.mu held.
func (q *Queue) byUrgency() []int {
	idx := make([]int, len(q.items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch sa, sb := q.items[a].m.Severity, q.items[b].m.Severity; {
		case sa.MoreUrgent(sb):
			return -1
		case sb.MoreUrgent(sa):
			return 1
		}
		return 0
	})
	return idx
}

// waiting reports whether e gave way to a more urgent message while it
// waited for the time its receiver named, and that time is still ahead;
// q.mu held.
func (q *Queue) waiting(e *entry, now time.Time) bool {
	st := q.paused[e.m]
	return st != nil && st.resume.After(now)
}

// pop takes the next message to deliver: for the earliest of the most
// urgent ones, the message that must go first (root), unless that one
// waits for the time its receiver named (waiting), in which case the
// next one in tier and queue order whose root does not wait; the first
// root that waits when all do; nil when none is queued or every queued
// one waits for a replaced queue. q.mu held.
func (q *Queue) pop() *entry {
	if len(q.items) == 0 {
		return nil
	}
	now := q.o.Clock.Now()
	best := 0
	for i, it := range q.items {
		if it.m.Severity.MoreUrgent(q.items[best].m.Severity) {
			best = i
		}
	}
	r := q.root(q.items[best])
	if r == nil || q.waiting(r, now) {
		var first *entry
		for _, i := range q.byUrgency() {
			r = q.root(q.items[i])
			if r != nil && !q.waiting(r, now) {
				break
			}
			if first == nil {
				first = r
			}
			r = nil
		}
		if r == nil {
			r = first
		}
	}
	if r == nil {
		return nil
	}
	q.items = slices.DeleteFunc(q.items, func(e *entry) bool { return e == r })
	return r
}

// load returns the number of queued messages and the age of the
// earliest queued of the messages queued or being delivered, 0 when none.
func (q *Queue) load() (int, time.Duration) {
	q.mu.Lock()
	n := len(q.items)
	var first time.Time
	ok := q.current != nil
	if ok {
		first = q.current.at
	}
	for _, it := range q.items {
		if !ok || it.at.Before(first) {
			first, ok = it.at, true
		}
	}
	q.mu.Unlock()
	if !ok {
		return n, 0
	}
	return n, max(q.o.Clock.Now().Sub(first), 0)
}

// Idle waits until every queued message has had its last attempt, or ctx ends.
func (q *Queue) Idle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.pending > 0 && ctx.Err() == nil {
		q.cond.Wait()
	}
	return ctx.Err()
}

// Close stops the worker; queued messages are abandoned (the notification
// log still holds them as undelivered).
func (q *Queue) Close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.mu.Unlock()
	q.cancel()
	<-q.done
	// Abandoned messages no longer count: Idle returns.
	q.mu.Lock()
	q.pending = 0
	q.cond.Broadcast()
	q.mu.Unlock()
}

// Retire stops taking messages and lets the worker finish the queued ones,
// each with its remaining attempts, before it stops: a receiver replaced by
// a new configuration delivers what it already accepted. The returned
// channel is closed when the worker has stopped. Close still abandons the
// rest at once.
func (q *Queue) Retire() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.retired {
		q.retired = true
		close(q.retire)
	}
	return q.done
}

func (q *Queue) run(ctx context.Context) {
	defer close(q.done)
	// Before done is closed: once Close or Retire's channel returns, the
	// queue has no queue_depth or oldest_seconds series of its own.
	defer q.o.Metrics.running.remove(q)
	// Abandoned messages (Close) hold back no follower any more.
	defer q.abandon()
	if c, ok := q.n.(Closer); ok {
		// Runs before done is closed: once Close or Retire's channel
		// returns, the notifier has let go of what it shares.
		defer c.Close()
	}
	for {
		q.mu.Lock()
		it := q.pop()
		q.current = it
		retired, left := q.retired, len(q.items)
		q.mu.Unlock()
		if it == nil {
			if retired && left == 0 {
				// Enqueue refuses from now on (it checks under q.mu), so
				// nothing is left.
				return
			}
			// Nothing queued, or only messages waiting for a replaced
			// queue, which wakes this one when it finishes one.
			retire := q.retire
			if retired {
				retire = nil
			}
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
			case <-retire:
			}
			continue
		}
		if ctx.Err() != nil || !q.handle(ctx, it) {
			return
		}
	}
}

// abandon marks the messages left done when the worker stops and wakes
// the followers.
func (q *Queue) abandon() {
	q.mu.Lock()
	if q.current != nil {
		q.finish(q.current)
	}
	for _, e := range q.items {
		q.finish(e)
	}
	followers := q.followers
	q.mu.Unlock()
	wakeAll(followers)
}

// errYield is deliver's signal that a message gives way to a more urgent
// one queued meanwhile.
var errYield = errors.New("notify: yield to a more urgent message")

// delivery is the state of one message's delivery.
type delivery struct {
	attempts int           // counted attempts made
	backoff  time.Duration // before the next retry after a failure
	deferred time.Duration // waited for attempts not made (ErrNotAttempted)
	// resume is when the next attempt may be made, set while the message
	// gave way to a more urgent one during a wait.
	resume time.Time
}

// handle delivers one message; false when the queue was closed meanwhile.
// A message that gives way to a more urgent one goes back to the head of
// the queue, still pending, and keeps its delivery state.
func (q *Queue) handle(ctx context.Context, it *entry) bool {
	m := it.m
	q.mu.Lock()
	st := q.paused[m]
	delete(q.paused, m)
	q.mu.Unlock()
	if st == nil {
		st = &delivery{backoff: q.o.InitialBackoff}
	}
	err := q.deliver(ctx, m, st)
	if errors.Is(err, errYield) {
		q.mu.Lock()
		q.items = slices.Insert(q.items, 0, it)
		q.paused[m] = st
		q.current = nil
		q.mu.Unlock()
		return true
	}
	if ctx.Err() != nil && err != nil {
		return false
	}
	if err != nil {
		q.o.Metrics.failed.WithLabelValues(q.name).Inc()
		q.o.Logger.Error("alert notification failed", "receiver", q.name, "group", m.GroupKey, "attempts", st.attempts,
			"deferred", st.deferred, "err", err)
	} else {
		q.o.Metrics.sent.WithLabelValues(q.name).Inc()
	}
	if q.o.OnResult != nil {
		q.o.OnResult(m, st.attempts, err)
	}
	q.mu.Lock()
	q.pending--
	q.current = nil
	q.finish(it)
	followers := q.followers
	q.cond.Broadcast()
	q.mu.Unlock()
	wakeAll(followers)
	return true
}

// deliver makes the attempts of m from the state st until it is
// delivered, given up or gives way (errYield).
func (q *Queue) deliver(ctx context.Context, m *Message, st *delivery) error {
	if !st.resume.IsZero() {
		if err := q.pause(ctx, st, st.resume.Sub(q.o.Clock.Now())); err != nil {
			return err
		}
	}
	for {
		actx, cancel := context.WithTimeout(ctx, q.o.Timeout)
		retry, err := q.n.Notify(actx, m)
		cancel()
		var se *StatusError
		switch {
		case err == nil:
			st.attempts++
			q.o.Metrics.attempts.WithLabelValues(q.name, "ok").Inc()
			return nil
		case retry && errors.Is(err, ErrPartial):
			// Progress that the next attempt keeps: not counted, no
			// back-off, but a more urgent message goes first.
			q.o.Metrics.attempts.WithLabelValues(q.name, "partial").Inc()
			var wait time.Duration
			if errors.As(err, &se) {
				wait = se.Wait(q.o.Clock.Now())
			}
			q.o.Logger.Info("alert notification delivered in part, continuing", "receiver", q.name, "group", m.GroupKey, "wait", wait, "err", err)
			if err := q.pause(ctx, st, wait); err != nil {
				return err
			}
			continue
		case retry && errors.Is(err, ErrNotAttempted):
			// Nothing was sent: not counted, no back-off; the wait is
			// the receiver's, bounded in all by MaxDeferral.
			left := q.o.MaxDeferral - st.deferred
			if left <= 0 {
				q.o.Metrics.attempts.WithLabelValues(q.name, "fail").Inc()
				return fmt.Errorf("receiver %s: %d attempts, then not attempted by the receiver for %s (max deferral): %w",
					q.name, st.attempts, st.deferred, err)
			}
			wait := q.o.InitialBackoff
			if errors.As(err, &se) {
				wait = max(se.Wait(q.o.Clock.Now()), minDeferral)
			}
			wait = min(wait, left)
			st.deferred += wait
			q.o.Metrics.attempts.WithLabelValues(q.name, "deferred").Inc()
			q.o.Logger.Info("alert notification held back by the receiver, no attempt made, waiting", "receiver", q.name,
				"group", m.GroupKey, "wait", wait, "deferred", st.deferred, "err", err)
			if err := q.pause(ctx, st, wait); err != nil {
				return err
			}
			continue
		}
		st.attempts++
		if !retry || st.attempts >= q.o.MaxAttempts {
			q.o.Metrics.attempts.WithLabelValues(q.name, "fail").Inc()
			return fmt.Errorf("receiver %s: %d attempts: %w", q.name, st.attempts, err)
		}
		q.o.Metrics.attempts.WithLabelValues(q.name, "retry").Inc()
		// A receiver that asked for a pause (Retry-After on a 429 or 503)
		// gets it, up to MaxRetryAfter; the back-off still applies when
		// longer.
		wait := st.backoff
		if errors.As(err, &se) {
			wait = max(wait, se.Wait(q.o.Clock.Now()))
		}
		q.o.Logger.Warn("alert notification attempt failed, retrying", "receiver", q.name, "attempt", st.attempts, "backoff", wait, "err", err)
		if err := q.sleep(ctx, wait); err != nil {
			return err
		}
		st.backoff = min(2*st.backoff, q.o.MaxBackoff)
	}
}

// pause waits d before the next attempt at the message being delivered,
// or gives way (errYield, with st.resume set to the end of the wait) as
// soon as a message it yields to (yieldsTo) is queued, or a replaced
// queue lets one go; an error when ctx ends first.
func (q *Queue) pause(ctx context.Context, st *delivery, d time.Duration) error {
	st.resume = time.Time{}
	var t clock.Timer
	if d > 0 {
		t = q.o.Clock.NewTimer(d)
		defer t.Stop()
	}
	end := q.o.Clock.Now().Add(d)
	for {
		if q.yieldsTo() {
			if t != nil {
				st.resume = end
			}
			return errYield
		}
		if t == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: receiver %s: %v", alerts.ErrClosed, q.name, ctx.Err())
		case <-t.C():
			return nil
		case <-q.wake:
			// Enqueue queued a message: look again. The worker pops
			// before it waits for a wake, so consuming it loses nothing.
		}
	}
}

// sleep waits d on the queue's clock; an error when ctx ends first.
func (q *Queue) sleep(ctx context.Context, d time.Duration) error {
	if err := clock.Sleep(ctx, q.o.Clock, d); err != nil {
		return fmt.Errorf("%w: receiver %s: %v", alerts.ErrClosed, q.name, err)
	}
	return nil
}

// yieldsTo reports whether a message queued meanwhile, more urgent than
// the one being delivered, can go now: its root (the message it must
// follow that goes first) is neither the one being delivered, nor one
// waiting for the time its receiver named, nor in a replaced queue. A more
// urgent message of the same group or of one of its alerts waits behind
// the one being delivered, so that one does not give way to it; pop then
// takes the message yielded to.
func (q *Queue) yieldsTo() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	cur := q.current
	if cur == nil {
		return false
	}
	now := q.o.Clock.Now()
	for _, i := range q.byUrgency() {
		e := q.items[i]
		if !e.m.Severity.MoreUrgent(cur.m.Severity) {
			return false
		}
		if r := q.root(e); r != nil && r != cur && !q.waiting(r, now) {
			return true
		}
	}
	return false
}

// Failed returns the counter of notifications given up for a receiver.
func (m *Metrics) Failed(receiver string) prometheus.Counter {
	return m.failed.WithLabelValues(receiver)
}

// Dropped returns the counter of notifications dropped for a receiver.
func (m *Metrics) Dropped(receiver string) prometheus.Counter {
	return m.dropped.WithLabelValues(receiver)
}

// Sent returns the counter of notifications delivered to a receiver.
func (m *Metrics) Sent(receiver string) prometheus.Counter { return m.sent.WithLabelValues(receiver) }
