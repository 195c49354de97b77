package grpcgov

// Tests of what the status codes mean to each side: see the package doc.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestClientRateLimitDoesNotOpenBreaker: a server that rate-limits or sheds
// some callers answers ResourceExhausted with a pushback. That says "send
// less", not "I am broken": it must not open the client's breaker for every
// call to the downstream (an HTTP 429 does not either).
func TestClientRateLimitDoesNotOpenBreaker(t *testing.T) {
	clk := clock.NewFake(time.Now())
	set := clientSet(t, clk, rules.Downstream{Name: "passthrough:///health", Breaker: &rules.Breaker{MinCalls: 3}})
	ci, _ := UnaryClientInterceptor(ClientOptions{Set: set})
	h := &health{reply: func(ctx context.Context, n int) error {
		if n <= 5 {
			withPushback(ctx, "1000")
			return status.Error(codes.ResourceExhausted, "governor: rate_limited; retry later")
		}
		return nil
	}}
	cc := serve(t, h, nil, grpc.WithUnaryInterceptor(ci))
	for range 5 {
		if err := check(cc); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("call = %v, want ResourceExhausted", err)
		}
	}
	if st := set.Get("passthrough:///health").Breaker().State(clk.Nanotime()); st != breaker.Closed {
		t.Fatalf("breaker %v after rate-limited calls, want closed", st)
	}
	if err := check(cc); err != nil {
		t.Fatalf("call after rate-limited calls = %v, want it made", err)
	}
}

// TestClientRetryClassification: Retryable alone decides a retry, apart from
// Failed (as in sdk/transport); a ResourceExhausted is retried only after the
// pushback the server gave, never at once.
func TestClientRetryClassification(t *testing.T) {
	exhausted := status.Error(codes.ResourceExhausted, "quota")
	tests := []struct {
		name      string
		failed    func(error) bool
		reply     func(ctx context.Context, n int) error
		wantCalls int
		wantCode  codes.Code
		wantWaits []time.Duration
	}{
		{"resource exhausted with pushback is retried after it", nil, func(ctx context.Context, n int) error {
			if n == 1 {
				withPushback(ctx, "300")
				return exhausted
			}
			return nil
		}, 2, codes.OK, []time.Duration{300 * time.Millisecond}},
		{"resource exhausted without pushback is not retried", nil, func(context.Context, int) error {
			return exhausted
		}, 1, codes.ResourceExhausted, nil},
		{"Retryable decides even when Failed says no failure", func(error) bool { return false }, func(_ context.Context, n int) error {
			if n == 1 {
				return status.Error(codes.Unavailable, "busy")
			}
			return nil
		}, 2, codes.OK, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &instantClock{Fake: clock.NewFake(time.Now())}
			set := clientSet(t, clk, rules.Downstream{Name: "passthrough:///health",
				Retry: &rules.Retry{MaxAttempts: 3, MinPerSecond: 100}})
			ci, err := UnaryClientInterceptor(ClientOptions{Set: set, Idempotent: AllMethods, Failed: tt.failed})
			if err != nil {
				t.Fatal(err)
			}
			h := &health{reply: tt.reply}
			cc := serve(t, h, nil, grpc.WithUnaryInterceptor(ci))
			err = check(cc)
			if status.Code(err) != tt.wantCode || h.count() != tt.wantCalls {
				t.Fatalf("code %v after %d calls, want %v after %d (%v)", status.Code(err), h.count(), tt.wantCode, tt.wantCalls, err)
			}
			if len(clk.waits) != len(tt.wantWaits) {
				t.Fatalf("waits %v, want %v", clk.waits, tt.wantWaits)
			}
			for i, w := range tt.wantWaits {
				if clk.waits[i] != w {
					t.Fatalf("waits %v, want %v", clk.waits, tt.wantWaits)
				}
			}
		})
	}
}

// TestAQuotaRefusalByAHandlerIsNoCongestion: a handler that refuses a caller
// over its quota with ResourceExhausted served the call (cheaply); counted as
// an overload drop, every such refusal cut the route's adaptive limit and
// shed other callers' good traffic. HTTP counts the equivalent 429 so too.
func TestAQuotaRefusalByAHandlerIsNoCongestion(t *testing.T) {
	if got := DefaultOutcome(status.Error(codes.ResourceExhausted, "quota")); got != governor.Success {
		t.Fatalf("outcome = %v, want Success", got)
	}
}

// dropRecorder is a fixed limit that records the drops it is told of.
type dropRecorder struct{ samples, drops atomic.Int64 }

func (*dropRecorder) Limit() int { return 10 }

func (d *dropRecorder) Observe(_, _ int64, _ int, dropped bool) {
	d.samples.Add(1)
	if dropped {
		d.drops.Add(1)
	}
}

// TestCallersOwnDeadlineIsNoCongestion: a call that ends DeadlineExceeded
// because the deadline its caller sent (grpc-timeout) ran out was cut short
// by the caller's choice: counted as an overload drop, a few callers with
// tight deadlines cut the route's adaptive limit for everyone. It still
// gives its latency sample (under real overload, the latency up to the
// deadlines cuts the limit). A DeadlineExceeded of the server's own (a
// timeout the handler set, the caller's deadline still ahead) stays a drop.
func TestCallersOwnDeadlineIsNoCongestion(t *testing.T) {
	lim := &dropRecorder{}
	g, err := governor.New(governor.Options{Service: "health", Clock: clock.NewFake(time.Now()),
		Defaults: &rules.Ruleset{Service: "health", Routes: []rules.Route{{
			Name: "all", Match: rules.Match{PathPrefix: "/"}, Concurrency: &rules.Concurrency{Initial: 10},
		}}},
		NewLimiter: func(rules.Concurrency, clock.Clock) (governor.Limiter, error) { return lim, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	unary := UnaryServerInterceptor(g, ServerOptions{})
	stream := StreamServerInterceptor(g, ServerOptions{})
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.S/M"}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = unary(ctx, nil, info, func(ctx context.Context, _ any) (any, error) {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("unary = %v", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer scancel()
	if err := stream(nil, deadlineStream{sctx}, &grpc.StreamServerInfo{FullMethod: "/pkg.S/W"}, func(_ any, ss grpc.ServerStream) error {
		<-ss.Context().Done()
		return ss.Context().Err()
	}); code(err) != codes.DeadlineExceeded {
		t.Fatalf("stream = %v", err)
	}
	if d, s := lim.drops.Load(), lim.samples.Load(); d != 0 || s != 1 {
		t.Fatalf("calls cut short by their callers' deadlines: %d drops, %d samples; want 0 drops, 1 sample (the unary call)", d, s)
	}

	_, _ = unary(context.Background(), nil, info, func(context.Context, any) (any, error) {
		return nil, status.Error(codes.DeadlineExceeded, "database timed out")
	})
	if d := lim.drops.Load(); d != 1 {
		t.Fatalf("a timeout of the server's own: %d drops, want 1", d)
	}
}

// deadlineStream is a server stream with the given context.
type deadlineStream struct{ ctx context.Context }

func (s deadlineStream) Context() context.Context   { return s.ctx }
func (deadlineStream) SetHeader(metadata.MD) error  { return nil }
func (deadlineStream) SendHeader(metadata.MD) error { return nil }
func (deadlineStream) SetTrailer(metadata.MD)       {}
func (deadlineStream) SendMsg(any) error            { return nil }
func (deadlineStream) RecvMsg(any) error            { return nil }
