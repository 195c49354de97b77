// Package governor is the admission core of the Governor SDK: it decides, per
// request, whether a service starts work now, queues it briefly, or refuses it
// fast, and it learns how much work the service can take.
//
// A Governor enforces one service's rules.Ruleset. For every inbound request
// it runs, on the route the request matches:
//
//  1. exemptions (health checks, listed callers) that bypass everything;
//     then the caller's deadline, when it states one (Request.Deadline;
//     sdk/httpgov and sdk/grpc read it from the request): a request whose
//     deadline has passed, or leaves less than the route's recent average
//     latency (rules.Concurrency.DeadlineFactor times it), is refused at
//     once with ErrDeadline, counted under the outcome "deadline"; then, on
//     a route with a concurrency limit, the overload throttle
//     (OverloadOptions): while Go's scheduling latency stays above its
//     target, the CPU is saturated and requests queue before the handler
//     where no concurrency limit sees them, so a growing share of the
//     lowest classes is refused (ErrOverload, outcome "overload"), batch
//     first, never critical unless allowed, and only after two slow
//     windows in a row, or after one severe window (the CPUs busy and the
//     goroutines runnable at its end a wait of at least an eighth of the
//     time the requests have left to their stated deadlines: the onset of a
//     spike), which in the throttle's first ten windows adds a class for
//     every quarter of that time its run queue reaches; after those ten
//     windows a severe window needs 1.5 eighths and, past batch, two in a
//     row; once on, the level moves only where the window's latency and its
//     run queue agree;
//  2. the token-bucket rate limit of the route, then the per-key limits
//     (client IP, caller, user) with bounded memory;
//  3. the adaptive concurrency limit (sdk/limit), split into one ceiling per
//     traffic class (sdk/shed): critical keeps reserved headroom, lower
//     classes give way first, optionally the same users first;
//  4. when the limit is full and the route has a queue, a short CoDel queue
//     with adaptive LIFO (sdk/queue) in which a request whose deadline has
//     passed is never started.
//
// A warm-up ramp scales a fresh instance's rate and concurrency limits up from
// a fraction, and a route in shadow mode evaluates all of this but only counts
// what it would have rejected.
//
// A request's class comes from its priority header (rules.Priority); with
// priority trust (rules.Trust) it is capped by the class its
// transport-authenticated peer (Request.Peer, the identity of its verified
// mTLS client certificate) may claim, so a client cannot buy itself out of
// shedding by sending "critical".
//
// Admission is transport-neutral: Admit takes a Request (path, method,
// priority, user, caller, peer, client IP and a header lookup) and returns a Permit
// value, or a *Rejection that carries the reason and a Retry-After. The
// admitted path allocates nothing, reads only a coarse clock and touches no
// cache line shared between CPUs: in-flight counts, token buckets and metric
// counters are sharded. An admission picks its shard once, at random, and its
// release, its duration sample (count and sum in one word) and the limiter's
// sample reuse it. A request refused for the concurrency limit is reported to
// the limiter (limit.RefusalObserver), so that a limit full of requests that
// do not finish (a stalled dependency) is cut before any of them returns.
// sdk/httpgov wraps it as net/http middleware; the gRPC
// interceptors in sdk/grpc build on the same API.
//
// Apply swaps the whole ruleset atomically: it validates first and refuses an
// invalid ruleset without touching the rules in force, and it keeps learned
// state (concurrency limits, token buckets, in-flight counts, metric counters)
// for every route whose rules did not change.
//
// The library never logs: it reports through Hooks and through the Prometheus
// metrics in docs/metrics.md, registered on the Registerer given in Options.
package governor
