// Package queue is a short CoDel queue that sits in front of a concurrency
// limit: a request that finds the limit full waits briefly for a slot instead
// of being refused at once, but never long enough for a standing queue to
// build up.
//
// The discipline is CoDel as used for RPC servers (Facebook's "Fail at
// Scale"): the queue tracks the smallest queueing delay seen in each Interval,
// measured whenever a request is served as the wait of the oldest request of
// its class (under LIFO the one served has barely waited, whatever stands
// behind it). If even the smallest delay of an interval exceeded Target, the
// queue is overloaded: from then on requests that have waited more than
// 2 x Target are dropped instead of started, new arrivals wait at most
// 2 x Target, and waiting requests are served newest first (adaptive LIFO),
// because the oldest ones are the likeliest to have been given up on by
// their callers.
// Otherwise a request waits at most Interval and requests are served oldest
// first. Higher classes are always served before lower ones, a full queue
// makes room for a higher class by shedding the oldest request of the lowest
// class waiting, and a request whose context is done or whose deadline has
// passed is never started.
//
// The queue is the slow path: it takes a mutex and allocates a waiter. The
// caller supplies the acquire function that takes a slot for a class, and
// calls Dispatch whenever a slot may have become free.
package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Errors returned by Wait.
var (
	// ErrFull: the queue already holds MaxLength requests.
	ErrFull = errors.New("queue: full")
	// ErrTimeout: the request waited its longest allowed time, or CoDel
	// dropped it, without getting a slot.
	ErrTimeout = errors.New("queue: timeout")
	// ErrExpired: the request's context was done or its deadline had passed
	// before it could start.
	ErrExpired = errors.New("queue: deadline passed")
	// ErrInvalid wraps configuration errors from New.
	ErrInvalid = errors.New("queue: invalid configuration")
)

// Defaults for rules.Queue fields left at zero.
const (
	DefaultTarget    = 5 * time.Millisecond
	DefaultInterval  = 100 * time.Millisecond
	DefaultMaxLength = 128
)

// NumClasses is the number of priority classes (rank 0 is served first).
const NumClasses = len(rules.Classes)

// AcquireFunc tries to take a slot for a request of class rank c and user
// cohort k. It returns an opaque slot number handed back by Wait.
type AcquireFunc func(c int, k uint32) (slot uint32, ok bool)

// Queue is a CoDel queue with adaptive LIFO. It is safe for concurrent use.
type Queue struct {
	clk     clock.Clock
	acquire AcquireFunc

	waiting atomic.Int32 // length, readable without the lock

	mu sync.Mutex
	// The settings, under mu: Configure changes them in place.
	target      int64
	interval    int64
	maxLen      int
	lifo        bool
	classes     [NumClasses][]*waiter
	cohorts     [NumClasses]uint64 // cohorts (modulo 64) enqueued in a class since it was last empty
	n           int
	overloaded  bool
	minDelay    int64 // smallest delay seen in the current interval
	intervalEnd int64
	// drained: the queue is empty because service emptied it (or it has
	// never held a request), not because its requests gave up waiting;
	// emptySince is when it last became empty.
	drained    bool
	emptySince int64
}

type waiter struct {
	ctx      context.Context
	deadline time.Time // the caller's stated deadline; zero: none
	class    int
	cohort   uint32
	enq      int64
	ready    chan struct{}
	done     bool // decided, under Queue.mu
	slot     uint32
	err      error
}

// New returns a queue configured by cfg (zero fields take the defaults) that
// takes slots with acquire. Times come from clk.
func New(cfg rules.Queue, clk clock.Clock, acquire AcquireFunc) (*Queue, error) {
	if clk == nil || acquire == nil {
		return nil, fmt.Errorf("%w: clock and acquire function are required", ErrInvalid)
	}
	q := &Queue{clk: clk, acquire: acquire, drained: true}
	if err := q.Configure(cfg); err != nil {
		return nil, err
	}
	q.emptySince = clk.Nanotime()
	q.intervalEnd = q.emptySince + q.interval
	return q, nil
}

// Validate reports whether cfg is a valid queue configuration.
func Validate(cfg rules.Queue) error {
	if cfg.Target < 0 || cfg.Interval < 0 || cfg.MaxLength < 0 {
		return fmt.Errorf("%w: target, interval and max length must not be negative", ErrInvalid)
	}
	return nil
}

