package governor

import (
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/rules"
)

// Limiter is a route's concurrency limit; sdk/limit implements it.
type Limiter interface {
	// Limit returns the current limit (>= 1); called after every Observe.
	Limit() int
	// Observe records a finished request: now and rtt in nanoseconds,
	// inflight when it was admitted, dropped if it failed from overload.
	Observe(now, rtt int64, inflight int, dropped bool)
}

// LimiterFactory builds a route's limiter from its rules; the overload
// laboratory passes its own to compare algorithms.
type LimiterFactory func(cfg rules.Concurrency, clk clock.Clock) (Limiter, error)

// NewLimiter is the default LimiterFactory: sdk/limit.New.
func NewLimiter(cfg rules.Concurrency, clk clock.Clock) (Limiter, error) {
	return limit.New(cfg, clk)
}
