//go:build !race

// The allocation tests: the race detector allocates, so they are built
// without it only (make test runs them in its own step, -run DoesNotAllocate).

package governor_test

import (
	"context"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
)

// TestThrottleDoesNotAllocate admits with the runtime's histogram as the
// source and a window ending before every admission, so every call reads
// runtime/metrics and adjusts the level.
func TestThrottleDoesNotAllocate(t *testing.T) {
	clk := clock.NewFake(fakeStart)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Overload.Source = governor.RuntimeSchedLatency()
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	req := governor.Request{Path: "/", Priority: "batch"}
	allocs := testing.AllocsPerRun(2000, func() {
		clk.Advance(100 * time.Millisecond)
		if p, err := g.Admit(ctx, req); err == nil {
			p.Release(time.Millisecond, governor.Success)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Admit rolling a throttle window", allocs)
	}
	// A stated deadline: the throttle samples the time left to it.
	req.Deadline = clk.Now().Add(24 * time.Hour)
	allocs = testing.AllocsPerRun(2000, func() {
		clk.Advance(10 * time.Millisecond)
		if p, err := g.Admit(ctx, req); err == nil {
			p.Release(time.Millisecond, governor.Success)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Admit of a request stating a deadline", allocs)
	}
}
