package grpcgov

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/bulkhead"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

// health is a scripted health service: Check answers from reply.
type health struct {
	healthpb.UnimplementedHealthServer
	mu    sync.Mutex
	calls int
	reply func(ctx context.Context, n int) error
}

func (h *health) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.mu.Unlock()
	if err := h.reply(ctx, n); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *health) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// instantClock is a fake clock whose timers fire at once, advancing the
// clock by their duration and recording it: retries wait in virtual time.
type instantClock struct {
	*clock.Fake
	mu    sync.Mutex
	waits []time.Duration
}

func (c *instantClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	c.Advance(d)
	return c.Fake.NewTimer(0)
}

// serve starts an in-process server on a bufconn and returns a client
// connection with the given interceptors.
func serve(t *testing.T, h *health, sopts []grpc.ServerOption, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(sopts...)
	healthpb.RegisterHealthServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	dopts = append(dopts,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	cc, err := grpc.NewClient("passthrough:///health", dopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func clientSet(t *testing.T, clk clock.Clock, ds ...rules.Downstream) *outbound.Set {
	t.Helper()
	set, err := outbound.New(outbound.Options{Clock: clk, Float64: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Apply(ds); err != nil {
		t.Fatal(err)
	}
	return set
}

func check(cc *grpc.ClientConn) error {
	_, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	return err
}

func withPushback(ctx context.Context, ms string) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, ms))
}

func TestClientRetries(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "busy")
	tests := []struct {
		name       string
		idempotent func(string) bool
		reply      func(ctx context.Context, n int) error
		wantCalls  int
		wantCode   codes.Code
		wantWaits  []time.Duration
	}{
		{"retried until success", AllMethods, func(_ context.Context, n int) error {
			if n < 3 {
				return unavailable
			}
			return nil
		}, 3, codes.OK, nil}, // zero jitter: no wait
		{"no retries without Idempotent", nil, func(context.Context, int) error { return unavailable }, 1, codes.Unavailable, nil},
		{"only the listed methods", func(m string) bool { return m == "/other/Method" },
			func(context.Context, int) error { return unavailable }, 1, codes.Unavailable, nil},
		{"client errors are not retried", AllMethods, func(context.Context, int) error {
			return status.Error(codes.InvalidArgument, "bad")
		}, 1, codes.InvalidArgument, nil},
		{"pushback is honoured", AllMethods, func(ctx context.Context, n int) error {
			if n == 1 {
				withPushback(ctx, "300")
				return unavailable
			}
			return nil
		}, 2, codes.OK, []time.Duration{300 * time.Millisecond}},
		{"negative pushback stops retries", AllMethods, func(ctx context.Context, _ int) error {
			withPushback(ctx, "-1")
			return unavailable
		}, 1, codes.Unavailable, nil},
		{"attempts run out", AllMethods, func(context.Context, int) error { return unavailable }, 3, codes.Unavailable, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &instantClock{Fake: clock.NewFake(time.Now())}
			set := clientSet(t, clk, rules.Downstream{Name: "passthrough:///health",
				Retry: &rules.Retry{MaxAttempts: 3, MinPerSecond: 100}})
			ci, err := UnaryClientInterceptor(ClientOptions{Set: set, Idempotent: tt.idempotent})
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

func TestClientBreakerRefusesAsUnavailable(t *testing.T) {
	clk := clock.NewFake(time.Now())
	set := clientSet(t, clk, rules.Downstream{Name: "passthrough:///health", Breaker: &rules.Breaker{MinCalls: 3}})
	ci, _ := UnaryClientInterceptor(ClientOptions{Set: set})
	si, _ := StreamClientInterceptor(ClientOptions{Set: set})
	h := &health{reply: func(context.Context, int) error { return status.Error(codes.Internal, "boom") }}
	cc := serve(t, h, nil, grpc.WithUnaryInterceptor(ci), grpc.WithStreamInterceptor(si))
	for range 3 {
		if err := check(cc); status.Code(err) != codes.Internal {
			t.Fatalf("call = %v", err)
		}
	}
	err := check(cc)
	var refused *RefusedError
	if status.Code(err) != codes.Unavailable || !errors.Is(err, breaker.ErrOpen) || !errors.As(err, &refused) {
		t.Fatalf("call with the breaker open = %v, want Unavailable wrapping breaker.ErrOpen", err)
	}
	if h.count() != 3 {
		t.Fatalf("the server saw %d calls", h.count())
	}
	_, err = healthpb.NewHealthClient(cc).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("stream with the breaker open = %v", err)
	}

	// A fallback answers refused calls instead.
	fi, _ := UnaryClientInterceptor(ClientOptions{Set: set, Fallback: func(_ context.Context, _ string, _, reply any, err error) error {
		if !errors.Is(err, breaker.ErrOpen) {
			return err
		}
		reply.(*healthpb.HealthCheckResponse).Status = healthpb.HealthCheckResponse_NOT_SERVING
		return nil
	}})
	fc := serve(t, h, nil, grpc.WithUnaryInterceptor(fi))
	resp, err := healthpb.NewHealthClient(fc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("fallback: %v %v", resp, err)
	}
}

// TestClientCallerCancellationDecidesNoProbe: the downstream was failing and
// its breaker (one half-open probe) is open; the open period ends and the
// probe is a call whose caller cancels it while the server works on it, so
// it fails with codes.Canceled. Before, the interceptor reported it as a
// success (DefaultFailed says Canceled is no failure) and closed the breaker
// on no evidence. A call cancelled by its own caller must decide nothing and
// give its probe slot back, for unary calls and for streams, so the next
// call probes at once.
func TestClientCallerCancellationDecidesNoProbe(t *testing.T) {
	clk := clock.NewFake(time.Now())
	set := clientSet(t, clk, rules.Downstream{Name: "passthrough:///health",
		Breaker: &rules.Breaker{MinCalls: 3, OpenBase: rules.Duration(time.Second), HalfOpenProbes: 1}})
	ci, _ := UnaryClientInterceptor(ClientOptions{Set: set})
	si, _ := StreamClientInterceptor(ClientOptions{Set: set})
	const (
		failing = iota
		hanging // until the caller cancels
		healthy
	)
	var mode atomic.Int32
	started := make(chan struct{}, 1)
	h := &health{reply: func(ctx context.Context, _ int) error {
		switch mode.Load() {
		case failing:
			return status.Error(codes.Internal, "boom")
		case hanging:
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	cc := serve(t, h, nil, grpc.WithUnaryInterceptor(ci), grpc.WithStreamInterceptor(si))
	for range 3 {
		if err := check(cc); status.Code(err) != codes.Internal {
			t.Fatalf("call = %v", err)
		}
	}
	brk := set.Get("passthrough:///health").Breaker()
	if st := brk.State(clk.Nanotime()); st != breaker.Open {
		t.Fatalf("breaker %v after failures, want open", st)
	}
	clk.Advance(time.Second) // the open period is over
	mode.Store(hanging)
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-started; cancel() }()
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		if status.Code(err) != codes.Canceled {
			t.Fatalf("cancelled call = %v, want Canceled", err)
		}
		if st := brk.State(clk.Nanotime()); st != breaker.HalfOpen {
			t.Fatalf("breaker %v after a cancelled probe, want half-open", st)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a stream whose caller has gone before it is established
	if _, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled stream = %v, want Canceled", err)
	}
	if st := brk.State(clk.Nanotime()); st != breaker.HalfOpen {
		t.Fatalf("breaker %v after a cancelled stream probe, want half-open", st)
	}
	mode.Store(healthy)
	if err := check(cc); err != nil {
		t.Fatalf("call after cancelled probes = %v, want a probe", err)
	}
	if st := brk.State(clk.Nanotime()); st != breaker.Closed {
		t.Fatalf("breaker %v after a successful probe, want closed", st)
	}
}

// hanging is a health server whose Check and Watch wait for their client to
// leave, saying on started when they have begun.
type hanging struct {
	healthpb.UnimplementedHealthServer
	started chan struct{}
}

func (h *hanging) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hanging) Watch(_ *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	h.started <- struct{}{}
	<-s.Context().Done()
	return s.Context().Err()
}

// downstreamCalls returns governor_sdk_downstream_calls_total for outcome.
func downstreamCalls(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "governor_sdk_downstream_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestClientConnClosedIsNoOutcome: calls and streams cut short because the
// service closed its own ClientConn (codes.Canceled, "the client connection
// is closing") while their callers still wait, and calls made on it after,
// say nothing of the downstream: they count neither as successes nor as
// failures, give no latency sample and give their bulkhead slots back.
// Before, DefaultFailed judged the Canceled as no failure and each counted
// as a success.
func TestClientConnClosedIsNoOutcome(t *testing.T) {
	reg := prometheus.NewRegistry()
	set, err := outbound.New(outbound.Options{Clock: clock.NewFake(time.Now()), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Apply([]rules.Downstream{{Name: "passthrough:///health",
		Bulkhead: &rules.Bulkhead{MaxConcurrent: 10}, Breaker: &rules.Breaker{MinCalls: 1}}}); err != nil {
		t.Fatal(err)
	}
	var judged atomic.Int32
	opts := ClientOptions{Set: set, Failed: func(err error) bool {
		judged.Add(1)
		return DefaultFailed(err)
	}}
	ci, _ := UnaryClientInterceptor(opts)
	si, _ := StreamClientInterceptor(opts)

	h := &hanging{started: make(chan struct{}, 2)}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///health",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(ci), grpc.WithStreamInterceptor(si))
	if err != nil {
		t.Fatal(err)
	}
	hc := healthpb.NewHealthClient(cc)

	s, err := hc.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	<-h.started
	unary := make(chan error, 1)
	go func() {
		_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		unary <- err
	}()
	<-h.started
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-unary; status.Code(err) != codes.Canceled {
		t.Errorf("call in flight when the ClientConn closed = %v, want Canceled", err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("stream open when the ClientConn closed = %v, want Canceled", err)
	}
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Canceled {
		t.Errorf("call on a closed ClientConn = %v, want Canceled", err)
	}
	if _, err := hc.Watch(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Canceled {
		t.Errorf("stream on a closed ClientConn = %v, want Canceled", err)
	}
	bh := set.Get("passthrough:///health").Bulkhead()
	eventually(t, "slots given back", func() bool { return bh.InFlight() == 0 })
	if n := judged.Load(); n != 0 {
		t.Errorf("Failed judged %d calls ended by the ClientConn's close, want none", n)
	}
	for _, o := range []string{outbound.OutcomeSuccess, outbound.OutcomeError} {
		if n := downstreamCalls(t, reg, o); n != 0 {
			t.Errorf("%v calls counted as %s, want 0", n, o)
		}
	}
}

func TestStreamClientPassesThrough(t *testing.T) {
	set := clientSet(t, clock.Real{}, rules.Downstream{Name: "passthrough:///health", Bulkhead: &rules.Bulkhead{MaxConcurrent: 1}})
	si, _ := StreamClientInterceptor(ClientOptions{Set: set})
	h := &health{reply: func(context.Context, int) error { return nil }}
	cc := serve(t, h, nil, grpc.WithStreamInterceptor(si))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Recv = %v, want the server's Unimplemented", err)
	}
	if _, err := UnaryClientInterceptor(ClientOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("no Set = %v", err)
	}
	if _, err := StreamClientInterceptor(ClientOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("no Set = %v", err)
	}
}

func newGovernor(t *testing.T, rs *rules.Ruleset) *governor.Governor {
	t.Helper()
	g, err := governor.New(governor.Options{Service: rs.Service, Clock: clock.NewFake(time.Now()), Defaults: rs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

func TestServerMapsRejections(t *testing.T) {
	g := newGovernor(t, &rules.Ruleset{Service: "health", Routes: []rules.Route{{
		Name: "check", Match: rules.Match{PathPrefix: "/grpc.health.v1.Health/"},
		RateLimit: &rules.RateLimit{Rate: 1, Burst: 2},
	}}})
	h := &health{reply: func(context.Context, int) error { return nil }}
	cc := serve(t, h, []grpc.ServerOption{
		grpc.UnaryInterceptor(UnaryServerInterceptor(g, ServerOptions{})),
		grpc.StreamInterceptor(StreamServerInterceptor(g, ServerOptions{})),
	})
	for range 2 {
		if err := check(cc); err != nil {
			t.Fatalf("within the burst: %v", err)
		}
	}
	var trailer metadata.MD
	_, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the rate limit = %v, want ResourceExhausted", err)
	}
	v := trailer.Get(PushbackKey)
	if len(v) != 1 {
		t.Fatalf("trailer %v: want a pushback", trailer)
	}
	if ms, err := strconv.Atoi(v[0]); err != nil || ms < 1000 {
		t.Fatalf("pushback %q, want at least 1000ms", v[0])
	}
	if h.count() != 2 {
		t.Fatalf("the handler ran %d times", h.count())
	}
	s, err := healthpb.NewHealthClient(cc).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("stream over the rate limit = %v", err)
	}
	if v := s.Trailer().Get(PushbackKey); len(v) != 1 {
		t.Fatalf("stream trailer %v: want a pushback", s.Trailer())
	}
}

// A panicking handler is usually recovered by a recovery interceptor further
// out (go-grpc-middleware's recovery). Its permit must still be released and
// the panic must go on to that interceptor: otherwise every panic keeps a slot
// of the route's concurrency limit until the route admits nothing.
func TestServerInterceptorsReleaseWhenHandlerPanics(t *testing.T) {
	g := newGovernor(t, &rules.Ruleset{Service: "health", Routes: []rules.Route{{
		Name: "check", Match: rules.Match{PathPrefix: "/"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 1},
	}}})
	unary := UnaryServerInterceptor(g, ServerOptions{})
	stream := StreamServerInterceptor(g, ServerOptions{})
	calls := []struct {
		name string
		call func(panics bool) error
	}{
		{"unary", func(panics bool) error {
			_, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.S/M"},
				func(context.Context, any) (any, error) {
					if panics {
						panic("boom")
					}
					return nil, nil
				})
			return err
		}},
		{"stream", func(panics bool) error {
			return stream(nil, fakeStream{}, &grpc.StreamServerInfo{FullMethod: "/pkg.S/M"},
				func(any, grpc.ServerStream) error {
					if panics {
						panic("boom")
					}
					return nil
				})
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			for range 3 {
				func() {
					defer func() {
						if p := recover(); p != "boom" {
							t.Fatalf("recovered %v, want the handler's panic", p)
						}
					}()
					_ = c.call(true)
				}()
				if n := g.InFlight("check"); n != 0 {
					t.Fatalf("in flight after a panicking handler = %d, want 0", n)
				}
			}
			if err := c.call(false); err != nil {
				t.Fatalf("a call after the panics (limit 1) = %v, want admitted", err)
			}
		})
	}
}

// fakeStream is a server stream with a background context.
type fakeStream struct{ grpc.ServerStream }

func (fakeStream) Context() context.Context { return context.Background() }

func TestServerMapsOutboundRefusalsToUnavailable(t *testing.T) {
	g := newGovernor(t, governor.DefaultRuleset("health"))
	refusals := []error{
		&outbound.RejectedError{Downstream: "db", Reason: breaker.ErrOpen},
		&outbound.RejectedError{Downstream: "db", Reason: bulkhead.ErrFull},
		&RefusedError{Rejected: &outbound.RejectedError{Downstream: "db", Reason: breaker.ErrOpen}},
	}
	for _, refusal := range refusals {
		h := &health{reply: func(context.Context, int) error { return refusal }}
		cc := serve(t, h, []grpc.ServerOption{grpc.UnaryInterceptor(UnaryServerInterceptor(g, ServerOptions{}))})
		if err := check(cc); status.Code(err) != codes.Unavailable {
			t.Fatalf("handler returning %v: client got %v, want Unavailable", refusal, err)
		}
	}
}

func TestStatusAndOutcome(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		code    codes.Code
		outcome governor.Outcome
	}{
		{"nil", nil, codes.OK, governor.Success},
		{"shed", &governor.Rejection{Reason: governor.ReasonShed}, codes.ResourceExhausted, governor.Success},
		{"rate limited", &governor.Rejection{Reason: governor.ReasonRateLimited}, codes.ResourceExhausted, governor.Success},
		{"breaker rejection", &governor.Rejection{Reason: governor.ReasonBreakerOpen}, codes.Unavailable, governor.Dropped},
		{"breaker sentinel", governor.ErrBreakerOpen, codes.Unavailable, governor.Dropped},
		{"internal", status.Error(codes.Internal, "x"), codes.Internal, governor.Failure},
		{"not found", status.Error(codes.NotFound, "x"), codes.NotFound, governor.Success},
		{"deadline", status.Error(codes.DeadlineExceeded, "x"), codes.DeadlineExceeded, governor.Dropped},
		{"plain error", errors.New("x"), codes.Unknown, governor.Failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(Status(tt.err)); got != tt.code {
				t.Fatalf("Status code = %v, want %v", got, tt.code)
			}
			if got := DefaultOutcome(Status(tt.err)); got != tt.outcome {
				t.Fatalf("outcome = %v, want %v", got, tt.outcome)
			}
		})
	}
}

// A handler that returns its context's error as it is reaches the client as
// the code gRPC sends for it: a client that went away as Canceled, a deadline
// as DeadlineExceeded. The outcome must follow that code: before, both were
// Unknown, a failure, so every client that left counted as a server error.
func TestOutcomeOfAPlainContextErrorFollowsItsCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want governor.Outcome
	}{
		{"client went away", context.Canceled, governor.Success},
		{"wrapped", fmt.Errorf("query: %w", context.Canceled), governor.Success},
		{"deadline", context.DeadlineExceeded, governor.Dropped},
		{"canceled status", status.Error(codes.Canceled, "x"), governor.Success},
		{"plain error", errors.New("x"), governor.Failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultOutcome(Status(tt.err)); got != tt.want {
				t.Fatalf("outcome = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParsePushback(t *testing.T) {
	tests := []struct {
		in       string
		d        time.Duration
		ok, stop bool
	}{
		{"250", 250 * time.Millisecond, true, false},
		{" 0 ", 0, true, false},
		{"-1", 0, false, true},
		{"-99999999999999999999999", 0, false, true},
		{"99999999999999999999999", maxPushback, true, false},
		{"86400001", maxPushback, true, false},
		{"", 0, false, false},
		{"soon", 0, false, false},
		{"1.5", 0, false, false},
		{"-", 0, false, false},
	}
	for _, tt := range tests {
		d, ok, stop := ParsePushback(tt.in)
		if d != tt.d || ok != tt.ok || stop != tt.stop {
			t.Errorf("ParsePushback(%q) = %v %v %v, want %v %v %v", tt.in, d, ok, stop, tt.d, tt.ok, tt.stop)
		}
	}
}

func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"0", "250", "-1", "", "x", "99999999999999999999", "-0", "+5", " 7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok, stop := ParsePushback(s)
		if d < 0 || d > maxPushback {
			t.Fatalf("ParsePushback(%q) = %v out of range", s, d)
		}
		if ok && stop {
			t.Fatalf("ParsePushback(%q) both allows and stops", s)
		}
		if !ok && d != 0 {
			t.Fatalf("ParsePushback(%q) = %v without ok", s, d)
		}
	})
}

func TestClientBulkheadRefusesAsUnavailable(t *testing.T) {
	set := clientSet(t, clock.Real{}, rules.Downstream{Name: "passthrough:///health", Bulkhead: &rules.Bulkhead{MaxConcurrent: 1}})
	ci, _ := UnaryClientInterceptor(ClientOptions{Set: set})
	entered, release := make(chan struct{}), make(chan struct{})
	h := &health{reply: func(_ context.Context, n int) error {
		if n == 1 {
			close(entered)
			<-release
		}
		return nil
	}}
	cc := serve(t, h, nil, grpc.WithUnaryInterceptor(ci))
	done := make(chan error, 1)
	go func() { done <- check(cc) }()
	<-entered
	err := check(cc)
	if status.Code(err) != codes.Unavailable || !errors.Is(err, bulkhead.ErrFull) {
		t.Fatalf("second call = %v, want Unavailable wrapping bulkhead.ErrFull", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("first call = %v", err)
	}
	if err := check(cc); err != nil {
		t.Fatalf("call after the slot was freed = %v", err)
	}
}

// rttLimiter is a fixed limit whose last window's latency is set.
type rttLimiter struct{ rtt time.Duration }

func (rttLimiter) Limit() int                      { return 10 }
func (rttLimiter) Observe(int64, int64, int, bool) {}
func (l rttLimiter) Snapshot() limit.Snapshot      { return limit.Snapshot{Limit: 10, SampleRTT: l.rtt} }

func TestServerRefusesCallsThatCannotMeetTheirDeadline(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		opts := governor.Options{Service: "health", Clock: clock.NewFake(time.Now()), Defaults: &rules.Ruleset{Service: "health", Routes: []rules.Route{{
			Name: "check", Match: rules.Match{PathPrefix: "/"}, Concurrency: &rules.Concurrency{},
		}}}, NewLimiter: func(rules.Concurrency, clock.Clock) (governor.Limiter, error) {
			return rttLimiter{rtt: time.Hour}, nil
		}}
		g, err := governor.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		// One call in flight: an idle route would admit any call to
		// re-measure its latency.
		hold, err := g.Admit(context.Background(), governor.Request{Path: "/hold"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hold.Release(time.Millisecond, governor.Success) })
		var sawDeadline bool
		h := &health{reply: func(ctx context.Context, _ int) error {
			_, sawDeadline = ctx.Deadline()
			return nil
		}}
		cc := serve(t, h, []grpc.ServerOption{grpc.UnaryInterceptor(UnaryServerInterceptor(g, ServerOptions{IgnoreDeadlines: ignore}))})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if ignore {
			if err != nil || h.count() != 1 || !sawDeadline {
				t.Fatalf("IgnoreDeadlines: err %v, handler ran %d times, deadline on its context %v", err, h.count(), sawDeadline)
			}
			continue
		}
		if s := status.Convert(err); s.Code() != codes.DeadlineExceeded || s.Message() != "governor: deadline; retry later" {
			t.Fatalf("30s left on a route whose calls take 1h: %v; want the governor's DeadlineExceeded", err)
		}
		if h.count() != 0 {
			t.Fatal("the handler ran")
		}
		if err := check(cc); err != nil || h.count() != 1 {
			t.Fatalf("a call without a deadline: %v (handler ran %d times)", err, h.count())
		}
	}
}
