// Package scenario is the overload laboratory's scenario format: a JSON file
// describing traffic (arrival rate over time, request cost, class mix, user
// population, client deadlines and retries) and disturbances (downstream
// latency and server capacity changing over time, short pauses). Both the
// simulator and the live runner read the same file. The format is
// documented in bench/scenarios/README.md.
package scenario

import (
	"math"
	"time"

	"governor.dev/governor/sdk/rules"
)

// Rate units.
const (
	UnitCapacity = "capacity" // multiples of the server capacity measured by calibration
	UnitRPS      = "rps"      // requests per second
)

// Segment shapes.
const (
	ShapeConstant = "constant"
	ShapeRamp     = "ramp"
	ShapeSine     = "sine"
)

// Distributions.
const (
	DistConstant    = "constant"
	DistUniform     = "uniform"
	DistExponential = "exponential"
	DistLognormal   = "lognormal"
)

// Event kinds.
const (
	EventDownstreamLatency = "downstream_latency" // multiplies the downstream wait
	EventCapacity          = "capacity"           // multiplies the server's CPU capacity
)

// Scenario is one overload experiment.
type Scenario struct {
	// Name identifies the scenario in results; letters, digits, '-', '_', '.'.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Seed makes arrivals and costs repeatable; default 1.
	Seed int64 `json:"seed,omitempty"`
	// Duration of the run (at most 10m).
	Duration rules.Duration `json:"duration"`
	Arrival  Arrival        `json:"arrival"`
	Cost     Cost           `json:"cost"`
	// Downstream is the simulated dependency the handler waits on.
	Downstream *Downstream `json:"downstream,omitempty"`
	Client     Client      `json:"client"`
	// Classes maps classes to their share of requests; default all core.
	Classes map[rules.Class]float64 `json:"classes,omitempty"`
	Users   *Users                  `json:"users,omitempty"`
	Pauses  *Pauses                 `json:"pauses,omitempty"`
	// Events change downstream latency or server capacity for a while.
	Events []Event `json:"events,omitempty"`
}

// Arrival is the open-loop arrival rate over time: Base, overridden inside
// each segment. Arrivals form a Poisson process with that rate.
type Arrival struct {
	Unit     string    `json:"unit"`
	Base     float64   `json:"base"`
	Segments []Segment `json:"segments,omitempty"`
}

// Segment sets the rate in [From, To): constant Rate, a linear ramp from
// Rate to RateEnd, or Rate + Amplitude*sin(2π(t-From)/Period).
type Segment struct {
	From      rules.Duration `json:"from"`
	To        rules.Duration `json:"to"`
	Shape     string         `json:"shape"`
	Rate      float64        `json:"rate"`
	RateEnd   float64        `json:"rate_end,omitempty"`
	Amplitude float64        `json:"amplitude,omitempty"`
	Period    rules.Duration `json:"period,omitempty"`
}

// Cost is what one request costs the server.
type Cost struct {
	// CPU is on-CPU time per request at full capacity.
	CPU Dist `json:"cpu"`
	// Wait is time spent waiting on the downstream (nil: none).
	Wait *Dist `json:"wait,omitempty"`
}

// Dist is a distribution of durations.
type Dist struct {
	// Dist is constant, uniform (Mean ± Spread), exponential or lognormal
	// (Mean and Stddev).
	Dist   string         `json:"dist"`
	Mean   rules.Duration `json:"mean"`
	Spread rules.Duration `json:"spread,omitempty"`
	Stddev rules.Duration `json:"stddev,omitempty"`
}

// Downstream is the dependency's capacity.
type Downstream struct {
	// Concurrency is how many calls it serves at once (a connection pool);
	// further calls queue. 0 means unlimited.
	Concurrency int `json:"concurrency,omitempty"`
}

// Client is how callers behave.
type Client struct {
	// Deadline per attempt; a response after it is wasted work.
	Deadline rules.Duration `json:"deadline"`
	// MaxAttempts per request including the first; default 1 (no retries).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Backoff before a retry; default 10ms.
	Backoff rules.Duration `json:"backoff,omitempty"`
	// RetryBudget caps retries; nil means retry whenever attempts remain.
	RetryBudget *RetryBudget `json:"retry_budget,omitempty"`
}

// RetryBudget allows retries up to Ratio of first attempts (over a sliding
// 10 s window) plus MinPerSecond.
type RetryBudget struct {
	Ratio        float64 `json:"ratio"`
	MinPerSecond float64 `json:"min_per_second,omitempty"`
}

// Users is the user-key population; keys follow a Zipf law with exponent S
// (> 1), or are uniform when S is 0.
type Users struct {
	Count int     `json:"count"`
	S     float64 `json:"s,omitempty"`
}

// Pauses are short stalls of the whole server (GC-like), not overload.
type Pauses struct {
	Every  rules.Duration `json:"every"`
	Length rules.Duration `json:"length"`
	// Jitter randomises Every by ± this fraction (0..1).
	Jitter float64 `json:"jitter,omitempty"`
}

// Event multiplies downstream latency or server capacity by Factor in
// [From, To).
type Event struct {
	Kind   string         `json:"kind"`
	From   rules.Duration `json:"from"`
	To     rules.Duration `json:"to"`
	Factor float64        `json:"factor"`
}

