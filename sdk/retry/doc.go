// Package retry retries failed calls without turning an outage into a retry
// storm.
//
// A Retrier combines three limits. Exponential back-off with full jitter
// spreads retries out (the wait before retry n is uniform in
// [0, min(MaxBackoff, BaseBackoff x 2^(n-1)))). A Budget caps retries at a
// share of requests over a sliding window, with a small floor of retries per
// second that are always allowed (as Envoy's and Finagle's retry budgets do),
// so that when a downstream fails, total load stays below (1 + Budget) times
// the offered load instead of MaxAttempts times. And a retry is only planned
// when it can finish: not when the context is already done (the caller has
// gone), not when the wait plus the time the failed attempt took would pass
// the context's deadline, never sooner than a Retry-After the server asked
// for, and not at all when that Retry-After is longer than MaxBackoff. The
// wait after a Retry-After is spread over [RetryAfter, 1.5 x RetryAfter)
// (less where the deadline leaves less room), so that the clients a server
// turned away together do not all come back at the same instant. A retry
// whose caller goes away during its back-off is given back to the budget
// (Wait does it), as it never reaches the downstream.
//
// ParseRetryAfter reads the HTTP Retry-After header in both of its forms.
// Whether a request may be retried at all (idempotency) is the caller's
// decision; the transport package makes it for HTTP.
package retry
