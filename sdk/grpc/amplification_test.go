package grpcgov

// Tests of retry-amplification containment across hops: see the package
// doc and attempt.go.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/transport"
)

// retriesSet is a client Set with three attempts per call and zero jitter,
// whose governor_sdk_retries_total can be read with retried.
func retriesSet(t *testing.T, name string) (*outbound.Set, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	set, err := outbound.New(outbound.Options{Clock: &instantClock{Fake: clock.NewFake(time.Now())}, Float64: func() float64 { return 0 }, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Apply([]rules.Downstream{{Name: name, Retry: &rules.Retry{MaxAttempts: 3, MinPerSecond: 100}}}); err != nil {
		t.Fatal(err)
	}
	return set, reg
}

// retried returns governor_sdk_retries_total for outcome.
func retried(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "governor_sdk_retries_total" {
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

// TestServerRecordsThatACallIsARetry: a call that states a previous attempt
// (gRPC's retries) or an Envoy attempt count above 1 runs with that on its
// context, for unary calls and streams alike; a malformed count makes no
// retry.
func TestServerRecordsThatACallIsARetry(t *testing.T) {
	tests := []struct {
		name   string
		md     []string
		ignore bool
		want   int
	}{
		{"first attempt", nil, false, 1},
		{"gRPC retry", []string{PreviousAttemptsKey, "2"}, false, 3},
		{"Envoy retry", []string{"x-envoy-attempt-count", "2"}, false, 2},
		{"Envoy first attempt", []string{"x-envoy-attempt-count", "1"}, false, 1},
		{"malformed", []string{PreviousAttemptsKey, "two"}, false, 1},
		{"ignored", []string{PreviousAttemptsKey, "1"}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGovernor(t, &rules.Ruleset{Service: "health"})
			var mu sync.Mutex
			var seen []int
			h := &health{reply: func(ctx context.Context, _ int) error {
				mu.Lock()
				seen = append(seen, transport.InboundAttempt(ctx))
				mu.Unlock()
				if Retried(ctx) != (tt.want > 1) {
					t.Errorf("Retried = %v", Retried(ctx))
				}
				return nil
			}}
			opts := ServerOptions{IgnoreAttempts: tt.ignore}
			cc := serve(t, h, []grpc.ServerOption{
				grpc.UnaryInterceptor(UnaryServerInterceptor(g, opts)),
				grpc.StreamInterceptor(StreamServerInterceptor(g, opts)),
			})
			ctx := context.Background()
			if tt.md != nil {
				ctx = metadata.AppendToOutgoingContext(ctx, tt.md...)
			}
			if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			if len(seen) != 1 || seen[0] != tt.want {
				t.Fatalf("unary handler saw attempt %v, want %d", seen, tt.want)
			}
			in := context.Background()
			if tt.md != nil {
				in = metadata.NewIncomingContext(in, metadata.Pairs(tt.md...))
			}
			err := StreamServerInterceptor(g, opts)(nil, deadlineStream{ctx: in}, &grpc.StreamServerInfo{FullMethod: "/pkg.S/M"},
				func(_ any, ss grpc.ServerStream) error {
					if got := transport.InboundAttempt(ss.Context()); got != tt.want {
						t.Errorf("stream handler saw attempt %d, want %d", got, tt.want)
					}
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestClientMakesOneAttemptWhileServingARetry: a call made while serving a
// retry is not retried (counted as suppressed_inbound_retry), unless
// AllowNestedRetries.
func TestClientMakesOneAttemptWhileServingARetry(t *testing.T) {
	for _, allow := range []bool{false, true} {
		set, reg := retriesSet(t, "passthrough:///health")
		ci, err := UnaryClientInterceptor(ClientOptions{Set: set, Idempotent: AllMethods, AllowNestedRetries: allow})
		if err != nil {
			t.Fatal(err)
		}
		h := &health{reply: func(context.Context, int) error { return status.Error(codes.Unavailable, "busy") }}
		cc := serve(t, h, nil, grpc.WithUnaryInterceptor(ci))
		ctx := transport.WithInboundAttempt(context.Background(), 2)
		_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		want, wantSupp := 1, 1.0
		if allow {
			want, wantSupp = 3, 0
		}
		if status.Code(err) != codes.Unavailable || h.count() != want {
			t.Fatalf("AllowNestedRetries %v: %v after %d calls, want Unavailable after %d", allow, err, h.count(), want)
		}
		if got := retried(t, reg, outbound.RetrySuppressedInboundRetry); got != wantSupp {
			t.Fatalf("AllowNestedRetries %v: suppressed_inbound_retry %v, want %v", allow, got, wantSupp)
		}
	}
}

// TestClientStatesPreviousAttemptsOnItsRetries: retries carry
// grpc-previous-rpc-attempts as gRPC's own do, and a value forwarded in the
// caller's outgoing metadata is replaced, not passed on.
func TestClientStatesPreviousAttemptsOnItsRetries(t *testing.T) {
	set, _ := retriesSet(t, "passthrough:///health")
	ci, err := UnaryClientInterceptor(ClientOptions{Set: set, Idempotent: AllMethods})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen [][]string
	h := &health{reply: func(ctx context.Context, _ int) error {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-other"); len(v) != 1 || v[0] != "kept" {
			t.Errorf("x-other %q, want the caller's metadata kept", v)
		}
		mu.Lock()
		seen = append(seen, md.Get(PreviousAttemptsKey))
		mu.Unlock()
		return status.Error(codes.Unavailable, "busy")
	}}
	cc := serve(t, h, nil, grpc.WithUnaryInterceptor(ci))
	// A proxy forwarding its own inbound metadata: each hop states its own
	// count.
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(PreviousAttemptsKey, "7", "x-other", "kept"))
	_, _ = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	want := [][]string{nil, {"1"}, {"2"}}
	if len(seen) != len(want) {
		t.Fatalf("server saw %q, want %q", seen, want)
	}
	for i := range want {
		if len(seen[i]) != len(want[i]) || (len(want[i]) > 0 && seen[i][0] != want[i][0]) {
			t.Fatalf("server saw %q, want %q", seen, want)
		}
	}
}

// TestForwardedAttemptMetadataIsNotSent: a handler that forwards its
// inbound metadata on its own calls (metadata propagation) must not pass
// its caller's attempt counts on: the downstream would take a first attempt
// for a retry and make one attempt where it should retry. Each call states
// its own count, for unary calls and streams alike.
func TestForwardedAttemptMetadataIsNotSent(t *testing.T) {
	var mu sync.Mutex
	var got []string
	record := func(ctx context.Context) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, strings.Join(md.Get(PreviousAttemptsKey), "|")+"/"+strings.Join(md.Get(envoyAttemptKey), "|"))
	}
	h := &health{reply: func(_ context.Context, n int) error {
		if n < 3 {
			return status.Error(codes.Unavailable, "busy")
		}
		return nil
	}}
	set, _ := retriesSet(t, "passthrough:///health")
	ci, _ := UnaryClientInterceptor(ClientOptions{Set: set, Idempotent: AllMethods})
	si, _ := StreamClientInterceptor(ClientOptions{Set: set, Idempotent: AllMethods})
	cc := serve(t, h, []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			record(ctx)
			return handler(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			record(ss.Context())
			return handler(srv, ss)
		}),
	}, grpc.WithUnaryInterceptor(ci), grpc.WithStreamInterceptor(si))
	// What a proxy forwards when it serves Envoy's third attempt of a call
	// that gRPC had retried twice.
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(PreviousAttemptsKey, "2", envoyAttemptKey, "3", "x-other", "kept"))
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	s, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Recv = %v, want the server's Unimplemented", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "/,1/,2/,/"; strings.Join(got, ",") != want {
		t.Fatalf("previous/envoy attempts sent %q, want %q (three attempts of the call, then the stream)", strings.Join(got, ","), want)
	}
	if md, _ := metadata.FromOutgoingContext(ctx); md.Get("x-other")[0] != "kept" || md.Get(envoyAttemptKey)[0] != "3" {
		t.Fatalf("the caller's metadata was modified: %v", md)
	}
}

// TestRetriesDoNotMultiplyAcrossHops: A -> B -> C, each client retrying up
// to three attempts, C always Unavailable. B's calls made while serving A's
// retries get one attempt each: C sees 3 + 1 + 1 calls, not 9.
func TestRetriesDoNotMultiplyAcrossHops(t *testing.T) {
	c := &health{reply: func(context.Context, int) error { return status.Error(codes.Unavailable, "down") }}
	setB, _ := retriesSet(t, "passthrough:///health")
	ciB, _ := UnaryClientInterceptor(ClientOptions{Set: setB, Idempotent: AllMethods})
	ccC := serve(t, c, nil, grpc.WithUnaryInterceptor(ciB))
	b := &health{reply: func(ctx context.Context, _ int) error {
		_, err := healthpb.NewHealthClient(ccC).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}}
	g := newGovernor(t, &rules.Ruleset{Service: "b"})
	setA, _ := retriesSet(t, "passthrough:///health")
	ciA, _ := UnaryClientInterceptor(ClientOptions{Set: setA, Idempotent: AllMethods})
	ccB := serve(t, b, []grpc.ServerOption{grpc.UnaryInterceptor(UnaryServerInterceptor(g, ServerOptions{}))}, grpc.WithUnaryInterceptor(ciA))
	if err := check(ccB); status.Code(err) != codes.Unavailable {
		t.Fatalf("A's call = %v, want Unavailable", err)
	}
	if b.count() != 3 || c.count() != 5 {
		t.Fatalf("B served %d calls, C %d; want 3 and 5", b.count(), c.count())
	}
}

// TestServerAnswersItsOverloadWithDoNotRetry: a shed says "overloaded;
// don't retry" (a negative pushback), which gRPC's retries and the client
// interceptor honour; a rate limit keeps its Retry-After as the pushback
// (TestServerMapsRejections).
func TestServerAnswersItsOverloadWithDoNotRetry(t *testing.T) {
	g := newGovernor(t, &rules.Ruleset{Service: "health", Routes: []rules.Route{{
		Name: "check", Match: rules.Match{PathPrefix: "/grpc.health.v1.Health/"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 1},
	}}})
	entered, release := make(chan struct{}), make(chan struct{})
	h := &health{reply: func(_ context.Context, n int) error {
		if n == 1 {
			close(entered)
			<-release
		}
		return nil
	}}
	set, reg := retriesSet(t, "passthrough:///health")
	ci, _ := UnaryClientInterceptor(ClientOptions{Set: set, Idempotent: AllMethods})
	cc := serve(t, h, []grpc.ServerOption{grpc.UnaryInterceptor(UnaryServerInterceptor(g, ServerOptions{}))}, grpc.WithUnaryInterceptor(ci))
	first := make(chan error, 1)
	go func() { first <- check(cc) }()
	<-entered
	var trailer metadata.MD
	_, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	close(release)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the concurrency limit = %v, want ResourceExhausted", err)
	}
	if v := trailer.Get(PushbackKey); len(v) != 1 || v[0] != "-1" {
		t.Fatalf("pushback %q, want -1", v)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if h.count() != 1 {
		t.Fatalf("handler ran %d times", h.count())
	}
	if got := retried(t, reg, outbound.RetrySuppressedOverloaded); got != 1 {
		t.Fatalf("suppressed_overloaded %v, want 1", got)
	}
}

func FuzzInboundAttempt(f *testing.F) {
	for _, v := range []string{"", "0", "1", "2", "999999", "1000000", "-1", "x", " 1"} {
		f.Add(v, v)
	}
	f.Fuzz(func(t *testing.T, prev, envoy string) {
		md := metadata.MD{}
		if prev != "" {
			md[PreviousAttemptsKey] = []string{prev}
		}
		if envoy != "" {
			md[envoyAttemptKey] = []string{envoy}
		}
		n := inboundAttempt(md)
		if n < 1 || n > 1000000 {
			t.Fatalf("inboundAttempt(%q, %q) = %d", prev, envoy, n)
		}
		if p, err := transport.ParseAttempt(prev); err == nil && n < p+1 {
			t.Fatalf("inboundAttempt(%q, %q) = %d, want at least %d", prev, envoy, n, p+1)
		}
	})
}
