package grpcgov

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// sampleCounter is a limiter with a fixed limit that counts its samples.
type sampleCounter struct{ samples atomic.Int64 }

func (*sampleCounter) Limit() int { return 10 }

func (s *sampleCounter) Observe(now, rtt int64, inflight int, dropped bool) { s.samples.Add(1) }

// TestStreamLifeIsNoLatencySample: a watch stream open for ten minutes gives
// its slot back when it ends but is no latency sample of the route (one
// would be read as a ten-minute latency and cut the limit of the unary calls
// beside it); a unary call is one.
func TestStreamLifeIsNoLatencySample(t *testing.T) {
	clk := clock.NewFake(time.Now())
	var lims []*sampleCounter
	g, err := governor.New(governor.Options{Service: "health", Clock: clk,
		Defaults: &rules.Ruleset{Service: "health", Routes: []rules.Route{{
			Name: "all", Match: rules.Match{PathPrefix: "/"},
			Concurrency: &rules.Concurrency{Initial: 10},
		}}},
		NewLimiter: func(rules.Concurrency, clock.Clock) (governor.Limiter, error) {
			l := &sampleCounter{}
			lims = append(lims, l)
			return l, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	opts := ServerOptions{Clock: clk}
	stream := StreamServerInterceptor(g, opts)
	unary := UnaryServerInterceptor(g, opts)
	for _, panics := range []bool{false, true} {
		func() {
			defer func() { _ = recover() }()
			_ = stream(nil, fakeStream{}, &grpc.StreamServerInfo{FullMethod: "/pkg.S/Watch"},
				func(any, grpc.ServerStream) error {
					clk.Advance(10 * time.Minute)
					if panics {
						panic("boom")
					}
					return nil
				})
		}()
	}
	if n := g.InFlight("all"); n != 0 {
		t.Fatalf("in flight after the streams ended = %d, want 0", n)
	}
	l := lims[len(lims)-1]
	if n := l.samples.Load(); n != 0 {
		t.Fatalf("the streams gave %d latency samples, want none", n)
	}
	if _, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.S/Get"},
		func(context.Context, any) (any, error) { clk.Advance(time.Millisecond); return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if n := l.samples.Load(); n != 1 {
		t.Fatalf("a unary call gave %d samples, want 1", n)
	}
}
