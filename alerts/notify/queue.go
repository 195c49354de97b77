package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/sdk/clock"
)

// DefaultCapacity is the number of messages a receiver queue holds unless
// QueueOptions.Capacity says otherwise.
const DefaultCapacity = 256

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
	// that made progress (ErrPartial) does not count.
	MaxAttempts int
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
}

// Validate names the first bad field: a negative capacity, attempt count,
// back-off or timeout, or a maximum back-off below the initial one.
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
	depth                           *prometheus.GaugeVec
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
			Help: "Delivery attempts, by receiver and result (ok, retry, partial, fail)."}, []string{"receiver", "result"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "governor_alerts_notification_queue_depth",
			Help: "Messages waiting in the receiver queue."}, []string{"receiver"}),
	}
	if r != nil {
		r.MustRegister(m.sent, m.failed, m.dropped, m.attempts, m.depth)
	}
	return m
}

func (m *Metrics) init(receiver string) {
	m.sent.WithLabelValues(receiver)
	m.failed.WithLabelValues(receiver)
	m.dropped.WithLabelValues(receiver)
	m.depth.WithLabelValues(receiver)
	for _, r := range []string{"ok", "retry", "partial", "fail"} {
		m.attempts.WithLabelValues(receiver, r)
	}
}

// Queue delivers the messages of one receiver one at a time, the most
// urgent tier first (Message.Severity: P0, then P1, then P2), in order of
// arrival within a tier. The messages of one group keep their order: a
// message goes out after the earlier ones of its group, which go out
// first, so that a receiver never hears a group's older news last. A full
// queue takes a message more urgent than its least urgent one in that
// one's place (the newest of them; OnDrop is told) and drops any other, so
// a receiver that is down for long keeps its P0 pages and loses P2s first.
type Queue struct {
	name string
	n    Notifier
	o    QueueOptions
	wake chan struct{} // a message was queued; capacity 1

	mu      sync.Mutex
	cond    *sync.Cond
	items   []*Message // in order of arrival
	pending int        // queued and being delivered
	closed  bool
	retired bool

	cancel context.CancelFunc
	retire chan struct{} // closed by Retire
	done   chan struct{}
}

// NewQueue starts the worker of a receiver. Close stops it.
func NewQueue(name string, n Notifier, o QueueOptions) *Queue {
	o = o.withDefaults()
	o.Metrics.init(name)
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{name: name, n: n, o: o, wake: make(chan struct{}, 1), cancel: cancel,
		retire: make(chan struct{}), done: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	go q.run(ctx)
	return q
}

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
	var displaced *Message
	if len(q.items) >= q.o.Capacity {
		i := q.leastUrgent()
		if i < 0 || !m.Severity.MoreUrgent(q.items[i].Severity) {
			q.mu.Unlock()
			q.o.Metrics.dropped.WithLabelValues(q.name).Inc()
			q.o.Logger.Warn("alert notification dropped: receiver queue full", "receiver", q.name, "group", m.GroupKey,
				"severity", m.Severity, "capacity", q.o.Capacity)
			return false
		}
		displaced = q.items[i]
		q.items = slices.Delete(q.items, i, i+1)
		q.pending--
	}
	q.items = append(q.items, m)
	q.pending++
	q.o.Metrics.depth.WithLabelValues(q.name).Set(float64(len(q.items)))
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	if displaced != nil {
		q.o.Metrics.dropped.WithLabelValues(q.name).Inc()
		q.o.Logger.Warn("alert notification dropped: receiver queue full, a more urgent one took its place", "receiver", q.name,
			"group", displaced.GroupKey, "severity", displaced.Severity, "for_severity", m.Severity, "capacity", q.o.Capacity)
		if q.o.OnDrop != nil {
			q.o.OnDrop(displaced)
		}
	}
	return true
}

// leastUrgent returns the index of the newest of the least urgent queued
// messages, -1 when none is queued; q.mu held.
func (q *Queue) leastUrgent() int {
	at := -1
	for i, m := range q.items {
		if at < 0 || !m.Severity.MoreUrgent(q.items[at].Severity) {
			at = i
		}
	}
	return at
}

