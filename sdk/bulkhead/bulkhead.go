// Package bulkhead caps the calls in flight to one downstream, so that one
// slow dependency cannot hold every worker of a service.
//
// The cap is fixed (rules.Bulkhead.MaxConcurrent) or adaptive: with a Limiter
// (sdk/limit's adaptive limiters fit) the cap follows the limiter, never above
// MaxConcurrent, and every released call feeds the limiter its round-trip
// time. A refused call can run a fallback instead (Do).
package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Errors returned by this package.
var (
	// ErrFull is returned when the bulkhead has no free slot.
	ErrFull = errors.New("bulkhead: full")
	// ErrInvalidConfig wraps configuration errors from New.
	ErrInvalidConfig = errors.New("bulkhead: invalid config")
)

// Limiter is an adaptive concurrency limit; sdk/limit.Limiter satisfies it.
type Limiter interface {
	// Limit returns the current limit.
	Limit() int
	// Observe records a finished call: now and rtt in nanoseconds, the
	// in-flight count when it was admitted, and whether it failed from
	// overload.
	Observe(now, rtt int64, inflight int, dropped bool)
}

// Options are the dependencies of a Bulkhead. The zero value is usable.
type Options struct {
	// Limiter makes the cap adaptive; nil keeps it fixed at MaxConcurrent.
	Limiter Limiter
	// Clock times the calls Do runs; default clock.Real.
	Clock clock.Clock
	// Inherit shares the in-flight count of a bulkhead this one replaces
	// (after a rule change), so calls still running on the old one count
	// against the new cap and release into it. The old one is not changed.
	Inherit *Bulkhead
}

// Bulkhead is a concurrency cap. It is safe for concurrent use.
type Bulkhead struct {
	inflight *atomic.Int64
	max      int64
	lim      Limiter
	clk      clock.Clock
}

// New builds a bulkhead from c.
func New(c rules.Bulkhead, opts Options) (*Bulkhead, error) {
	if c.MaxConcurrent < 1 {
		return nil, fmt.Errorf("%w: max_concurrent must be at least 1, got %d", ErrInvalidConfig, c.MaxConcurrent)
	}
	b := &Bulkhead{inflight: new(atomic.Int64), max: int64(c.MaxConcurrent), lim: opts.Limiter, clk: opts.Clock}
	if opts.Inherit != nil {
		b.inflight = opts.Inherit.inflight
	}
	if b.clk == nil {
		b.clk = clock.Real{}
	}
	return b, nil
}

// Limit returns the current cap.
func (b *Bulkhead) Limit() int {
	if b.lim == nil {
		return int(b.max)
	}
	return int(min(b.max, max(1, int64(b.lim.Limit()))))
}

// InFlight returns the number of calls holding a slot.
func (b *Bulkhead) InFlight() int { return int(b.inflight.Load()) }

// Acquire takes a slot and returns the in-flight count including this call,
// or ErrFull. A successful Acquire must be followed by one Release (or
// Cancel). A refused call is never counted, not even for a moment, so
// calls racing for a slot just freed do not refuse each other.
func (b *Bulkhead) Acquire() (int, error) {
	limit := int64(b.Limit())
	for {
		n := b.inflight.Load()
		if n >= limit {
			return 0, ErrFull
		}
		if b.inflight.CompareAndSwap(n, n+1) {
			return int(n + 1), nil
		}
	}
}

// Force takes a slot even when the bulkhead is full (shadow mode: count, do
// not refuse) and reports whether the call would have been refused.
func (b *Bulkhead) Force() (inflight int, over bool) {
	n := b.inflight.Add(1)
	return int(n), n > int64(b.Limit())
}

// Release gives the slot back and, when adaptive, feeds the limiter: now and
// rtt in nanoseconds, inflight as Acquire returned it, dropped if the call
// failed from overload (a timeout or a rejection by the downstream).
func (b *Bulkhead) Release(now, rtt int64, inflight int, dropped bool) {
	b.give()
	if b.lim != nil {
		b.lim.Observe(now, rtt, inflight, dropped)
	}
}

// Cancel gives back a slot taken for a call that never started (another
// guard refused it), without feeding the limiter.
func (b *Bulkhead) Cancel() { b.give() }

// give returns a slot. The count never stays below zero: a slot given back
// twice (a caller's bug) would otherwise raise the cap for good; this way
// the error is gone once the calls in flight have ended.
func (b *Bulkhead) give() {
	if b.inflight.Add(-1) < 0 {
		b.inflight.Add(1)
	}
}

// Do runs fn in a slot. When there is none it returns fallback(ctx, ErrFull),
// or ErrFull when fallback is nil. fn's error counts as an overload drop for
// the adaptive cap when it is context.DeadlineExceeded. The slot is released
// even when fn panics (the panic, not a drop, goes on up).
func (b *Bulkhead) Do(ctx context.Context, fn func(context.Context) error, fallback func(context.Context, error) error) (err error) {
	n, err := b.Acquire()
	if err != nil {
		if fallback != nil {
			return fallback(ctx, err)
		}
		return err
	}
	start := b.clk.Nanotime()
	// Deferred so that a panic recovered further up (a recovery middleware)
	// does not keep the slot forever; err is then nil, not a drop.
	defer func() {
		end := b.clk.Nanotime()
		b.Release(end, end-start, n, errors.Is(err, context.DeadlineExceeded))
	}()
	return fn(ctx)
}
