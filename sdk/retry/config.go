package retry

import (
	"errors"
	"fmt"
	"math"
	"time"

	"governor.dev/governor/sdk/rules"
)

// Errors returned by this package. Next returns the last four (or the
// context's error once the context is done) when it decides against a retry;
// the caller then returns the last attempt's outcome.
var (
	ErrInvalidConfig = errors.New("retry: invalid config")
	// ErrAttemptsExhausted: MaxAttempts attempts were made.
	ErrAttemptsExhausted = errors.New("retry: attempts exhausted")
	// ErrBudgetExhausted: the retry budget allows no retry now.
	ErrBudgetExhausted = errors.New("retry: budget exhausted")
	// ErrDeadline: the wait would end after the context's deadline.
	ErrDeadline = errors.New("retry: deadline too close")
	// ErrRetryAfterTooLong: the server asked to wait longer than MaxBackoff.
	ErrRetryAfterTooLong = errors.New("retry: retry-after beyond max backoff")
)

// Defaults for the fields of rules.Retry left at zero.
const (
	DefaultMaxAttempts  = 3
	DefaultBaseBackoff  = 25 * time.Millisecond
	DefaultMaxBackoff   = time.Second
	DefaultBudget       = 0.2
	DefaultMinPerSecond = 10.0
	// DefaultBudgetWindow is the window over which the budget counts.
	DefaultBudgetWindow = 10 * time.Second
)

// WithDefaults returns c with every zero field set to its default.
func WithDefaults(c rules.Retry) rules.Retry {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = rules.Duration(DefaultBaseBackoff)
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = rules.Duration(DefaultMaxBackoff)
	}
	if c.MaxBackoff < c.BaseBackoff {
		c.MaxBackoff = c.BaseBackoff
	}
	if c.Budget <= 0 {
		c.Budget = DefaultBudget
	}
	if c.MinPerSecond <= 0 {
		c.MinPerSecond = DefaultMinPerSecond
	}
	return c
}

func check(c rules.Retry) error {
	switch {
	case c.MaxAttempts > 100:
		return fmt.Errorf("%w: max_attempts must be at most 100, got %d", ErrInvalidConfig, c.MaxAttempts)
	case math.IsNaN(c.Budget) || c.Budget > 1:
		return fmt.Errorf("%w: budget must be at most 1, got %v", ErrInvalidConfig, c.Budget)
	case math.IsNaN(c.MinPerSecond) || c.MinPerSecond > 1e6:
		return fmt.Errorf("%w: min_per_second must be at most 1000000, got %v", ErrInvalidConfig, c.MinPerSecond)
	}
	return nil
}
