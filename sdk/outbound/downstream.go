package outbound

import (
	"context"
	"errors"
	"fmt"
	"time"

	"governor.dev/governor/sdk/balancer"
	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/bulkhead"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/retry"
	"governor.dev/governor/sdk/rules"
)

// RejectedError is returned when a downstream's protection refuses a call
// before it is made. It unwraps to breaker.ErrOpen or bulkhead.ErrFull, so
// errors.Is(err, breaker.ErrOpen) tells an open breaker apart; servers that
// pass it on map it to 503 Service Unavailable.
type RejectedError struct {
	// Downstream names the downstream that refused the call.
	Downstream string
	// Reason is breaker.ErrOpen or bulkhead.ErrFull.
	Reason error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("outbound: call to %s refused: %v", e.Downstream, e.Reason)
}

// Unwrap returns the reason.
func (e *RejectedError) Unwrap() error { return e.Reason }

// StatusCode is the HTTP status a server returns when it passes the
// refusal on: 503.
func (e *RejectedError) StatusCode() int { return 503 }

// Downstream is the protection of one dependency under the rules in force.
// It is safe for concurrent use.
type Downstream struct {
	name    string
	rule    rules.Downstream
	shadow  bool
	timeout time.Duration
	brk     breaker.Guard      // nil without breaker rules
	retrier *retry.Retrier     // nil without retry rules
	bh      *bulkhead.Bulkhead // nil without bulkhead rules
	bal     *balancer.Balancer // always set; idle without endpoints
	clk     clock.Clock
	hooks   *Hooks
	stats   *stats
	// balCounts is what the balancers bal replaced counted, added to
	// bal's own counts in the exported counters.
	balCounts balCounts

	// refused are the errors handed out for refusals, made once so the
	// refused path does not allocate.
	refusedOpen, refusedFull *RejectedError
}

// Name returns the downstream's name.
func (d *Downstream) Name() string { return d.name }

// Rule returns the downstream's rules.
func (d *Downstream) Rule() rules.Downstream { return d.rule }

// Shadow reports whether the downstream is in shadow mode.
func (d *Downstream) Shadow() bool { return d.shadow }

// Timeout returns the per-attempt timeout (0: none).
func (d *Downstream) Timeout() time.Duration { return d.timeout }

// Clock returns the clock calls are timed with.
func (d *Downstream) Clock() clock.Clock { return d.clk }

// Breaker returns the downstream's breaker, or nil.
func (d *Downstream) Breaker() breaker.Guard { return d.brk }

// Bulkhead returns the downstream's bulkhead, or nil.
func (d *Downstream) Bulkhead() *bulkhead.Bulkhead { return d.bh }

// Retrier returns the downstream's retry policy, or nil when retries are off.
func (d *Downstream) Retrier() *retry.Retrier { return d.retrier }

// Balancer returns the downstream's balancer; it has endpoints only when
// Set.SetEndpoints gave some.
func (d *Downstream) Balancer() *balancer.Balancer { return d.bal }

// Call is one call admitted by Begin; finish it with End, or with Cancel
// when it ends without an outcome.
type Call struct {
	d        *Downstream
	ticket   breaker.Ticket
	inflight int
	bh       bool // holds a bulkhead slot
	start    int64
}

// Begin asks the bulkhead and the breaker whether a call may start at now
// (monotonic nanoseconds from d.Clock()). In shadow mode it never refuses.
// A refusal is a *RejectedError.
func (d *Downstream) Begin(now int64) (Call, error) {
	c := Call{d: d, start: now}
	would := false // a shadow call that would be refused, counted once
	if d.bh != nil {
		if d.shadow {
			c.inflight, would = d.bh.Force()
			c.bh = true
		} else {
			n, err := d.bh.Acquire()
			if err != nil {
				d.stats.call(iBulkheadFull)
				return Call{}, d.refuse(bulkhead.ErrFull)
			}
			c.inflight, c.bh = n, true
		}
	}
	if d.brk != nil {
		t, err := d.allow(now, c.bh)
		switch {
		case err == nil:
			c.ticket = t
		case d.shadow:
			would = true
		default:
			if c.bh {
				d.bh.Cancel()
			}
			d.stats.call(iBreakerOpen)
			return Call{}, d.refuse(breaker.ErrOpen)
		}
	}
	if would {
		d.stats.call(iShadow)
	}
	return c, nil
}

// allow asks the breaker. Allow may run the OnStateChange hook; should the
// hook panic, the bulkhead slot Begin holds (holding) is given back, or every
// such panic would leak a slot until the bulkhead refused every call.
func (d *Downstream) allow(now int64, holding bool) (breaker.Ticket, error) {
	if !holding {
		return d.brk.Allow(now)
	}
	done := false
	defer func() {
		if !done {
			d.bh.Cancel()
		}
	}()
	t, err := d.brk.Allow(now)
	done = true
	return t, err
}

