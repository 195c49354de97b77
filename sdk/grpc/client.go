package grpcgov

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/retry"
	"governor.dev/governor/sdk/transport"
)

// ErrInvalidOptions wraps errors from the interceptor constructors.
var ErrInvalidOptions = errors.New("grpcgov: invalid options")

// ClientOptions configure the client interceptors.
type ClientOptions struct {
	// Set holds the downstreams' protection; required.
	Set *outbound.Set
	// Downstream names the downstream of a call; default the connection's
	// target (cc.Target()). Calls to a downstream without rules pass
	// through unprotected.
	Downstream func(ctx context.Context, method string, cc *grpc.ClientConn) string
	// Idempotent says whether a unary method (its full name,
	// "/pkg.Service/Method") may be sent more than once; nil means no
	// method is retried. Use AllMethods to retry every unary method.
	// Streams are never retried, whatever it says.
	Idempotent func(method string) bool
	// Failed says whether a call's error counts as a failure for the
	// breaker; default DefaultFailed.
	Failed func(error) bool
	// Retryable says whether a failed unary call may be retried; default
	// DefaultRetryable. Streams are never retried.
	Retryable func(error) bool
	// Fallback answers a unary call the protection refused (breaker open,
	// bulkhead full), for example by filling reply from a cache; err is the
	// *RefusedError. nil returns the refusal.
	Fallback func(ctx context.Context, method string, req, reply any, err error) error
	// AllowNestedRetries lets a unary call made while serving a call or
	// request that is itself a retry (transport.InboundAttempt(ctx) > 1,
	// recorded by the server interceptors from PreviousAttemptsKey or by
	// sdk/httpgov from transport.HeaderAttempt) be retried too. By default
	// such a call gets one attempt, so retries do not multiply across hops.
	AllowNestedRetries bool
}

// AllMethods treats every method as idempotent.
func AllMethods(string) bool { return true }

// DefaultFailed counts the codes that say the server or the network failed:
// Unavailable, DeadlineExceeded, Internal, Unknown, DataLoss. Client errors
// (InvalidArgument, NotFound, ...) are not failures, and neither is
// ResourceExhausted: a server that rate-limits or sheds a caller (a Governor
// server answers its shed, rate-limited and queue-timeout refusals so) asks
// it to send less, like an HTTP 429, and is not broken; counted as a failure,
// one caller over its quota would open the breaker for every call to the
// downstream. It still counts as an overload drop, which cuts an adaptive
// bulkhead.
func DefaultFailed(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.DataLoss:
		return true
	}
	return false
}

// DefaultRetryable retries Unavailable and ResourceExhausted. The
// interceptor retries a ResourceExhausted only after the pushback the server
// gave (grpc-retry-pushback-ms): without one it is returned at once, as a
// quota that ran out does not come back after a few milliseconds of
// back-off.
func DefaultRetryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted:
		return true
	}
	return false
}

func (o *ClientOptions) fill() error {
	if o.Set == nil {
		return fmt.Errorf("%w: Set is required", ErrInvalidOptions)
	}
	if o.Downstream == nil {
		o.Downstream = func(_ context.Context, _ string, cc *grpc.ClientConn) string { return cc.Target() }
	}
	if o.Failed == nil {
		o.Failed = DefaultFailed
	}
	if o.Retryable == nil {
		o.Retryable = DefaultRetryable
	}
	return nil
}

// RefusedError is the error of a call the protection refused. Its gRPC status
// is Unavailable; it unwraps to the *outbound.RejectedError.
type RefusedError struct {
	Rejected *outbound.RejectedError
}

func (e *RefusedError) Error() string { return e.Rejected.Error() }

// Unwrap returns the outbound refusal.
func (e *RefusedError) Unwrap() error { return e.Rejected }

// GRPCStatus makes the error a codes.Unavailable status.
func (e *RefusedError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Rejected.Error())
}

func refusal(err error) error {
	var rej *outbound.RejectedError
	if errors.As(err, &rej) {
		return &RefusedError{Rejected: rej}
	}
	return err
}