// Length is the run duration.
func (s *Scenario) Length() time.Duration { return s.Duration.D() }

// RateAt is the arrival rate in requests per second at t, given the
// calibrated capacity (for UnitCapacity).
func (s *Scenario) RateAt(t time.Duration, capacityRPS float64) float64 {
	r := s.Arrival.Base
	for _, g := range s.Arrival.Segments {
		if t < g.From.D() || t >= g.To.D() {
			continue
		}
		x := float64(t-g.From.D()) / float64(g.To.D()-g.From.D())
		switch g.Shape {
		case ShapeConstant:
			r = g.Rate
		case ShapeRamp:
			r = g.Rate + (g.RateEnd-g.Rate)*x
		case ShapeSine:
			r = g.Rate + g.Amplitude*math.Sin(2*math.Pi*float64(t-g.From.D())/float64(g.Period.D()))
		}
	}
	if s.Arrival.Unit == UnitCapacity {
		r *= capacityRPS
	}
	return max(r, 0)
}

// MaxRate bounds RateAt over the run (for thinning arrivals). Only the
// fields of a segment's own shape count: a rate_end or amplitude left on a
// constant segment is ignored by RateAt, so it must not inflate the bound.
func (s *Scenario) MaxRate(capacityRPS float64) float64 {
	m := s.Arrival.Base
	for _, g := range s.Arrival.Segments {
		m = max(m, g.Rate)
		switch g.Shape {
		case ShapeRamp:
			m = max(m, g.RateEnd)
		case ShapeSine:
			m = max(m, g.Rate+math.Abs(g.Amplitude))
		}
	}
	if s.Arrival.Unit == UnitCapacity {
		m *= capacityRPS
	}
	return m
}

// factorAt multiplies the factors of the events of kind active at t.
func (s *Scenario) factorAt(kind string, t time.Duration) float64 {
	f := 1.0
	for _, e := range s.Events {
		if e.Kind == kind && t >= e.From.D() && t < e.To.D() {
			f *= e.Factor
		}
	}
	return f
}

// CapacityFactorAt is the server capacity multiplier at t (0.5 = halved).
func (s *Scenario) CapacityFactorAt(t time.Duration) float64 { return s.factorAt(EventCapacity, t) }

// LatencyFactorAt is the downstream latency multiplier at t.
func (s *Scenario) LatencyFactorAt(t time.Duration) float64 {
	return s.factorAt(EventDownstreamLatency, t)
}

// LastDisturbanceEnd is when the last disturbance (event or rate segment)
// ends; one lasting to the end of the run counts from its start (a
// permanent change, such as a downsized machine). Recovery is measured from
// here; 0 if there is no disturbance.
func (s *Scenario) LastDisturbanceEnd() time.Duration {
	var end time.Duration
	mark := func(from, to time.Duration) {
		if to < s.Length() {
			end = max(end, to)
		} else {
			end = max(end, from)
		}
	}
	for _, e := range s.Events {
		mark(e.From.D(), e.To.D())
	}
	for _, g := range s.Arrival.Segments {
		mark(g.From.D(), g.To.D())
	}
	return end
}

// ClassShares returns the class mix in rank order, defaulting to all core.
func (s *Scenario) ClassShares() [4]float64 {
	var out [4]float64
	if len(s.Classes) == 0 {
		out[rules.ClassCore.Rank()] = 1
		return out
	}
	sum := 0.0
	for _, v := range s.Classes {
		sum += v
	}
	for c, v := range s.Classes {
		out[c.Rank()] = v / sum
	}
	return out
}

// IdealCapacity is what the server (and downstream) could complete per
// second at t: the CPU capacity scaled by capacity events, and at most the
// downstream pool divided by its current mean latency.
func (s *Scenario) IdealCapacity(t time.Duration, capacityRPS float64) float64 {
	c := capacityRPS * s.CapacityFactorAt(t)
	if s.Downstream != nil && s.Downstream.Concurrency > 0 && s.Cost.Wait != nil && s.Cost.Wait.Mean > 0 {
		w := s.Cost.Wait.Mean.D().Seconds() * s.LatencyFactorAt(t)
		c = min(c, float64(s.Downstream.Concurrency)/w)
	}
	return c
}

// StaticLimit is the concurrency the "static" baseline is given: 1.5 times
// what the server needs in flight to run at its capacity (Little's law on the
// mean CPU and downstream time), at least 2. It is oracle knowledge of the
// unloaded server that a real operator would have to guess.
func (s *Scenario) StaticLimit(capacityRPS float64) int {
	t := s.Cost.CPU.Mean.D().Seconds()
	if s.Cost.Wait != nil {
		t += s.Cost.Wait.Mean.D().Seconds()
	}
	return max(2, int(math.Ceil(1.5*s.IdealCapacity(0, capacityRPS)*t)))
}

// Disturbed reports whether the scenario has events or rate segments
// (pauses are noise, not disturbances).
func (s *Scenario) Disturbed() bool { return len(s.Events) > 0 || len(s.Arrival.Segments) > 0 }