// Configure applies cfg (zero fields take the defaults) in place: the
// requests waiting stay queued under the new settings, and the CoDel state
// carries over. An invalid cfg changes nothing.
func (q *Queue) Configure(cfg rules.Queue) error {
	if err := Validate(cfg); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.target, q.interval, q.maxLen = int64(cfg.Target), int64(cfg.Interval), cfg.MaxLength
	q.lifo = cfg.LIFO == nil || *cfg.LIFO
	if q.target == 0 {
		q.target = int64(DefaultTarget)
	}
	if q.interval == 0 {
		q.interval = int64(DefaultInterval)
	}
	if q.maxLen == 0 {
		q.maxLen = DefaultMaxLength
	}
	return nil
}

// Len returns the number of waiting requests. It is a single atomic load,
// cheap enough to check on every release before calling Dispatch.
func (q *Queue) Len() int { return int(q.waiting.Load()) }

// Overloaded reports whether the last completed interval found a standing
// queue (its smallest delay above Target).
func (q *Queue) Overloaded() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tick(q.clk.Nanotime())
	return q.overloaded
}

// Wait queues a request of class rank c and user cohort k until it gets a
// slot, its allowed waiting time passes, or ctx is done. It returns the slot
// and the time spent waiting, or ErrFull, ErrTimeout or ErrExpired.
func (q *Queue) Wait(ctx context.Context, c int, k uint32) (uint32, time.Duration, error) {
	return q.WaitUntil(ctx, c, k, time.Time{})
}

// WaitUntil is Wait for a request that states its deadline apart from ctx
// (zero: none): it is never started once that deadline has passed on the
// queue's clock, and stops waiting then with ErrExpired.
func (q *Queue) WaitUntil(ctx context.Context, c int, k uint32, deadline time.Time) (uint32, time.Duration, error) {
	if c < 0 || c >= NumClasses {
		c = NumClasses - 1
	}
	if expired(ctx, deadline, q.clk) {
		return 0, 0, ErrExpired
	}
	q.mu.Lock()
	now := q.clk.Nanotime()
	q.tick(now)
	if q.n >= q.maxLen && !q.displace(c, now) {
		q.mu.Unlock()
		return 0, 0, ErrFull
	}
	w := &waiter{ctx: ctx, deadline: deadline, class: c, cohort: k, enq: now, ready: make(chan struct{}, 1)}
	q.classes[c] = append(q.classes[c], w)
	q.cohorts[c] |= 1 << (k & 63)
	q.n++
	q.waiting.Store(int32(q.n))
	wait := q.interval
	if q.overloaded {
		wait = 2 * q.target
	}
	q.mu.Unlock()
	if !deadline.IsZero() {
		// Woken at the deadline: a request that can no longer be
		// started must not hold its place until the queue's time is up.
		wait = min(wait, int64(deadline.Sub(q.clk.Now())))
	}

	// A slot may have been freed between the caller's failed attempt and
	// the enqueue, by a release that saw an empty queue.
	q.Dispatch()

	t := q.clk.NewTimer(time.Duration(wait))
	defer t.Stop()
	var timeout error
	select {
	case <-w.ready:
	case <-ctx.Done():
		timeout = ErrExpired
	case <-t.C():
		timeout = ErrTimeout
		if !deadline.IsZero() && !q.clk.Now().Before(deadline) {
			timeout = ErrExpired
		}
	}
	q.mu.Lock()
	if !w.done {
		q.remove(w, q.clk.Nanotime(), false)
		w.done, w.err = true, timeout
		if timeout == ErrTimeout {
			// It stood in the queue for its whole allowed time.
			q.minDelay = min(q.minDelay, q.clk.Nanotime()-w.enq)
		}
	}
	q.mu.Unlock()
	return w.slot, time.Duration(q.clk.Nanotime() - w.enq), w.err
}

