// Package grpcgov is Governor's gRPC integration, in its own module
// (governor.dev/governor/sdk/grpc) so that HTTP-only services never pull in
// gRPC. Import it as
//
//	grpcgov "governor.dev/governor/sdk/grpc"
//
// Client side, UnaryClientInterceptor puts every call through its downstream's
// outbound protection (sdk/outbound): bulkhead, circuit breaker and retries
// with back-off and the retry budget. gRPC carries no notion of idempotency,
// so a method is retried only when ClientOptions.Idempotent says it may be;
// the server's grpc-retry-pushback-ms trailer is honoured like an HTTP
// Retry-After (a negative value means do not retry), and a ResourceExhausted
// without one is not retried. Retryable alone decides a retry, apart from
// Failed, which feeds the breaker. A refused call fails with
// codes.Unavailable, and the error also unwraps to the
// *outbound.RejectedError, so errors.Is(err, breaker.ErrOpen) works.
// StreamClientInterceptor counts a stream as one call from its opening to its
// end, and never retries it (a stream's messages cannot be replayed; a broken
// stream is its caller's to open again): it holds its bulkhead slot while
// open, and its outcome is reported once, when it ends (grpc.OnFinish), so a
// downstream that accepts streams and then breaks them (a reset, UNAVAILABLE
// or a deadline mid-stream) opens the breaker; io.EOF is a success. It gives
// no latency sample (its lifetime is no latency); name long-lived streams as a
// downstream of their own, so that they hold no slots of unary calls. A call
// or stream that fails with codes.Canceled because its caller cancelled the
// context, or because the service closed the ClientConn (ClientConn.Close ends
// the calls still open and refuses new ones with codes.Canceled), says nothing
// of the downstream: it counts as neither a success nor a failure, gives no
// latency sample and gives back its bulkhead slot and any half-open probe slot
// (outbound.Call.Cancel). A DeadlineExceeded is a failure on the client side
// even when the caller's own deadline ran out: a downstream that hangs shows
// as nothing else.
//
// Server side, UnaryServerInterceptor and StreamServerInterceptor admit every
// call through a governor.Governor. Refusals map to codes.ResourceExhausted
// (shed, rate limited, queue timeout) and codes.Unavailable (an open breaker,
// including an outbound refusal a handler returns), with the Retry-After in
// the grpc-retry-pushback-ms trailer, except for the server's own overload
// (shed, overload, queue timeout): those carry the pushback "-1", which
// gRPC's retries and UnaryClientInterceptor take as "do not retry", as
// sdk/httpgov marks them X-Governor-Overloaded. A rate limit's
// pushback is its Retry-After, after which it is retried as before.
//
// Retries do not multiply across hops. UnaryClientInterceptor sends
// grpc-previous-rpc-attempts on its retries ("1" on the first, as gRPC's own
// retries do; a value the caller's outgoing metadata carries is replaced,
// each hop stating its own count, and Envoy's x-envoy-attempt-count there is
// dropped, on unary calls and streams alike). The server interceptors record
// on the call's context that a call is itself a retry
// (grpc-previous-rpc-attempts, or Envoy's x-envoy-attempt-count above 1;
// transport.WithInboundAttempt, Retried), so that the handler's unary calls
// through UnaryClientInterceptor and its HTTP requests through sdk/transport
// make one attempt each, no retries of their own, unless
// ClientOptions.AllowNestedRetries (ServerOptions.IgnoreAttempts leaves the
// count unread). With A -> B -> C and three attempts at each layer, an
// unavailable C sees 5 calls for each of A's instead of 9. Retries not made,
// for a negative pushback or while serving a retry, are counted in
// governor_sdk_retries_total (suppressed_overloaded,
// suppressed_inbound_retry). Do not also enable gRPC's own retry policy on a
// channel with UnaryClientInterceptor's retries: the two would multiply, and
// both would state the count.
//
// The codes follow the HTTP side (429 and 503) and say different things to a
// client. ResourceExhausted is "send less": the server is well and chose to
// refuse this call, by priority or by the caller's rate. Governor clients do
// not count it as a failure of the downstream (DefaultFailed; it would open
// the breaker for every caller because one is over its quota or a low
// priority class is shed) and retry it only after the pushback the server
// gave, under the retry budget. Unavailable is "this instance cannot serve
// now": a failure for the breaker, retried with back-off under the budget
// (elsewhere, with a balancer), as gRPC's own retry policies do. A server's
// DefaultOutcome counts a handler's ResourceExhausted as served, as httpgov
// counts a 429, and Unavailable as an overload drop, as it counts a 503. A
// DeadlineExceeded is an overload drop too, unless the caller's own
// deadline (its grpc-timeout) had passed: then the caller gave up, as with
// Canceled, and the call counts as served, though its latency is still a
// sample.
//
// A call whose deadline (the caller's
// grpc-timeout, which gRPC puts on the context) has passed or leaves less
// than the route's recent average latency (rules.Concurrency.DeadlineFactor
// times it) is refused at once with codes.DeadlineExceeded and counted under
// the outcome "deadline" (ServerOptions.IgnoreDeadlines turns this off).
package grpcgov
