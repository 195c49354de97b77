package grpcgov

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	governor "governor.dev/governor/sdk"

	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

// BenchmarkStreamClientInterceptor opens and ends a stream through the
// interceptor with a streamer that does what grpc does at the end of a
// stream (runs the grpc.OnFinish call options).
func BenchmarkStreamClientInterceptor(b *testing.B) {
	set, err := outbound.New(outbound.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := set.Apply([]rules.Downstream{{Name: "d", Bulkhead: &rules.Bulkhead{MaxConcurrent: 1 << 20}, Breaker: &rules.Breaker{}}}); err != nil {
		b.Fatal(err)
	}
	si, err := StreamClientInterceptor(ClientOptions{Set: set, Downstream: func(context.Context, string, *grpc.ClientConn) string { return "d" }})
	if err != nil {
		b.Fatal(err)
	}
	desc := &grpc.StreamDesc{ServerStreams: true}
	cc := &grpc.ClientConn{}
	streamer := func(_ context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		for _, o := range opts {
			if f, ok := o.(grpc.OnFinishCallOption); ok {
				f.OnFinish(nil)
			}
		}
		return nil, nil
	}
	opts := []grpc.CallOption{grpc.WaitForReady(true)}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := si(ctx, desc, cc, "/pkg.S/M", streamer, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkUnaryClientInterceptor makes a unary call through the
// interceptor, without retries, with an invoker that answers at once.
func BenchmarkUnaryClientInterceptor(b *testing.B) {
	set, err := outbound.New(outbound.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := set.Apply([]rules.Downstream{{Name: "d", Bulkhead: &rules.Bulkhead{MaxConcurrent: 1 << 20}, Breaker: &rules.Breaker{}}}); err != nil {
		b.Fatal(err)
	}
	ci, err := UnaryClientInterceptor(ClientOptions{Set: set, Downstream: func(context.Context, string, *grpc.ClientConn) string { return "d" }})
	if err != nil {
		b.Fatal(err)
	}
	cc := &grpc.ClientConn{}
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := ci(ctx, "/pkg.S/M", nil, nil, cc, invoker); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkUnaryServerInterceptor admits and releases a first attempt (its
// metadata states no previous attempts) through the interceptor.
func BenchmarkUnaryServerInterceptor(b *testing.B) {
	g, err := governor.New(governor.Options{Service: "s", Defaults: governor.DefaultRuleset("s")})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	si := UnaryServerInterceptor(g, ServerOptions{})
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.S/M"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("user-agent", "bench"))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := si(ctx, nil, info, handler); err != nil {
				b.Fatal(err)
			}
		}
	})
}
