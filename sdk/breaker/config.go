package breaker

import (
	"errors"
	"fmt"
	"math"
	"time"

	"governor.dev/governor/sdk/rules"
)

// Errors returned by this package.
var (
	// ErrOpen is returned by Allow when the breaker is open (or half-open
	// with every probe slot taken), or when the throttle rejects a call.
	ErrOpen = errors.New("breaker: open")
	// ErrInvalidConfig wraps every configuration error.
	ErrInvalidConfig = errors.New("breaker: invalid config")
)

// Defaults for the fields of rules.Breaker left at zero.
const (
	DefaultWindow         = 10 * time.Second
	DefaultMinCalls       = 20
	DefaultErrorRatio     = 0.5
	DefaultSlowCallRatio  = 1.0 // off
	DefaultSlowCall       = time.Second
	DefaultOpenBase       = 5 * time.Second
	DefaultOpenMax        = 60 * time.Second
	DefaultHalfOpenProbes = 3
	DefaultK              = 2.0
)

// WithDefaults returns c with every zero field set to its default.
func WithDefaults(c rules.Breaker) rules.Breaker {
	if c.Kind == "" {
		c.Kind = rules.BreakerKindBreaker
	}
	if c.Window <= 0 {
		c.Window = rules.Duration(DefaultWindow)
	}
	if c.MinCalls <= 0 {
		c.MinCalls = DefaultMinCalls
	}
	if c.ErrorRatio <= 0 {
		c.ErrorRatio = DefaultErrorRatio
	}
	if c.SlowCallRatio <= 0 {
		c.SlowCallRatio = DefaultSlowCallRatio
	}
	if c.SlowCall <= 0 {
		c.SlowCall = rules.Duration(DefaultSlowCall)
	}
	if c.OpenBase <= 0 {
		c.OpenBase = rules.Duration(DefaultOpenBase)
	}
	if c.OpenMax <= 0 {
		c.OpenMax = rules.Duration(DefaultOpenMax)
	}
	if c.OpenMax < c.OpenBase {
		c.OpenMax = c.OpenBase
	}
	if c.HalfOpenProbes <= 0 {
		c.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if c.K <= 0 {
		c.K = DefaultK
	}
	return c
}

func check(c rules.Breaker) error {
	switch {
	case c.Kind != rules.BreakerKindBreaker && c.Kind != rules.BreakerKindThrottle:
		return fmt.Errorf("%w: kind must be breaker or throttle, got %q", ErrInvalidConfig, c.Kind)
	case c.Window.D() < 100*time.Millisecond:
		return fmt.Errorf("%w: window must be at least 100ms, got %s", ErrInvalidConfig, c.Window.D())
	// NaN passes every comparison, and a NaN error ratio made a breaker
	// that never opened: test for it by name.
	case math.IsNaN(c.ErrorRatio) || c.ErrorRatio > 1:
		return fmt.Errorf("%w: error_ratio must be at most 1, got %v", ErrInvalidConfig, c.ErrorRatio)
	case math.IsNaN(c.SlowCallRatio) || c.SlowCallRatio > 1:
		return fmt.Errorf("%w: slow_call_ratio must be at most 1, got %v", ErrInvalidConfig, c.SlowCallRatio)
	case math.IsNaN(c.K) || c.K < 1:
		return fmt.Errorf("%w: k must be at least 1, got %v", ErrInvalidConfig, c.K)
	}
	return nil
}

// Options are the dependencies of a Guard. The zero value is usable.
type Options struct {
	// OnStateChange runs after every state change, outside every lock.
	OnStateChange func(from, to State)
	// Float64 returns a uniform random number in [0, 1); the throttle uses it
	// to reject with its probability. Default math/rand/v2.Float64.
	Float64 func() float64
}

// Guard is what both kinds offer.
type Guard interface {
	// Allow reports whether a call may start at now (monotonic nanoseconds).
	// It returns ErrOpen when the call must not be made.
	Allow(now int64) (Ticket, error)
	// Record reports the outcome of a call Allow admitted.
	Record(t Ticket, now int64, latency time.Duration, failed bool)
	// Release gives back what Allow took for a call it admitted that ends
	// without an outcome: the caller cancelled it, or it was never made. It
	// counts neither a success nor a failure: a half-open probe's slot goes
	// back to its round, and the throttle takes back the request it
	// counted. Each admitted call ends with exactly one Record or Release;
	// the zero Ticket is ignored.
	Release(t Ticket)
	// State returns the state at now.
	State(now int64) State
}

// New builds the Guard that c asks for, after filling in defaults.
func New(c rules.Breaker, opts Options) (Guard, error) {
	c = WithDefaults(c)
	if err := check(c); err != nil {
		return nil, err
	}
	if c.Kind == rules.BreakerKindThrottle {
		return newThrottle(c, opts), nil
	}
	return newBreaker(c, opts), nil
}
