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

// panickyLimiter is a fixed limit whose Observe panics while armed.
type panickyLimiter struct{ armed atomic.Bool }

func (*panickyLimiter) Limit() int { return 10 }

func (l *panickyLimiter) Observe(int64, int64, int, bool) {
	if l.armed.Load() {
		panic("observe")
	}
}

// TestServerReleasesOnceWhenReleaseItselfPanics: a panic while the permit
// is being released (a custom limiter, a hook) must not release it a second
// time: before, the deferred panic guard released it again, the route's
// in-flight count went below zero and its concurrency limit was raised by
// one for good with each such panic.
func TestServerReleasesOnceWhenReleaseItselfPanics(t *testing.T) {
	lim := &panickyLimiter{}
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
	lim.armed.Store(true)
	func() {
		defer func() {
			if p := recover(); p != "observe" {
				t.Fatalf("recovered %v, want the limiter's panic", p)
			}
		}()
		_, _ = unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/pkg.S/M"},
			func(context.Context, any) (any, error) { return nil, nil })
	}()
	if n := g.InFlight("all"); n != 0 {
		t.Fatalf("in flight after a release that panicked = %d, want 0", n)
	}
}
