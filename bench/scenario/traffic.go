package scenario

import "time"

// Request is one logical request of a run, drawn once so the simulator and
// the live load generator (and every limiter) see the same traffic.
type Request struct {
	At    time.Duration // first attempt, since the start of the run
	Class uint8         // class rank, 0 critical .. 3 batch
	User  uint64        // user key, 0 if the scenario has no users
	CPU   time.Duration // CPU cost at full capacity
	Wait  time.Duration // downstream wait before latency events
}

// Requests draws the run's requests: arrival times first, then each
// request's class, user and costs in arrival order.
func (src *Source) Requests(capacityRPS float64) []Request {
	at := src.Arrivals(capacityRPS)
	out := make([]Request, len(at))
	for i, t := range at {
		r := Request{At: t, Class: uint8(src.Class()), User: src.User(), CPU: src.s.Cost.CPU.Sample(src.rng)}
		if src.s.Cost.Wait != nil {
			r.Wait = src.s.Cost.Wait.Sample(src.rng)
		}
		out[i] = r
	}
	return out
}

// Budget tracks a client retry budget over ten one-second buckets. It is
// not safe for concurrent use.
type Budget struct {
	cfg             *RetryBudget
	firsts, retries [10]float64
	sec             int64
}

// NewBudget tracks cfg; a nil cfg allows every retry.
func NewBudget(cfg *RetryBudget) *Budget { return &Budget{cfg: cfg} }

func (b *Budget) roll(at time.Duration) int64 {
	sec := int64(at / time.Second)
	if sec-b.sec > 10 {
		b.sec = sec - 10
	}
	for b.sec < sec {
		b.sec++
		b.firsts[b.sec%10], b.retries[b.sec%10] = 0, 0
	}
	return sec % 10
}

// First records a first attempt at at.
func (b *Budget) First(at time.Duration) { b.firsts[b.roll(at)]++ }

// Retry reports whether a retry at at fits the budget, and records it if so.
func (b *Budget) Retry(at time.Duration) bool {
	i := b.roll(at)
	if b.cfg != nil {
		var f, r float64
		for k := range 10 {
			f += b.firsts[k]
			r += b.retries[k]
		}
		if r >= b.cfg.Ratio*f+b.cfg.MinPerSecond*10 {
			return false
		}
	}
	b.retries[i]++
	return true
}
