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
	// The queue holds one request: the next of its class is shed at once.
	if _, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "batch"}); !errors.Is(err, governor.ErrShed) {
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

// TestQueuedRequestPastItsStatedDeadlineNeverStarts: a request that states
// its deadline in Request.Deadline (not in its ctx) leaves the queue at that
// deadline, refused, and is never started after it.
func TestQueuedRequestPastItsStatedDeadlineNeverStarts(t *testing.T) {
	r := concRoute(1, 0)
	r.Queue = &rules.Queue{}
	f := newFixture(t, 1, ruleset(r))
	ctx := context.Background()
	a, err := f.g.Admit(ctx, governor.Request{Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan admitResult, 1)
	go func() {
		p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "critical", Deadline: f.clk.Now().Add(20 * time.Millisecond)})
		queued <- admitResult{p, err}
	}()
	until(t, func() bool { return f.clk.Pending() == 1 })
	f.clk.Advance(20 * time.Millisecond) // the deadline, before the queue's 100ms
	until(t, func() bool { return len(queued) == 1 })
	b := <-queued
	if !errors.Is(b.err, governor.ErrQueueTimeout) || b.p.Admitted() {
		t.Fatalf("request at its stated deadline: %v, want refused then", b.err)
	}
	a.Release(time.Millisecond, governor.Success)
	if f.g.InFlight("api") != 0 {
		t.Fatalf("in flight %d, want 0: the expired request took the slot", f.g.InFlight("api"))
	}
}

// TestQueueServesAcrossApply: the queue outlives rule changes with the
// route's counts. A permit admitted before an Apply that changed the route
// frees its slot, on release, to a request waiting under the new rules; a
// request waiting since before an Apply (that here also changed the queue's
// settings) gets the slot of a permit admitted after it. Neither waits out
// the queue's time while the route has room.
func TestQueueServesAcrossApply(t *testing.T) {
	r := concRoute(2, 0)
	r.Queue = &rules.Queue{}
	f := newFixture(t, 1, ruleset(r))
	ctx := context.Background()
	admit := func() governor.Permit {
		t.Helper()
		p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "critical"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	wait := func() chan admitResult {
		queued := make(chan admitResult, 1)
		go func() {
			p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "critical"})
			queued <- admitResult{p, err}
		}()
		until(t, func() bool { return f.clk.Pending() == 1 })
		return queued
	}
	served := func(queued chan admitResult) governor.Permit {
		t.Helper()
		until(t, func() bool { return len(queued) == 1 }) // the fake clock stands still: only a release serves it
		w := <-queued
		if w.err != nil {
			t.Fatalf("waiter refused: %v", w.err)
		}
		return w.p
	}
	version := int64(1)
	apply := func(change func(*rules.Route)) {
		t.Helper()
		change(&r)
		version++
		if err := f.g.Apply(ruleset(r), version); err != nil {
			t.Fatal(err)
		}
	}

	old := admit()
	apply(func(r *rules.Route) { r.Exempt = &rules.Exempt{Paths: []string{"/healthz"}} })
	cur := admit()
	queued := wait()
	old.Release(time.Millisecond, governor.Success)
	p := served(queued)

	queued = wait()
	apply(func(r *rules.Route) { r.Queue = &rules.Queue{MaxLength: 4} })
	cur.Release(time.Millisecond, governor.Success)
	q := served(queued)

	p.Release(time.Millisecond, governor.Success)
	q.Release(time.Millisecond, governor.Success)
	if n := f.g.InFlight("api"); n != 0 {
		t.Fatalf("in flight %d at the end, want 0", n)
	}
}
