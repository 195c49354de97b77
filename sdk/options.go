package governor

import (
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

// Options configure a Governor. Start from DefaultOptions.
type Options struct {
	// Service names the service; Apply refuses rulesets for another service.
	// Required.
	Service string
	// Clock is the admission-time clock. Its Nanotime is read on every
	// admission (once more before a rate-limit refusal, and by the queue),
	// so it should be cheap: nil means a clock.Coarse with 1 ms
	// resolution that the Governor owns and Close stops. Tests pass a
	// clock.Fake.
	Clock clock.Clock
	// Registerer receives the SDK's inbound metrics (docs/metrics.md); nil
	// means no metrics.
	Registerer prometheus.Registerer
	// Hooks are called on rule changes and rejections.
	Hooks Hooks
	// Shards is the number of shards for in-flight counts, token buckets and
	// counters (rounded down to a power of two, at most 64); 0 means four per
	// CPU.
	Shards int
	// NewLimiter builds a route's concurrency limiter; nil means sdk/limit.
	NewLimiter LimiterFactory
	// Defaults is the ruleset in force until the first Apply (version 0); nil
	// means DefaultRuleset(Service).
	Defaults *rules.Ruleset
	// Outbound is the outbound protection set that receives the downstream
	// rules of every applied ruleset; nil means the Governor makes one with
	// the same Service, Clock and Registerer. Outbound returns it.
	Outbound *outbound.Set
	// Overload configures the overload throttle, which sheds the lowest
	// classes while the process's goroutines wait too long for a CPU; it
	// is on by default (OverloadOptions).
	Overload OverloadOptions
}

// DefaultOptions returns options for service with every default.
func DefaultOptions(service string) Options {
	return Options{Service: service}
}

// Hooks let a service observe the Governor; the library itself never logs.
// Hooks run synchronously on the goroutine of a call to the Governor and
// delay it: keep them short.
type Hooks struct {
	// OnApply runs after every Apply with the version and nil, or with the
	// error that refused it. It runs after Apply has released its lock, so
	// it may call Apply (to apply a corrected ruleset, say), Rules or any
	// other method. Calls come one at a time, in the order the applies
	// happened: when Applies run concurrently, one of them may make the
	// calls of the others after its own, so an Apply may return before its
	// call has run; an Apply made from OnApply has its call made after the
	// hook returns.
	OnApply func(version int64, err error)
	// OnReject runs for every request the Governor refuses (not for shadow
	// counts). It must not retain the *Rejection beyond the call.
	OnReject func(*Rejection)
}

// DefaultRuleset is the built-in ruleset (version 0): one catch-all route
// "default" with an adaptive concurrency limit and priority shedding.
func DefaultRuleset(service string) *rules.Ruleset {
	return &rules.Ruleset{
		Service: service,
		Routes: []rules.Route{{
			Name:        "default",
			Match:       rules.Match{PathPrefix: "/"},
			Concurrency: &rules.Concurrency{},
			Shedding:    &rules.Shedding{},
		}},
	}
}
