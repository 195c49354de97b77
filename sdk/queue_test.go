package governor_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/rules"
)

type admitResult struct {
	p   governor.Permit
	err error
}

// until yields until cond holds, failing the test if it never does.
func until(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 1_000_000; i++ {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("condition never held")
}

func TestQueueHandsReleasedSlotsToWaiters(t *testing.T) {
	r := concRoute(1, 0)
	r.Queue = &rules.Queue{MaxLength: 1}
	f := newFixture(t, 2, ruleset(r))
	ctx := context.Background()
	a, err := f.g.Admit(ctx, governor.Request{Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan admitResult, 1)
	go func() {
		p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "batch"})
		queued <- admitResult{p, err}
	}()
	until(t, func() bool { return f.clk.Pending() == 1 }) // waiting with its timer set
	// The queue holds one request: the next is shed at once.
	if _, err := f.g.Admit(ctx, governor.Request{Path: "/"}); !errors.Is(err, governor.ErrShed) {
		t.Fatalf("with the queue full: %v, want ErrShed", err)
	}
	f.clk.Advance(3 * time.Millisecond)
	a.Release(10*time.Millisecond, governor.Success)
	b := <-queued
	if b.err != nil || !b.p.Admitted() {
		t.Fatalf("queued request: %v, want admitted when the slot was released", b.err)
	}
	if f.g.InFlight("api") != 1 {
		t.Fatalf("in flight %d, want 1", f.g.InFlight("api"))
	}

	// Nobody releases: the waiter leaves after the interval, never started.
	go func() {
		p, err := f.g.Admit(ctx, governor.Request{Path: "/"})
		queued <- admitResult{p, err}
	}()
	until(t, func() bool { return f.clk.Pending() == 1 })
	f.clk.Advance(100 * time.Millisecond)
	c := <-queued
	var rej *governor.Rejection
	if !errors.As(c.err, &rej) || rej.Reason != governor.ReasonQueueTimeout {
		t.Fatalf("unserved waiter: %v, want a queue timeout", c.err)
	}
	b.p.Release(time.Millisecond, governor.Success)
	if f.g.InFlight("api") != 0 {
		t.Fatalf("in flight %d at the end, want 0", f.g.InFlight("api"))
	}
}

func TestQueuedRequestPastItsDeadlineNeverStarts(t *testing.T) {
	r := concRoute(1, 0)
	r.Queue = &rules.Queue{}
	f := newFixture(t, 1, ruleset(r))
	a, err := f.g.Admit(context.Background(), governor.Request{Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), f.clk.Now().Add(20*time.Millisecond))
	defer cancel()
	queued := make(chan admitResult, 1)
	go func() {
		p, err := f.g.Admit(ctx, governor.Request{Path: "/"})
		queued <- admitResult{p, err}
	}()
	until(t, func() bool { return f.clk.Pending() == 1 })
	f.clk.Advance(30 * time.Millisecond) // past the deadline, before the queue's own timeout
	a.Release(time.Millisecond, governor.Success)
	b := <-queued
	if !errors.Is(b.err, governor.ErrQueueTimeout) || b.p.Admitted() {
		t.Fatalf("request past its deadline: %v, want never started", b.err)
	}
	if f.g.InFlight("api") != 0 {
		t.Fatalf("in flight %d, want 0: the expired request took the slot", f.g.InFlight("api"))
	}
}
