package grpcgov

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/transport"
)

// ServerOptions configure the server interceptors. The zero value is usable.
type ServerOptions struct {
	// Clock measures handler latency; default clock.Real (a precise clock:
	// the adaptive limit learns from these samples).
	Clock clock.Clock
	// Outcome maps a handler's error to how the call ended; default
	// DefaultOutcome, with one rule of its own that needs the call's
	// context: a DeadlineExceeded after the caller's own deadline (the
	// grpc-timeout it sent) has passed counts as Success (see
	// outcomeOf). A custom Outcome decides alone.
	Outcome func(error) governor.Outcome
	// IgnoreDeadlines leaves the call's deadline out of admission: by
	// default a call whose deadline (grpc-timeout, which gRPC puts on the
	// context) has passed or leaves less than the route's recent latency
	// is refused with codes.DeadlineExceeded before the handler runs.
	IgnoreDeadlines bool
	// IgnoreAttempts leaves the call's attempt count unread: by default a
	// call that is itself a retry (PreviousAttemptsKey, or Envoy's
	// x-envoy-attempt-count above 1) runs with that recorded on its
	// context (transport.WithInboundAttempt; Retried reports it), and the
	// handler's calls through UnaryClientInterceptor and sdk/transport
	// then make one attempt each.
	IgnoreAttempts bool
}

// DefaultOutcome: no error is a success; DeadlineExceeded and Unavailable
// (including an outbound refusal) are overload drops, as httpgov counts 504
// and 503; Internal, Unknown and DataLoss are failures; other codes are
// client errors and count as successes, Canceled among them (the client went
// away, the server did not fail) and ResourceExhausted (a caller over its
// quota was served a refusal, as httpgov counts a 429: counted as a drop,
// one caller over its quota would cut the route's adaptive limit for
// everyone). A plain context error counts as the code gRPC sends for it:
// context.Canceled as Canceled, context.DeadlineExceeded as
// DeadlineExceeded.
func DefaultOutcome(err error) governor.Outcome {
	if err == nil {
		return governor.Success
	}
	switch code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		return governor.Dropped
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return governor.Failure
	}
	return governor.Success
}

// code is the gRPC code of an error, with outbound refusals as Unavailable
// and a plain context error as the code gRPC sends for it: context.Canceled
// (the client went away) is Canceled, context.DeadlineExceeded is
// DeadlineExceeded.
func code(err error) codes.Code {
	if unavailable(err) {
		return codes.Unavailable
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return status.FromContextError(err).Code()
}

// unavailable reports whether err is an open breaker or an outbound refusal.
func unavailable(err error) bool {
	var rej *outbound.RejectedError
	return errors.Is(err, breaker.ErrOpen) || errors.Is(err, governor.ErrBreakerOpen) || errors.As(err, &rej)
}

// Status maps a Governor refusal to a gRPC status error: ResourceExhausted
// for shed, rate-limited and queue-timeout rejections, DeadlineExceeded for a
// deadline that had passed or could not be met, Unavailable for an open
// breaker (a governor rejection or an outbound refusal). Other errors are
// returned unchanged.
func Status(err error) error {
	var rej *governor.Rejection
	switch {
	case errors.As(err, &rej):
		c := codes.ResourceExhausted
		switch rej.Reason {
		case governor.ReasonBreakerOpen:
			c = codes.Unavailable
		case governor.ReasonDeadline:
			c = codes.DeadlineExceeded
		}
		return status.Error(c, "governor: "+rej.Reason.String()+"; retry later")
	case unavailable(err):
		if _, ok := status.FromError(err); ok && status.Code(err) == codes.Unavailable {
			return err
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	return err
}

// fill sets the defaults and returns how a call's outcome is decided.
func (o *ServerOptions) fill() func(context.Context, error) governor.Outcome {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Outcome == nil {
		return outcomeOf
	}
	custom := o.Outcome
	return func(_ context.Context, err error) governor.Outcome { return custom(err) }
}

// outcomeOf is the default outcome of a call: DefaultOutcome, except that a
// DeadlineExceeded that ends a call after its caller's own deadline has
// passed (ctx, gRPC's context of the call, carries the grpc-timeout the
// caller sent) counts as Success, like a Canceled: the caller chose how
// long to wait and gave up, the server did not fail. Counted as an
// overload drop, a few callers with tight deadlines (which pass the
// admission's DeadlineFactor check and then run out on a slower call) cut
// the route's adaptive limit for every caller. The call still gives its
// latency sample, so real overload, which stretches calls up to their
// callers' deadlines, still cuts the limit. A DeadlineExceeded of the
// server's own (a handler's timeout on a downstream while the caller's
// deadline is still ahead) stays a drop.
func outcomeOf(ctx context.Context, err error) governor.Outcome {
	o := DefaultOutcome(err)
	if o == governor.Dropped && code(err) == codes.DeadlineExceeded && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return governor.Success
	}
	return o
}

// mdHeader looks up gRPC metadata under canonical header names.
type mdHeader metadata.MD

func (h mdHeader) Get(name string) string {
	if v := metadata.MD(h).Get(strings.ToLower(name)); len(v) > 0 {
		return v[0]
	}
	return ""
}

// request returns the admission request of a call and the attempt its
// metadata states (1 when attempts is false).
func request(ctx context.Context, g *governor.Governor, method string, deadlines, attempts bool) (governor.Request, int) {
	r := governor.Request{Path: method, Method: "POST"}
	if deadlines {
		r.Deadline, _ = ctx.Deadline()
	}
	attempt := 1
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		r.Header = mdHeader(md)
		if attempts {
			attempt = inboundAttempt(md)
		}
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		r.ClientIP = p.Addr.String()
		if i := strings.LastIndexByte(r.ClientIP, ':'); i > 0 {
			r.ClientIP = strings.Trim(r.ClientIP[:i], "[]")
		}
	}
	if g.TrustsPeers() {
		if p, ok := peer.FromContext(ctx); ok {
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
				r.Peer = governor.PeerIdentity(&ti.State)
			}
		}
	}
	return r, attempt
}