// Dispatch hands free slots to waiting requests: highest class first, oldest
// first (newest first while overloaded). Requests whose deadline has passed,
// and while overloaded those that waited over 2 x Target, are dropped on the
// way. A request it cannot get a slot for keeps waiting, and so do those of
// its class from the same user cohort; the class's requests from other
// cohorts are still tried (under consistent shedding each cohort has its own
// ceiling, and a low cohort must not hold a higher one back), but no lower
// class is.
func (q *Queue) Dispatch() {
	if q.waiting.Load() == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clk.Nanotime()
	q.tick(now)
	lifo := q.lifo && q.overloaded
	for c := range q.classes {
		// refused holds the cohorts (modulo 64) refused a slot; r is the
		// rank in serving order of the next request to try: those ranked
		// before it are of refused cohorts, and keep their ranks when a
		// request at r leaves.
		var refused uint64
		for r := 0; r < len(q.classes[c]); {
			ws := q.classes[c]
			w := ws[r]
			if lifo {
				w = ws[len(ws)-1-r]
			}
			bit := uint64(1) << (w.cohort & 63)
			if refused&bit != 0 {
				r++
				continue
			}
			if expired(w.ctx, w.deadline, q.clk) {
				q.finish(w, now, 0, ErrExpired)
				continue
			}
			delay := now - w.enq
			if q.overloaded && delay > 2*q.target {
				q.finish(w, now, 0, ErrTimeout)
				continue
			}
			slot, ok := q.acquire(w.class, w.cohort)
			if !ok {
				refused |= bit
				if refused == q.cohorts[c] {
					break // every cohort waiting was refused: no need to scan the rest
				}
				r++
				continue
			}
			// The standing queue is measured by the oldest request of the
			// class, not by the one served: adaptive LIFO serves the newest
			// at once, and measuring it read a queue standing for tens of
			// milliseconds as none, so a steady overload flapped back to
			// FIFO and long waits every other interval. Serving oldest
			// first, the two are the same.
			q.minDelay = min(q.minDelay, now-ws[0].enq)
			q.finish(w, now, slot, nil)
			if q.n == 0 {
				q.minDelay = 0 // drained by service: no standing queue
			}
		}
		if refused != 0 {
			// A lower class's ceilings are lower still.
			return
		}
	}
}

// tick closes the CoDel interval if it has ended: the queue is overloaded if
// the smallest delay of the interval was above Target.
//
// Only an empty queue that service emptied, or that stayed empty for a
// whole interval, shows there is no standing queue. One emptied by its
// requests giving up (timing out or expiring on a limit that stays full)
// does not: the next request would wait just as long. Counting that as
// empty judged such an interval fine whatever delays it had seen, and
// every other interval on a stuck limit went back to waits of Interval.
func (q *Queue) tick(now int64) {
	if now < q.intervalEnd {
		return
	}
	if q.n == 0 && now-q.emptySince >= q.interval {
		q.minDelay = 0 // idle for a whole interval
	} else if q.minDelay == noDelay {
		// Nothing was served this interval: the queue stood for as long as
		// its oldest request has waited.
		oldest := now
		for c := range q.classes {
			if ws := q.classes[c]; len(ws) > 0 {
				oldest = min(oldest, ws[0].enq)
			}
		}
		q.minDelay = now - oldest // 0 if the queue is empty
	}
	q.overloaded = q.minDelay > q.target
	q.intervalEnd = now + q.interval
	q.minDelay = noDelay
	if q.n == 0 && q.drained {
		q.minDelay = 0
	}
}

// displace makes room in a full queue for a request of class c: the oldest
// request of the lowest class below c leaves with ErrFull, as it would have
// been shed had it come last. It reports false when no class below c waits.
func (q *Queue) displace(c int, now int64) bool {
	for low := NumClasses - 1; low > c; low-- {
		if ws := q.classes[low]; len(ws) > 0 {
			q.finish(ws[0], now, 0, ErrFull)
			return true
		}
	}
	return false
}

// noDelay marks an interval in which no delay was recorded yet.
const noDelay = 1<<63 - 1

func (q *Queue) finish(w *waiter, now int64, slot uint32, err error) {
	q.remove(w, now, err == nil)
	w.done, w.slot, w.err = true, slot, err
	w.ready <- struct{}{}
}

// remove takes w out of the queue at time now; served says whether it
// leaves with a slot.
func (q *Queue) remove(w *waiter, now int64, served bool) {
	ws := q.classes[w.class]
	for i, o := range ws {
		if o == w {
			copy(ws[i:], ws[i+1:])
			ws[len(ws)-1] = nil
			q.classes[w.class] = ws[:len(ws)-1]
			if len(ws) == 1 {
				q.cohorts[w.class] = 0
			}
			q.n--
			q.waiting.Store(int32(q.n))
			if q.n == 0 {
				q.drained, q.emptySince = served, now
			}
			return
		}
	}
}

// expired reports whether ctx is done, or its deadline or the stated
// deadline (zero: none) has passed on clk.
func expired(ctx context.Context, deadline time.Time, clk clock.Clock) bool {
	if ctx.Err() != nil {
		return true
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	return !deadline.IsZero() && !clk.Now().Before(deadline)
}
