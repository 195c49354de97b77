package grpcgov

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"governor.dev/governor/sdk/internal/attempt"
)

// Retry amplification across hops, as sdk/transport contains it for HTTP:
// the server interceptors record on the call's context that the call is
// itself a retry (transport.WithInboundAttempt), from the metadata gRPC's
// own retries and UnaryClientInterceptor's retries send; a unary call made
// through UnaryClientInterceptor (or an HTTP request through sdk/transport)
// while serving such a call gets one attempt, unless
// ClientOptions.AllowNestedRetries.

// PreviousAttemptsKey is the metadata in which a client states how many
// attempts of the call it made before this one (gRPC retry design A6):
// absent on a first attempt, "1" on the first retry. gRPC's own retries
// send it, and so do UnaryClientInterceptor's.
const PreviousAttemptsKey = "grpc-previous-rpc-attempts"

// envoyAttemptKey is Envoy's attempt count (include_attempt_count_in_request),
// attempt 1 on a first attempt, as metadata. The client interceptors never
// send it: Envoy sets its own.
const envoyAttemptKey = "x-envoy-attempt-count"

// inboundAttempt returns the attempt number md states: one more than
// PreviousAttemptsKey, or Envoy's attempt count, the larger if both, and 1
// when it states none or only malformed values (a malformed count does not
// make a call a retry). It allocates nothing.
func inboundAttempt(md metadata.MD) int {
	n := 1
	if p, ok := attempt.First(md[PreviousAttemptsKey]); ok {
		n = p + 1
	}
	if a, ok := attempt.First(md[envoyAttemptKey]); ok {
		n = max(n, a)
	}
	return n
}

// attemptStream is a server stream whose context records its inbound
// attempt.
type attemptStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *attemptStream) Context() context.Context { return s.ctx }

// withPreviousAttempts returns the context to send attempt n+1 of a call
// under: for a retry (n > 0) one whose outgoing metadata carries
// PreviousAttemptsKey n, for a first attempt ctx itself. Attempt counts the
// caller's outgoing metadata already carries (a handler forwarding its
// inbound metadata: PreviousAttemptsKey, or Envoy's count, which would make
// the downstream take a first attempt for a retry) are dropped, each hop
// stating its own count. A first attempt without such values, the common
// case, allocates nothing.
func withPreviousAttempts(ctx context.Context, n int) context.Context {
	if len(metadata.ValueFromOutgoingContext(ctx, PreviousAttemptsKey)) > 0 ||
		len(metadata.ValueFromOutgoingContext(ctx, envoyAttemptKey)) > 0 {
		md, _ := metadata.FromOutgoingContext(ctx)
		md.Delete(PreviousAttemptsKey)
		md.Delete(envoyAttemptKey)
		if n > 0 {
			md.Set(PreviousAttemptsKey, attempt.Format(n))
		}
		return metadata.NewOutgoingContext(ctx, md)
	}
	if n <= 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, PreviousAttemptsKey, attempt.Format(n))
}
