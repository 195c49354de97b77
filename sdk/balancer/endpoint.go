package balancer

import (
	"math"
	"sync/atomic"

	"governor.dev/governor/sdk/breaker"
)

// penalty is the cost of an endpoint without latency samples that already
// has a call in flight: high enough that a sampled endpoint wins.
const penalty = float64(1 << 40)

// Endpoint is one address of a downstream with its load statistics.
type Endpoint struct {
	addr  string
	added int64
	// since is when the endpoint's current slow start began: when it was
	// added, or when it returned from its last ejection (for consecutive
	// failures, when the ejection ends, stored when it starts).
	since    atomic.Int64
	inflight atomic.Int64
	cost     atomic.Uint64 // float64 bits: peak-EWMA latency in nanoseconds
	stamp    atomic.Int64  // when cost was last updated
	brk      breaker.Guard // nil without a breaker
	// open is brk when it is of kind breaker (the kind that ejects), for
	// its open period; nil otherwise.
	open *breaker.Breaker

	// Ejection state, shared by the balancers that share the endpoint.
	fails    atomic.Int64 // failed calls in a row (Ejection.ConsecutiveFailures)
	outUntil atomic.Int64 // end of the last consecutive-failure ejection; 0 if none
	// seen is the breaker opening the balancer last judged against the
	// ejection cap: its OpenUntil if it is honoured (the endpoint gets no
	// calls), minus its OpenUntil if the cap refused it.
	seen atomic.Int64
	// times counts the consecutive-failure ejections remembered for the
	// ejection time; guarded by the balancer's ejection lock.
	times int
}

// Addr returns the endpoint's address.
func (e *Endpoint) Addr() string { return e.addr }

// InFlight returns the calls in flight to the endpoint.
func (e *Endpoint) InFlight() int { return int(e.inflight.Load()) }

// Latency returns the peak-EWMA latency estimate at now, in nanoseconds.
func (e *Endpoint) Latency(now int64, decay float64) float64 {
	c := math.Float64frombits(e.cost.Load())
	if c == 0 {
		return 0
	}
	if idle := float64(now - e.stamp.Load()); idle > 0 {
		c *= math.Exp(-idle / decay)
	}
	return c
}

// load is the P2C cost: latency x (in-flight + 1).
func (e *Endpoint) load(now int64, decay float64) float64 {
	n := float64(e.inflight.Load())
	c := e.Latency(now, decay)
	if c == 0 && n > 0 {
		return penalty + n
	}
	return c * (n + 1)
}

// observe folds a latency sample (nanoseconds, at least 1) into the peak
// EWMA. The sample is compared with the estimate as Latency reports it,
// decayed over the time since the last sample: a slower sample replaces it,
// a faster one pulls it toward the sample with weight 1 - exp(-elapsed /
// decay). Weighing the sample against the stored, undecayed value instead
// made a fast call after an idle spell raise the estimate.
func (e *Endpoint) observe(now int64, sample float64, decay float64) {
	for {
		old := e.cost.Load()
		next := sample // peak: jump up at once
		if c := math.Float64frombits(old); sample < c {
			// Only a sample under the stored estimate can be under the
			// decayed one: the decay is computed for those alone.
			w := math.Exp(-float64(max(now-e.stamp.Load(), 0)) / decay)
			if c *= w; sample < c {
				next = c*w + sample*(1-w)
			}
		}
		if e.cost.CompareAndSwap(old, math.Float64bits(next)) {
			e.stamp.Store(now)
			return
		}
	}
}

// breakerOpen reports whether the endpoint's breaker (of kind breaker) is
// open at now, and until when.
func (e *Endpoint) breakerOpen(now int64) (int64, bool) {
	if e.open == nil || e.open.State(now) != breaker.Open {
		return 0, false
	}
	return e.open.OpenUntil(), true
}
