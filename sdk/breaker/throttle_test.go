package breaker

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func TestThrottleProbabilityFollowsTheSREFormula(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	var changes []State
	roll := 0.5
	g, err := New(rules.Breaker{Kind: rules.BreakerKindThrottle, K: 2, Window: rules.Duration(10 * time.Second)},
		Options{Float64: func() float64 { return roll }, OnStateChange: func(_, to State) { changes = append(changes, to) }})
	if err != nil {
		t.Fatal(err)
	}
	th := g.(*Throttle)
	step := time.Second // one bucket: the probability is refreshed every call

	// 10 requests, all accepted: nothing is throttled.
	for range 10 {
		tk, err := th.Allow(clk.Nanotime())
		if err != nil {
			t.Fatal("throttled while healthy")
		}
		th.Record(tk, clk.Nanotime(), 0, false)
	}
	clk.Advance(step)
	if p := th.Probability(clk.Nanotime()); p != 0 {
		t.Fatalf("p = %v, want 0", p)
	}
	// The backend starts failing: every request counts, none is accepted.
	var rejected int
	for range 40 {
		clk.Advance(step / 4)
		tk, err := th.Allow(clk.Nanotime())
		if err != nil {
			rejected++
			continue
		}
		th.Record(tk, clk.Nanotime(), 0, true)
	}
	if rejected == 0 {
		t.Fatal("nothing throttled while failing")
	}
	clk.Advance(step)
	s := th.ring.Sum(clk.Nanotime())
	want := math.Max(0, (float64(s[cRequests])-2*float64(s[cAccepts]))/(float64(s[cRequests])+1))
	if got := th.Probability(clk.Nanotime()); math.Abs(got-want) > 1e-9 || got <= 0.5 {
		t.Fatalf("p = %v, want %v (> 0.5)", got, want)
	}
	if th.State(clk.Nanotime()) != HalfOpen {
		t.Fatal("state should be HalfOpen while throttling")
	}
	// The failures leave the window: throttling stops.
	clk.Advance(11 * time.Second)
	if p := th.Probability(clk.Nanotime()); p != 0 {
		t.Fatalf("p = %v after the window, want 0", p)
	}
	if th.State(clk.Nanotime()) != Closed || len(changes) != 2 || changes[0] != HalfOpen || changes[1] != Closed {
		t.Fatalf("state %v changes %v", th.State(clk.Nanotime()), changes)
	}
}

func TestThrottleRejectsWithItsProbability(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	roll := 0.0
	g, _ := New(rules.Breaker{Kind: rules.BreakerKindThrottle}, Options{Float64: func() float64 { return roll }})
	th := g.(*Throttle)
	for range 100 {
		th.Allow(clk.Nanotime()) // no accepts at all
	}
	clk.Advance(time.Second)
	p := th.Probability(clk.Nanotime())
	roll = p - 0.01
	if _, err := th.Allow(clk.Nanotime()); err == nil {
		t.Fatalf("roll below p=%v admitted", p)
	}
	roll = p + 0.001
	if _, err := th.Allow(clk.Nanotime()); err != nil {
		t.Fatalf("roll above p=%v rejected", p)
	}
}

// Calls the caller cancels (hedged requests that lost, callers that left)
// end without an outcome. Counted as requests without an accept they would
// raise the reject probability of a downstream that never failed: with two of
// three calls cancelled the throttle refused more than half of all calls.
// Release takes each cancelled call's request back, so only the calls that
// report count.
func TestThrottleCancelledCallsLeaveTheProbabilityUnchanged(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	rng := rand.New(rand.NewPCG(3, 4))
	g, err := New(rules.Breaker{Kind: rules.BreakerKindThrottle}, Options{Float64: rng.Float64})
	if err != nil {
		t.Fatal(err)
	}
	th := g.(*Throttle)
	refused := 0
	for i := range 1000 {
		tk, err := th.Allow(clk.Nanotime()) // the first at time 0
		switch {
		case err != nil:
			refused++
		case i%3 != 0:
			th.Release(tk)
		default:
			th.Record(tk, clk.Nanotime(), 0, false)
		}
		clk.Advance(10 * time.Millisecond)
	}
	if refused != 0 {
		t.Fatalf("%d of 1000 calls refused; the downstream never failed", refused)
	}
	s := th.ring.Sum(clk.Nanotime())
	if s[cRequests] != s[cAccepts] {
		t.Fatalf("window holds %d requests and %d accepts, want only the reported calls' requests", s[cRequests], s[cAccepts])
	}

	// A call released after its request has left the window takes nothing
	// back from the requests still in it.
	tk, err := th.Allow(clk.Nanotime())
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Second)
	th.Allow(clk.Nanotime())
	th.Release(tk)
	if s := th.ring.Sum(clk.Nanotime()); s[cRequests] != 1 {
		t.Fatalf("requests in the window = %d, want 1", s[cRequests])
	}
	th.Release(0) // the zero ticket is ignored
}

// After an outage the throttle rejects a share of calls. Once traffic stops
// the window empties and nothing would be rejected: State (what the
// governor_sdk_breaker_state gauge reports) follows the clock instead of
// keeping what the last call saw. State only reads, so the state-change hook
// runs from the next Allow, on a caller's goroutine, never from State (which
// the metrics collector calls during a scrape).
func TestThrottleStateFollowsTheClockWithoutTraffic(t *testing.T) {
	var changes []string
	g, err := New(rules.Breaker{Kind: rules.BreakerKindThrottle}, Options{
		Float64:       func() float64 { return 0.99 },
		OnStateChange: func(from, to State) { changes = append(changes, from.String()+">"+to.String()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	sec := int64(time.Second)
	now := sec
	for range 100 { // a dead downstream: every admitted call fails
		now += sec / 100
		if tk, err := g.Allow(now); err == nil {
			g.Record(tk, now, time.Millisecond, true)
		}
	}
	if s := g.State(now); s != HalfOpen {
		t.Fatalf("state %v during the outage, want half-open", s)
	}
	later := now + int64(time.Hour)
	if s := g.State(later); s != Closed {
		t.Fatalf("an hour after the last call State = %v, want closed (the window is empty)", s)
	}
	if fmt.Sprint(changes) != "[closed>half-open]" {
		t.Fatalf("changes %v after State, want [closed>half-open]: State ran the hook", changes)
	}
	if _, err := g.Allow(later); err != nil {
		t.Fatalf("Allow an hour after the outage: %v", err)
	}
	if fmt.Sprint(changes) != "[closed>half-open half-open>closed]" {
		t.Fatalf("changes %v after Allow", changes)
	}
}