// UnaryClientInterceptor protects unary calls.
func UnaryClientInterceptor(opts ClientOptions) (grpc.UnaryClientInterceptor, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		d := opts.Set.Get(opts.Downstream(ctx, method, cc))
		if d == nil {
			return invoker(ctx, method, req, reply, cc, callOpts...)
		}
		clk := d.Clock()
		d.Request(clk.Nanotime())
		canRetry := d.Retrier() != nil && opts.Idempotent != nil && opts.Idempotent(method)
		nested := canRetry && !opts.AllowNestedRetries && transport.InboundAttempt(ctx) > 1
		for attempt := 1; ; attempt++ {
			var trailer *metadata.MD // only to read a retry's pushback
			start := clk.Nanotime()
			call, err := d.Begin(start)
			if err != nil {
				if opts.Fallback != nil {
					return opts.Fallback(ctx, method, req, reply, refusal(err))
				}
				return refusal(err)
			}
			actx, cancel := withPreviousAttempts(ctx, attempt-1), context.CancelFunc(nil)
			if to := d.Timeout(); to > 0 {
				actx, cancel = context.WithTimeout(actx, to)
			}
			co := callOpts
			if canRetry {
				trailer = new(metadata.MD)
				co = append(callOpts[:len(callOpts):len(callOpts)], grpc.Trailer(trailer))
			}
			var end int64
			var failed, unjudged bool
			err = settle(call, func() error {
				defer func() {
					if cancel != nil {
						cancel()
					}
				}()
				err := invoker(actx, method, req, reply, cc, co...)
				if unjudged = noOutcome(ctx, cc, err); !unjudged {
					end, failed = clk.Nanotime(), opts.Failed(err)
				}
				return err
			})
			if unjudged {
				call.Cancel()
				return err
			}
			call.End(end, failed, dropped(err))
			// Retryable alone decides, apart from Failed: a
			// ResourceExhausted is retried though it is no failure.
			if err == nil || !canRetry || !opts.Retryable(err) {
				return err
			}
			var after time.Duration
			if v := trailer.Get(PushbackKey); len(v) > 0 { // canRetry: trailer is set
				p, ok, stop := ParsePushback(v[0])
				if stop { // "overloaded; don't retry"
					d.SuppressedRetry(true)
					return err
				}
				if ok {
					after = max(p, time.Nanosecond)
				}
			}
			if after == 0 && status.Code(err) == codes.ResourceExhausted {
				return err // only when the server says when
			}
			if nested {
				d.SuppressedRetry(false)
				return err
			}
			wait, nerr := d.NextRetry(ctx, retry.Failure{Attempts: attempt, RetryAfter: after, Took: time.Duration(end - start)})
			if nerr != nil {
				return err
			}
			if werr := d.Wait(ctx, wait); werr != nil {
				return err
			}
		}
	}, nil
}

// settle runs the part of a call that can panic (the invoker, the
// interceptors after this one, Options.Failed). A panic there, which a
// recovery interceptor further out survives, cancels call, giving back its
// bulkhead slot and any half-open probe slot, and goes on up: each such
// panic would otherwise keep a slot for good, until the bulkhead refused
// every call to the downstream.
func settle(call outbound.Call, run func() error) (err error) {
	done := false
	defer func() {
		if !done {
			call.Cancel()
		}
	}()
	err = run()
	done = true
	return err
}

// dropped says whether an error is an overload drop (it cuts an adaptive
// bulkhead).
func dropped(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.ResourceExhausted, codes.Unavailable:
		return err != nil
	}
	return false
}

