package grpcgov

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestClientPanicLeaksNoBulkheadSlot: a panic in the invoker (an interceptor
// further in) or in Options.Failed, which a recovery interceptor further out
// survives, gives back the call's bulkhead slot: before, each one kept a slot
// for good, and after MaxConcurrent of them every call was refused.
func TestClientPanicLeaksNoBulkheadSlot(t *testing.T) {
	set := clientSet(t, clock.Real{}, rules.Downstream{Name: "passthrough:///health", Bulkhead: &rules.Bulkhead{MaxConcurrent: 1}})
	failedPanics := false
	opts := ClientOptions{Set: set, Downstream: func(context.Context, string, *grpc.ClientConn) string { return "passthrough:///health" }, Failed: func(err error) bool {
		if failedPanics {
			panic("failed")
		}
		return DefaultFailed(err)
	}}
	unary, err := UnaryClientInterceptor(opts)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := StreamClientInterceptor(opts)
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	boom := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { panic("invoker") }
	// streamOK opens a stream that ends at once with OK: it runs the
	// OnFinish options as gRPC does when a stream ends.
	streamOK := func(_ context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		for _, o := range opts {
			if f, ok := o.(grpc.OnFinishCallOption); ok {
				f.OnFinish(nil)
			}
		}
		return nil, nil
	}
	streamBoom := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		panic("streamer")
	}
	cc := &grpc.ClientConn{}
	panics := func(f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		f()
	}
	for range 3 {
		panics(func() { _ = unary(context.Background(), "/pkg.S/M", nil, nil, cc, boom) })
		panics(func() { _, _ = stream(context.Background(), &grpc.StreamDesc{}, cc, "/pkg.S/M", streamBoom) })
		failedPanics = true
		panics(func() { _ = unary(context.Background(), "/pkg.S/M", nil, nil, cc, ok) })
		panics(func() { _, _ = stream(context.Background(), &grpc.StreamDesc{}, cc, "/pkg.S/M", streamOK) })
		failedPanics = false
	}
	if err := unary(context.Background(), "/pkg.S/M", nil, nil, cc, ok); err != nil {
		t.Fatalf("a call after the panics (bulkhead of 1) = %v, want admitted", err)
	}
	if _, err := stream(context.Background(), &grpc.StreamDesc{}, cc, "/pkg.S/M", streamOK); err != nil {
		t.Fatalf("a stream after the panics (bulkhead of 1) = %v, want admitted", err)
	}
}
