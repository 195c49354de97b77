package breaker

import (
	"math"
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