// StreamClientInterceptor puts every stream through its downstream's bulkhead
// and breaker. A stream is one call from its opening to its end: it holds its
// bulkhead slot for its whole life (as Envoy counts an HTTP/2 stream against
// max_requests), and its outcome is reported once, when it ends, from the
// status gRPC ends it with (grpc.OnFinish): a stream the server ends with OK
// (RecvMsg returns io.EOF) is a success, one that fails after it opened (a
// reset, UNAVAILABLE or a deadline mid-stream) is judged by Failed like a
// unary call, and one its caller cancels, or that ends because the ClientConn
// was closed, counts neither way. A stream gives no latency sample
// (outbound.Call.EndUnmeasured): its lifetime is as long as its caller wants,
// so it neither feeds an adaptive bulkhead nor counts as a slow call. Give
// long-lived streams (watch streams) a downstream name of their own
// (Downstream) all the same, so that they do not hold the bulkhead slots of
// unary calls. Streams are not retried, whatever ClientOptions.Idempotent and
// Retryable say: a stream that breaks is the caller's to open again. A stream
// is a first attempt: attempt counts in the caller's outgoing metadata (a
// handler forwarding its inbound metadata) are not sent.
//
// Interceptors further in must pass the call options on to gRPC, as gRPC
// interceptors do: the end of the stream is seen only through them.
func StreamClientInterceptor(opts ClientOptions) (grpc.StreamClientInterceptor, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		d := opts.Set.Get(opts.Downstream(ctx, method, cc))
		if d == nil {
			return streamer(ctx, desc, cc, method, callOpts...)
		}
		clk := d.Clock()
		call, err := d.Begin(clk.Nanotime())
		if err != nil {
			return nil, refusal(err)
		}
		sc := &streamCall{call: call, ctx: ctx, cc: cc, clk: clk, failed: opts.Failed}
		co := append(sc.opts[:0], callOpts...)
		co = append(co, grpc.OnFinish(sc.finish))
		sctx := withPreviousAttempts(ctx, 0) // a stream is a first attempt
		s, err := sc.open(func() (grpc.ClientStream, error) {
			return streamer(sctx, desc, cc, method, co...)
		})
		if err != nil {
			// gRPC has run the OnFinish options of a stream it could
			// not open, or an interceptor further in refused it
			// before gRPC saw it: finish decides once either way.
			sc.finish(err)
		}
		return s, err
	}, nil
}

// streamCall is the outbound call of one stream, ended exactly once: by
// gRPC when the stream ends, or by the interceptor when it was not opened.
type streamCall struct {
	call   outbound.Call
	ctx    context.Context // the caller's
	cc     *grpc.ClientConn
	clk    clock.Clock
	failed func(error) bool
	done   atomic.Bool
	// opts holds the stream's call options, so that a stream takes one
	// allocation besides its finish callback when they are few.
	opts [8]grpc.CallOption
}

// open runs the streamer. Should it panic (an interceptor further in), the
// call is cancelled, unless it has already ended, and the panic goes on.
func (s *streamCall) open(streamer func() (grpc.ClientStream, error)) (grpc.ClientStream, error) {
	done := false
	defer func() {
		if !done && s.done.CompareAndSwap(false, true) {
			s.call.Cancel()
		}
	}()
	cs, err := streamer()
	done = true
	return cs, err
}

// finish reports how the stream ended (err nil for OK); it acts once.
func (s *streamCall) finish(err error) {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	if noOutcome(s.ctx, s.cc, err) {
		s.call.Cancel()
		return
	}
	judged := false
	defer func() {
		if !judged { // Failed panicked
			s.call.Cancel()
		}
	}()
	failed := s.failed(err)
	judged = true
	// A stream lives as long as its caller wants: its lifetime is no
	// latency, for the adaptive bulkhead or the breaker's slow calls.
	s.call.EndUnmeasured(s.clk.Nanotime(), failed)
}

// noOutcome reports whether a call ended with codes.Canceled because its
// caller cancelled ctx or because the service closed the ClientConn cc
// under it (grpc.ClientConn.Close: gRPC ends the calls and streams still
// open, and refuses new ones, with codes.Canceled). Either says nothing of
// the downstream, which never failed, nor served the call: the call is
// cancelled (outbound.Call.Cancel), counting neither a success nor a
// failure and giving no latency sample, and gives back what it took, a
// half-open probe slot included. A codes.Canceled the server sent while ctx
// and cc are live is an outcome like any other, and a per-attempt timeout
// is a failure.
func noOutcome(ctx context.Context, cc *grpc.ClientConn, err error) bool {
	if err == nil || status.Code(err) != codes.Canceled {
		return false
	}
	return errors.Is(ctx.Err(), context.Canceled) || cc != nil && cc.GetState() == connectivity.Shutdown
}