// Refuse reports a call refused outside Begin, such as one for which every
// endpoint of the balancer is ejected (reason wraps breaker.ErrOpen), and
// returns its *RejectedError. It is counted as breaker_open when reason is an
// open breaker and runs the OnReject hook.
func (d *Downstream) Refuse(reason error) error {
	e := &RejectedError{Downstream: d.name, Reason: reason}
	if errors.Is(reason, breaker.ErrOpen) {
		d.stats.call(iBreakerOpen)
	}
	if d.hooks.OnReject != nil {
		d.hooks.OnReject(e)
	}
	return e
}

func (d *Downstream) refuse(reason error) error {
	var e *RejectedError
	if errors.Is(reason, breaker.ErrOpen) {
		e = d.refusedOpen
	} else {
		e = d.refusedFull
	}
	if d.hooks.OnReject != nil {
		d.hooks.OnReject(e)
	}
	return e
}

// End reports the outcome of the call at now: failed if the downstream
// failed (an error or a 5xx), dropped if it failed from overload (a timeout,
// a 429 or 503), which also cuts an adaptive bulkhead. A zero Call is
// ignored.
func (c Call) End(now int64, failed, dropped bool) {
	d := c.d
	if d == nil {
		return
	}
	rtt := now - c.start
	if c.bh {
		d.bh.Release(now, rtt, c.inflight, dropped)
	}
	if failed {
		d.stats.finish(iError, rtt)
	} else {
		d.stats.finish(iSuccess, rtt)
	}
	// Last: Record may run the OnStateChange hook, and a hook that panics
	// must not keep the bulkhead slot or lose the count.
	if d.brk != nil {
		d.brk.Record(c.ticket, now, time.Duration(rtt), failed)
	}
}

// EndUnmeasured ends the call like End but gives no latency sample, for a
// call whose duration is not a latency (a stream that lives as long as its
// caller wants): the bulkhead slot is given back without feeding an
// adaptive limiter, the outcome is counted but not put in the latency
// histogram, and the breaker records it with latency 0, so it is never a
// slow call. The same as governor.Permit.ReleaseUnmeasured on the server
// side. A zero Call is ignored.
func (c Call) EndUnmeasured(now int64, failed bool) {
	d := c.d
	if d == nil {
		return
	}
	if c.bh {
		d.bh.Cancel()
	}
	if failed {
		d.stats.count(iError)
	} else {
		d.stats.count(iSuccess)
	}
	if d.brk != nil { // last, as in End
		d.brk.Record(c.ticket, now, 0, failed)
	}
}

// Cancel ends a call without an outcome: one that is not made after all (no
// endpoint could take it) or whose caller gave up before it ended. It gives
// back what Begin took, the bulkhead slot and the breaker's admission
// (breaker.Guard.Release: a half-open probe's slot goes back to its round, a
// throttle takes back the request it counted), and records nothing: no
// latency sample, no success, no failure. End the call with End or Cancel,
// not both. A zero Call is ignored.
func (c Call) Cancel() {
	d := c.d
	if d == nil {
		return
	}
	if c.bh {
		d.bh.Cancel()
	}
	if d.brk != nil {
		d.brk.Release(c.ticket)
	}
}

// Request counts a first attempt in the retry budget at now.
func (d *Downstream) Request(now int64) {
	if d.retrier != nil {
		d.retrier.Budget().Request(now)
	}
}

// SuppressedRetry counts a retry the caller did not make although the
// failure was retryable: because the response said "overloaded; don't
// retry" (overloaded), or because the call served a request that was itself
// a retry, so that retries do not multiply across hops.
func (d *Downstream) SuppressedRetry(overloaded bool) {
	i := 0
	if overloaded {
		i = 1
	}
	d.stats.shard().suppressed[i].Add(1)
}

// NextRetry decides whether a failed call may be retried (see
// retry.Retrier.Next) and counts a refusal by the budget. Without retry rules
// it returns retry.ErrAttemptsExhausted. Follow a yes with Wait.
func (d *Downstream) NextRetry(ctx context.Context, f retry.Failure) (time.Duration, error) {
	if d.retrier == nil {
		return 0, retry.ErrAttemptsExhausted
	}
	wait, err := d.retrier.Next(ctx, f)
	if errors.Is(err, retry.ErrBudgetExhausted) {
		d.stats.shard().budgetRefused.Add(1)
	}
	return wait, err
}

// Wait sleeps for a retry's back-off on the downstream's clock, or until ctx
// is done. A retry whose back-off ends is counted as attempted; one whose
// caller leaves first is not made: the budget gets it back and it is not
// counted.
func (d *Downstream) Wait(ctx context.Context, wait time.Duration) error {
	if d.retrier == nil {
		return ctx.Err()
	}
	if err := d.retrier.Wait(ctx, wait); err != nil {
		return err
	}
	d.stats.shard().retried.Add(1)
	return nil
}
