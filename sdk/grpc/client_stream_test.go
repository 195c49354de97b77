package grpcgov

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/bulkhead"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// watcher is a health server whose Watch sends sent messages, then ends
// with end (nil: the stream ends well), or waits for its client to leave
// when hang is set.
type watcher struct {
	healthpb.UnimplementedHealthServer
	sent int
	end  atomic.Value // error wrapper
	hang atomic.Bool
}

type endErr struct{ err error }

func (w *watcher) Watch(_ *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	for range w.sent {
		if err := s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
	}
	if w.hang.Load() {
		<-s.Context().Done()
		return s.Context().Err()
	}
	e, _ := w.end.Load().(endErr)
	return e.err
}

func serveWatch(t *testing.T, w *watcher, dopts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, w)
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
	return healthpb.NewHealthClient(cc)
}

// drain reads a stream to its end and returns the error that ended it.
func drain(s healthpb.Health_WatchClient) (msgs int, err error) {
	for {
		if _, err := s.Recv(); err != nil {
			return msgs, err
		}
		msgs++
	}
}

// eventually waits until cond holds: the stream's end is reported by gRPC,
// which may do so on its own goroutine just after Recv returned.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after 10s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestClientStreamFailingAfterItOpensCountsForTheBreaker: a downstream that
// accepts streams and breaks each one after a few messages (UNAVAILABLE
// mid-stream) must open the breaker; before, only the opening was counted,
// as a success, and such a downstream was never ejected.
func TestClientStreamFailingAfterItOpensCountsForTheBreaker(t *testing.T) {
	clk := clock.NewFake(time.Now())
	set := clientSet(t, clk, rules.Downstream{Name: "passthrough:///health", Breaker: &rules.Breaker{MinCalls: 3}})
	si, _ := StreamClientInterceptor(ClientOptions{Set: set})
	w := &watcher{sent: 2}
	w.end.Store(endErr{status.Error(codes.Unavailable, "going away")})
	hc := serveWatch(t, w, grpc.WithStreamInterceptor(si))
	for range 3 {
		s, err := hc.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("open = %v", err)
		}
		if n, err := drain(s); n != 2 || status.Code(err) != codes.Unavailable {
			t.Fatalf("stream gave %d messages then %v, want 2 then Unavailable", n, err)
		}
	}
	brk := set.Get("passthrough:///health").Breaker()
	eventually(t, "breaker open after 3 broken streams", func() bool { return brk.State(clk.Nanotime()) == breaker.Open })
	_, err := hc.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("stream with the breaker open = %v, want refused", err)
	}
}

// TestClientStreamHoldsItsSlotUntilItEnds: a stream counts in the bulkhead
// for its whole life, as Envoy counts an HTTP/2 stream against
// max_requests, and its outcome is reported once, when it ends: a stream
// that ends well (io.EOF) is a success, one its caller cancels is no
// outcome and gives its slot back.
func TestClientStreamHoldsItsSlotUntilItEnds(t *testing.T) {
	set := clientSet(t, clock.Real{}, rules.Downstream{Name: "passthrough:///health",
		Bulkhead: &rules.Bulkhead{MaxConcurrent: 1}, Breaker: &rules.Breaker{MinCalls: 1}})
	var judged atomic.Int32
	si, _ := StreamClientInterceptor(ClientOptions{Set: set, Failed: func(err error) bool {
		judged.Add(1)
		return DefaultFailed(err)
	}})
	w := &watcher{sent: 1}
	w.hang.Store(true)
	hc := serveWatch(t, w, grpc.WithStreamInterceptor(si))
	bh := set.Get("passthrough:///health").Bulkhead()

	ctx, cancel := context.WithCancel(context.Background())
	s, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Watch(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable || !errors.Is(err, bulkhead.ErrFull) {
		t.Fatalf("second stream while the first is open = %v, want the bulkhead's refusal", err)
	}
	cancel()
	if _, err := drain(s); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled stream = %v", err)
	}
	eventually(t, "slot given back after the caller cancelled", func() bool { return bh.InFlight() == 0 })
	if n := judged.Load(); n != 0 {
		t.Fatalf("a stream its caller cancelled was judged %d times, want never", n)
	}

	w.hang.Store(false) // streams now end well
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drain(s); err != io.EOF {
			t.Fatalf("stream ended with %v, want io.EOF", err)
		}
		cancel() // after the end: changes nothing
		eventually(t, "slot given back after io.EOF", func() bool { return bh.InFlight() == 0 })
	}
	if n := judged.Load(); n != 3 {
		t.Fatalf("3 streams that ended were judged %d times, want once each", n)
	}
	if st := set.Get("passthrough:///health").Breaker().State(clock.Real{}.Nanotime()); st != breaker.Closed {
		t.Fatalf("breaker %v after streams that ended well", st)
	}
}