// refuse answers a refused call: the status and, in the
// grpc-retry-pushback-ms trailer, the Retry-After or, for the server's own
// overload, "-1", "do not retry" (see overloaded).
func refuse(ctx context.Context, err error) error {
	var rej *governor.Rejection
	if errors.As(err, &rej) {
		ms := noRetryPushback
		if !rej.Reason.Overloaded() {
			ms = strconv.FormatInt(rej.RetryAfter.Milliseconds(), 10)
		}
		_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, ms))
	}
	return Status(err)
}

// noRetryPushback is the grpc-retry-pushback-ms the server interceptors send
// with a refusal for the server's own overload: a negative pushback, which
// gRPC's retries (retry design A6) and UnaryClientInterceptor take as "do
// not retry".
const noRetryPushback = "-1"

// Retried reports whether the server call ctx belongs to is itself a retry
// (its caller stated a previous attempt in PreviousAttemptsKey, or Envoy an
// attempt count above 1), as the server interceptors record it;
// transport.InboundAttempt returns the number. The handler's unary calls
// through UnaryClientInterceptor, and its HTTP requests through
// sdk/transport, then make one attempt each.
func Retried(ctx context.Context) bool { return transport.InboundAttempt(ctx) > 1 }

// UnaryServerInterceptor admits every unary call through g. The full method
// name ("/pkg.Service/Method") is the path routes match; metadata serves as
// headers (priority, user, caller); under priority trust rules (rules.Trust)
// the verified client certificate of an mTLS connection names the peer
// (governor.PeerIdentity). A handler that panics releases its permit as a
// failure; the panic goes on to the interceptors further out.
func UnaryServerInterceptor(g *governor.Governor, opts ServerOptions) grpc.UnaryServerInterceptor {
	outcome := opts.fill()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		r, attempt := request(ctx, g, info.FullMethod, !opts.IgnoreDeadlines, !opts.IgnoreAttempts)
		permit, err := g.Admit(ctx, r)
		if err != nil {
			return nil, refuse(ctx, err)
		}
		if attempt > 1 {
			ctx = transport.WithInboundAttempt(ctx, attempt)
		}
		start := opts.Clock.Nanotime()
		held := true // the permit is still held
		defer releaseOnPanic(&held, permit, opts.Clock, start, true)
		resp, err := handler(ctx, req)
		o := outcome(ctx, err)
		held = false // a panic in Release must not release it again
		permit.Release(time.Duration(opts.Clock.Nanotime()-start), o)
		return resp, Status(err)
	}
}

// StreamServerInterceptor admits every stream through g; the permit is held
// for the stream's whole life, and released as a failure if the handler
// panics. A stream's life is no service time (a watch stream may stay open
// for hours), so it is released unmeasured (governor.Permit.ReleaseUnmeasured):
// it counts in flight and its outcome counts, but it gives the adaptive limit
// no latency sample. Give long-lived streams a route of their own, so they do
// not hold the slots of the unary calls' limit.
func StreamServerInterceptor(g *governor.Governor, opts ServerOptions) grpc.StreamServerInterceptor {
	outcome := opts.fill()
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		r, attempt := request(ctx, g, info.FullMethod, !opts.IgnoreDeadlines, !opts.IgnoreAttempts)
		permit, err := g.Admit(ctx, r)
		if err != nil {
			return refuse(ctx, err)
		}
		if attempt > 1 {
			ss = &attemptStream{ServerStream: ss, ctx: transport.WithInboundAttempt(ctx, attempt)}
		}
		start := opts.Clock.Nanotime()
		held := true
		defer releaseOnPanic(&held, permit, opts.Clock, start, false)
		err = handler(srv, ss)
		o := outcome(ctx, err)
		held = false
		permit.ReleaseUnmeasured(time.Duration(opts.Clock.Nanotime()-start), o)
		return Status(err)
	}
}

// releaseOnPanic, deferred, releases permit as a Failure when the handler
// (or Outcome) panics while the permit is still held, and lets the panic go
// on: a recovery interceptor further out keeps the server alive, and the
// call must not keep its slot of the route's concurrency limit. A panic in
// the release itself (a custom limiter) leaves it released once: a second
// release would push the in-flight count below zero and raise the limit for
// good. A stream's permit (measured false) is released unmeasured, as when
// it ends.
func releaseOnPanic(held *bool, permit governor.Permit, clk clock.Clock, start int64, measured bool) {
	if !*held {
		return
	}
	if p := recover(); p != nil {
		held := time.Duration(clk.Nanotime() - start)
		if measured {
			permit.Release(held, governor.Failure)
		} else {
			permit.ReleaseUnmeasured(held, governor.Failure)
		}
		panic(p)
	}
}
