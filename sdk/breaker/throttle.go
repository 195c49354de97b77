package breaker

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"governor.dev/governor/sdk/breaker/window"
	"governor.dev/governor/sdk/rules"
)

// Counters of the throttle's window.
const (
	cRequests = 0
	cAccepts  = 1
)

// Throttle is client-side adaptive throttling (Google SRE book, "Handling
// Overload"): each call is rejected locally with probability
// max(0, (requests - K*accepts) / (requests + 1)) over the window, where
// requests counts every call attempted (including the ones rejected here) and
// accepts the calls the downstream served. Build it with New (kind
// "throttle"); it is safe for concurrent use.
//
// Its State is Closed while it rejects nothing and HalfOpen while it rejects a
// share of calls; it never reports Open.
type Throttle struct {
	ring    *window.Ring
	k       float64
	refresh int64 // how often the probability is recomputed
	rnd     func() float64

	p          atomic.Uint64 // float64 bits of the reject probability
	computedAt atomic.Int64
	onChange   func(from, to State)
}

var _ Guard = (*Throttle)(nil)

func newThrottle(c rules.Breaker, opts Options) *Throttle {
	t := &Throttle{
		ring:     window.New(c.Window.D(), window.DefaultBuckets),
		k:        c.K,
		rnd:      opts.Float64,
		onChange: opts.OnStateChange,
	}
	t.refresh = int64(t.ring.BucketWidth()) / 10
	if t.rnd == nil {
		t.rnd = rand.Float64
	}
	t.computedAt.Store(math.MinInt64 / 2)
	return t
}

// Allow counts a request and rejects it with the current probability. The
// Ticket of an admitted call holds now, the time the request was counted at.
func (t *Throttle) Allow(now int64) (Ticket, error) {
	p := t.probability(now) // before counting this request, so a lone first call passes
	t.ring.Add(now, cRequests, 1)
	if p > 0 && t.rnd() < p {
		return 0, ErrOpen
	}
	if now == 0 {
		return 1, nil // the zero Ticket means none; 1ns later is the same bucket
	}
	return Ticket(now), nil
}

// Record counts an accepted call; failures and latency do not count.
func (t *Throttle) Record(tk Ticket, now int64, _ time.Duration, failed bool) {
	if tk != 0 && !failed {
		t.ring.Add(now, cAccepts, 1)
	}
}

// Release takes back the request Allow counted for a call admitted with tk
// that ends without an outcome (the caller cancelled it, or it was never
// made), so a cancelled call moves the reject probability neither way. The
// request is taken out of the bucket that counted it; once that bucket has
// left the window there is nothing to take back. Call Release instead of
// Record, never both.
func (t *Throttle) Release(tk Ticket) {
	if tk != 0 {
		t.ring.Add(int64(tk), cRequests, -1)
	}
}

// Probability returns the current reject probability at now. Like Allow, it
// refreshes the probability (at most once per refresh) and so may run the
// state-change hook; State only reads.
func (t *Throttle) Probability(now int64) float64 { return t.probability(now) }

func (t *Throttle) probability(now int64) float64 {
	last := t.computedAt.Load()
	if now-last < t.refresh || !t.computedAt.CompareAndSwap(last, now) {
		return math.Float64frombits(t.p.Load())
	}
	p := t.compute(now)
	old := math.Float64frombits(t.p.Swap(math.Float64bits(p)))
	if t.onChange != nil && (old == 0) != (p == 0) {
		from, to := Closed, HalfOpen
		if p == 0 {
			from, to = HalfOpen, Closed
		}
		t.onChange(from, to)
	}
	return p
}

// compute returns the reject probability over the window at now.
func (t *Throttle) compute(now int64) float64 {
	s := t.ring.Sum(now)
	// Release takes requests back, so a count lost when a bucket is
	// recycled under concurrency could leave the sum below zero: never let
	// the denominator reach zero.
	req, acc := float64(max(s[cRequests], 0)), float64(s[cAccepts])
	return max(0, (req-t.k*acc)/(req+1))
}

// State is Closed while nothing is rejected and HalfOpen while a share is.
// Once a refresh has passed since Allow last computed the probability, it
// computes it afresh at now, so that once traffic stops the state follows
// the window as it empties instead of keeping what the last call saw. It
// only reads: the probability Allow uses and the state-change hook are left
// to the next Allow, so State (which a metrics scrape calls) never runs the
// hook.
func (t *Throttle) State(now int64) State {
	p := math.Float64frombits(t.p.Load())
	if now-t.computedAt.Load() >= t.refresh {
		p = t.compute(now)
	}
	if p > 0 {
		return HalfOpen
	}
	return Closed
}