// pop takes the next message to deliver: the earliest of the most urgent
// ones, or the earliest queued message of its group; nil when none is
// queued. q.mu held.
func (q *Queue) pop() *Message {
	if len(q.items) == 0 {
		return nil
	}
	best := 0
	for i, m := range q.items {
		if m.Severity.MoreUrgent(q.items[best].Severity) {
			best = i
		}
	}
	b := q.items[best]
	at := slices.IndexFunc(q.items[:best], func(m *Message) bool { return m.Receiver == b.Receiver && m.GroupKey == b.GroupKey })
	if at < 0 {
		at = best
	}
	m := q.items[at]
	q.items = slices.Delete(q.items, at, at+1)
	return m
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
	for {
		q.mu.Lock()
		m := q.pop()
		retired := q.retired
		q.o.Metrics.depth.WithLabelValues(q.name).Set(float64(len(q.items)))
		q.mu.Unlock()
		if m == nil {
			if retired {
				// Enqueue refuses from now on (it checks under q.mu), so
				// nothing is left.
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
			case <-q.retire:
			}
			continue
		}
		if ctx.Err() != nil || !q.handle(ctx, m) {
			return
		}
	}
}

// errYield is deliver's signal that a message delivered in part gives way
// to a more urgent one queued meanwhile.
var errYield = errors.New("notify: yield to a more urgent message")

// handle delivers one message; false when the queue was closed meanwhile.
// A message delivered in part that gives way to a more urgent one goes
// back to the head of the queue, still pending.
func (q *Queue) handle(ctx context.Context, m *Message) bool {
	attempts, err := q.deliver(ctx, m)
	if errors.Is(err, errYield) {
		q.mu.Lock()
		q.items = slices.Insert(q.items, 0, m)
		q.mu.Unlock()
		return true
	}
	if ctx.Err() != nil && err != nil {
		return false
	}
	if err != nil {
		q.o.Metrics.failed.WithLabelValues(q.name).Inc()
		q.o.Logger.Error("alert notification failed", "receiver", q.name, "group", m.GroupKey, "attempts", attempts, "err", err)
	} else {
		q.o.Metrics.sent.WithLabelValues(q.name).Inc()
	}
	if q.o.OnResult != nil {
		q.o.OnResult(m, attempts, err)
	}
	q.mu.Lock()
	q.pending--
	q.cond.Broadcast()
	q.mu.Unlock()
	return true
}

func (q *Queue) deliver(ctx context.Context, m *Message) (int, error) {
	backoff := q.o.InitialBackoff
	var err error
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, q.o.Timeout)
		var retry bool
		retry, err = q.n.Notify(actx, m)
		cancel()
		switch {
		case err == nil:
			q.o.Metrics.attempts.WithLabelValues(q.name, "ok").Inc()
			return attempt, nil
		case retry && errors.Is(err, ErrPartial):
			// Progress that the next attempt keeps: not counted, no
			// back-off, but a more urgent message goes first.
			q.o.Metrics.attempts.WithLabelValues(q.name, "partial").Inc()
			attempt--
			if q.moreUrgentQueued(m) {
				return attempt, errYield
			}
			var wait time.Duration
			var se *StatusError
			if errors.As(err, &se) {
				wait = se.Wait(q.o.Clock.Now())
			}
			q.o.Logger.Info("alert notification delivered in part, continuing", "receiver", q.name, "group", m.GroupKey, "wait", wait, "err", err)
			if err := q.sleep(ctx, wait); err != nil {
				return attempt, err
			}
			continue
		case !retry || attempt >= q.o.MaxAttempts:
			q.o.Metrics.attempts.WithLabelValues(q.name, "fail").Inc()
			return attempt, fmt.Errorf("receiver %s: %d attempts: %w", q.name, attempt, err)
		}
		q.o.Metrics.attempts.WithLabelValues(q.name, "retry").Inc()
		// A receiver that asked for a pause (Retry-After on a 429 or 503)
		// gets it, up to MaxRetryAfter; the back-off still applies when
		// longer.
		wait := backoff
		var se *StatusError
		if errors.As(err, &se) {
			wait = max(wait, se.Wait(q.o.Clock.Now()))
		}
		q.o.Logger.Warn("alert notification attempt failed, retrying", "receiver", q.name, "attempt", attempt, "backoff", wait, "err", err)
		if err := q.sleep(ctx, wait); err != nil {
			return attempt, err
		}
		backoff = min(2*backoff, q.o.MaxBackoff)
	}
}

// sleep waits d on the queue's clock; an error when ctx ends first.
func (q *Queue) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: receiver %s: %v", alerts.ErrClosed, q.name, ctx.Err())
		}
		return nil
	}
	t := q.o.Clock.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return fmt.Errorf("%w: receiver %s: %v", alerts.ErrClosed, q.name, ctx.Err())
	case <-t.C():
		return nil
	}
}

// moreUrgentQueued reports whether a message more urgent than m waits.
func (q *Queue) moreUrgentQueued(m *Message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.ContainsFunc(q.items, func(o *Message) bool { return o.Severity.MoreUrgent(m.Severity) })
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
