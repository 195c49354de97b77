package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Options are the dependencies of a Retrier. The zero value is usable.
type Options struct {
	// Clock tells the time and sleeps; default clock.Real.
	Clock clock.Clock
	// Float64 returns a uniform random number in [0, 1) for the jitter;
	// default math/rand/v2.Float64.
	Float64 func() float64
	// BudgetWindow is the budget's sliding window; default DefaultBudgetWindow.
	BudgetWindow time.Duration
	// Budget shares an existing budget instead of making a new one (so that
	// rebuilding a Retrier keeps what the budget learned).
	Budget *Budget
}

// Retrier plans retries for one downstream. It is safe for concurrent use.
type Retrier struct {
	maxAttempts int
	base, max   time.Duration
	budget      *Budget
	clk         clock.Clock
	rnd         func() float64
}

// New builds a Retrier from c after filling in defaults.
func New(c rules.Retry, opts Options) (*Retrier, error) {
	c = WithDefaults(c)
	if err := check(c); err != nil {
		return nil, err
	}
	r := &Retrier{
		maxAttempts: c.MaxAttempts,
		base:        c.BaseBackoff.D(),
		max:         c.MaxBackoff.D(),
		budget:      opts.Budget,
		clk:         opts.Clock,
		rnd:         opts.Float64,
	}
	if r.budget == nil {
		r.budget = NewBudget(c.Budget, c.MinPerSecond, opts.BudgetWindow)
	}
	if r.clk == nil {
		r.clk = clock.Real{}
	}
	if r.rnd == nil {
		r.rnd = rand.Float64
	}
	return r, nil
}

// Budget returns the retry budget.
func (r *Retrier) Budget() *Budget { return r.budget }

// MaxAttempts returns the number of attempts allowed, the first included.
func (r *Retrier) MaxAttempts() int { return r.maxAttempts }

// Backoff returns the jittered wait before retry number n (1 for the first
// retry): uniform in [0, min(MaxBackoff, BaseBackoff x 2^(n-1))).
func (r *Retrier) Backoff(n int) time.Duration {
	ceil := r.base
	for i := 1; i < n && ceil < r.max; i++ {
		if ceil > r.max/2 { // doubling would pass the cap, or overflow
			ceil = r.max
			break
		}
		ceil *= 2
	}
	ceil = min(ceil, r.max)
	return time.Duration(r.rnd() * float64(ceil))
}

// Failure describes the failed attempt a retry would follow.
type Failure struct {
	// Attempts made so far, the failed one included.
	Attempts int
	// RetryAfter is how long the server asked to wait (0 if it did not).
	RetryAfter time.Duration
	// Took is how long the failed attempt took: a retry is expected to take
	// as long, so it is planned only if the wait plus Took ends before the
	// context's deadline.
	Took time.Duration
}

// Next decides whether a retry may follow the failure f and returns how long
// to wait first: the jittered back-off, or when the server asked for a longer
// Retry-After, a wait uniform in [RetryAfter, 1.5 x RetryAfter) that still
// ends, with Took, before the deadline. On a yes it has spent one retry from
// the budget; on a no it returns one of ErrAttemptsExhausted,
// ErrRetryAfterTooLong, ErrDeadline or ErrBudgetExhausted, or ctx's error
// when ctx is already done (the caller has gone: no retry is planned and the
// budget is not spent).
func (r *Retrier) Next(ctx context.Context, f Failure) (time.Duration, error) {
	if f.Attempts >= r.maxAttempts {
		return 0, ErrAttemptsExhausted
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d := r.Backoff(f.Attempts)
	// spread is the jitter added above a Retry-After: every client a server
	// turned away at once with the same Retry-After would otherwise come
	// back at the same instant.
	var spread time.Duration
	if f.RetryAfter > 0 {
		if f.RetryAfter > r.max {
			return 0, fmt.Errorf("%w: asked for %s", ErrRetryAfterTooLong, f.RetryAfter)
		}
		if f.RetryAfter > d {
			d, spread = f.RetryAfter, f.RetryAfter/2
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		// The wait plus the retry must end before the deadline; compared
		// without adding them, so long durations cannot overflow.
		left := dl.Sub(r.clk.Now())
		took := max(f.Took, 0)
		if d >= left || took >= left-d {
			return 0, ErrDeadline
		}
		spread = min(spread, left-d-took) // the jitter stays below the room left
	}
	if !r.budget.TryRetry(r.clk.Nanotime()) {
		return 0, ErrBudgetExhausted
	}
	if spread > 0 {
		d += time.Duration(r.rnd() * float64(spread))
	}
	return d, nil
}

// Wait sleeps for d, the back-off of a retry Next allowed, on the
// Retrier's clock, or until ctx is done. When ctx ends first the retry is
// not made: Wait gives it back to the budget (Budget.Refund) and returns
// ctx's error, so callers that give up during back-offs do not use up the
// budget of those that stay.
func (r *Retrier) Wait(ctx context.Context, d time.Duration) error {
	start := r.clk.Nanotime()
	if d <= 0 {
		if err := ctx.Err(); err != nil {
			r.budget.Refund(start)
			return err
		}
		return nil
	}
	t := r.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.budget.Refund(start)
		return ctx.Err()
	}
}

// Do calls fn until it succeeds, returns a Permanent error, or Next decides
// against another attempt (each attempt is expected to take as long as the
// previous one); it returns fn's last error. An error made by After
// carries a server's Retry-After.
func (r *Retrier) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	r.budget.Request(r.clk.Nanotime())
	for attempt := 1; ; attempt++ {
		start := r.clk.Nanotime()
		err := fn(ctx)
		took := time.Duration(r.clk.Nanotime() - start)
		if err == nil {
			return nil
		}
		var p *permanentError
		if errors.As(err, &p) || ctx.Err() != nil {
			return err
		}
		var ra *afterError
		var after time.Duration
		if errors.As(err, &ra) {
			after = ra.after
		}
		d, nerr := r.Next(ctx, Failure{Attempts: attempt, RetryAfter: after, Took: took})
		if nerr != nil {
			return err
		}
		if werr := r.Wait(ctx, d); werr != nil {
			return err
		}
	}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying.
func Permanent(err error) error { return &permanentError{err} }

type afterError struct {
	err   error
	after time.Duration
}

func (e *afterError) Error() string { return e.err.Error() }
func (e *afterError) Unwrap() error { return e.err }

// After marks err as retryable no sooner than d (a server's Retry-After).
func After(err error, d time.Duration) error { return &afterError{err, d} }
