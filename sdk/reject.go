package governor

import (
	"errors"
	"fmt"
	"time"

	"governor.dev/governor/sdk/rules"
)

// Errors. A *Rejection unwraps to the sentinel of its reason, and every reason
// sentinel wraps ErrRejected, so errors.Is(err, ErrRejected) tells any refusal
// apart from other failures.
var (
	// ErrRejected wraps every admission refusal.
	ErrRejected = errors.New("governor: rejected")
	// ErrShed: the concurrency limit for the request's class was full (or the
	// queue was).
	ErrShed = fmt.Errorf("%w: shed", ErrRejected)
	// ErrRateLimited: a token bucket of the route or of the request's key was
	// empty.
	ErrRateLimited = fmt.Errorf("%w: rate limited", ErrRejected)
	// ErrQueueTimeout: the request left the queue without a slot, or its
	// deadline had passed before it could start.
	ErrQueueTimeout = fmt.Errorf("%w: queue timeout", ErrRejected)
	// ErrBreakerOpen: a circuit breaker refused the call (outbound side; the
	// HTTP middleware maps it to 503).
	ErrBreakerOpen = fmt.Errorf("%w: breaker open", ErrRejected)
	// ErrDeadline: the caller's deadline (Request.Deadline) had passed, or
	// left less time than the route's recent latency (times
	// rules.Concurrency.DeadlineFactor), so the request was not started.
	ErrDeadline = fmt.Errorf("%w: deadline", ErrRejected)
	// ErrOverload: the overload throttle refused the request's class while
	// the process's CPU was saturated (OverloadOptions). It wraps ErrShed.
	ErrOverload = fmt.Errorf("%w: overload", ErrShed)

	// ErrInvalidOptions wraps errors from New.
	ErrInvalidOptions = errors.New("governor: invalid options")
	// ErrInvalidRules wraps errors from Apply that refuse a ruleset; the
	// rules.ValidationError with field-level problems is wrapped as well.
	ErrInvalidRules = errors.New("governor: invalid rules")
)

// Reason is why a request was refused.
type Reason uint8

// Rejection reasons.
const (
	ReasonShed Reason = iota + 1
	ReasonRateLimited
	ReasonQueueTimeout
	ReasonBreakerOpen
	ReasonDeadline
	ReasonOverload
)

var reasonNames = [...]string{"", "shed", "rate_limited", "queue_timeout", "breaker_open", "deadline", "overload"}

// String returns the metric outcome name: shed, rate_limited, queue_timeout,
// breaker_open, deadline, overload.
func (r Reason) String() string {
	if int(r) < len(reasonNames) && r > 0 {
		return reasonNames[r]
	}
	return "unknown"
}

// Overloaded reports whether a refusal for this reason means the server
// is overloaded (shed, overload, queue_timeout): "don't retry", as opposed
// to a rate limit, an open breaker or a deadline.
func (r Reason) Overloaded() bool {
	return r == ReasonShed || r == ReasonOverload || r == ReasonQueueTimeout
}

// Err returns the sentinel error of the reason.
func (r Reason) Err() error {
	switch r {
	case ReasonShed:
		return ErrShed
	case ReasonRateLimited:
		return ErrRateLimited
	case ReasonQueueTimeout:
		return ErrQueueTimeout
	case ReasonBreakerOpen:
		return ErrBreakerOpen
	case ReasonDeadline:
		return ErrDeadline
	case ReasonOverload:
		return ErrOverload
	}
	return ErrRejected
}

// Rejection is the error Admit returns for a refused request. Rejections
// are shared and must be treated as read-only.
type Rejection struct {
	Reason Reason
	// Route is the name of the route that refused the request.
	Route string
	// Class is the request's traffic class.
	Class rules.Class
	// RetryAfter is when the client may usefully try again (at least 1s).
	RetryAfter time.Duration
}

// Error describes the rejection.
func (e *Rejection) Error() string {
	return fmt.Sprintf("governor: %s (route %q, class %s, retry after %s)", e.Reason, e.Route, e.Class, e.RetryAfter)
}

// Unwrap returns the sentinel of the reason (ErrShed, ErrRateLimited, ...).
func (e *Rejection) Unwrap() error { return e.Reason.Err() }

// RetryAfterSeconds returns RetryAfter rounded up to whole seconds, at least 1,
// as the Retry-After header wants it.
func (e *Rejection) RetryAfterSeconds() int64 {
	// Rounded without adding to RetryAfter first: near math.MaxInt64 the
	// sum wraps negative, and "never" became one second.
	s := int64(e.RetryAfter / time.Second)
	if e.RetryAfter%time.Second > 0 {
		s++
	}
	return max(s, 1)
}
