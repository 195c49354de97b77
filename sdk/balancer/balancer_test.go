package balancer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func newTest(t *testing.T, c rules.Balancer, brk *rules.Breaker) (*Balancer, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Time{})
	rng := rand.New(rand.NewPCG(1, 2))
	// No ejection cap: these tests eject as many endpoints as they need
	// (eject_test.go covers the cap).
	b, err := New(c, Options{Clock: clk, IntN: rng.IntN, Float64: rng.Float64, Breaker: brk, Ejection: Ejection{MaxShare: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return b, clk
}

// settled returns a balancer whose endpoints are past slow start.
func settled(t *testing.T, brk *rules.Breaker, addrs ...string) (*Balancer, *clock.Fake) {
	b, clk := newTest(t, rules.Balancer{SlowStart: rules.Duration(time.Second)}, brk)
	b.Update(addrs)
	clk.Advance(time.Second)
	return b, clk
}

// run makes n sequential calls, each lasting latency[addr], and returns how
// many each endpoint got.
func run(t *testing.T, b *Balancer, clk *clock.Fake, n int, latency map[string]time.Duration, fail map[string]bool) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		p, err := b.Pick(clk.Nanotime())
		if err != nil {
			t.Fatalf("Pick: %v", err)
		}
		got[p.Addr()]++
		clk.Advance(latency[p.Addr()])
		b.Done(p, clk.Nanotime(), fail[p.Addr()])
	}
	return got
}

func TestPrefersTheFasterEndpoint(t *testing.T) {
	b, clk := settled(t, nil, "fast", "slow", "slower")
	got := run(t, b, clk, 3000, map[string]time.Duration{
		"fast": 5 * time.Millisecond, "slow": 25 * time.Millisecond, "slower": 100 * time.Millisecond,
	}, nil)
	// With three endpoints P2C sees the fastest in two of three draws, and
	// the slowest loses every draw.
	if got["fast"] < 1900 || got["slower"] > 100 || got["slow"] < 800 {
		t.Fatalf("shares %v: want about 2/3 on fast, 1/3 on slow, none on slower", got)
	}
}

func TestPrefersTheLessLoadedEndpoint(t *testing.T) {
	b, clk := settled(t, nil, "a", "b")
	run(t, b, clk, 100, map[string]time.Duration{"a": 10 * time.Millisecond, "b": 10 * time.Millisecond}, nil)
	// Hold five calls on whatever gets picked, then check the next picks
	// balance the in-flight counts instead of piling onto one endpoint.
	var held []Pick
	for range 10 {
		p, err := b.Pick(clk.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	a, c := b.Endpoint("a").InFlight(), b.Endpoint("b").InFlight()
	if a+c != 10 || a < 4 || c < 4 {
		t.Fatalf("in flight a=%d b=%d, want about even", a, c)
	}
	for _, p := range held {
		b.Done(p, clk.Nanotime(), false)
	}
	if b.Endpoint("a").InFlight() != 0 || b.Endpoint("b").InFlight() != 0 {
		t.Fatal("in-flight counts not released")
	}
}

func TestPeakSensitiveAndDecaying(t *testing.T) {
	b, clk := settled(t, nil, "a")
	e := b.Endpoint("a")
	observe := func(rtt time.Duration) {
		p, _ := b.Pick(clk.Nanotime())
		clk.Advance(rtt)
		b.Done(p, clk.Nanotime(), false)
	}
	observe(10 * time.Millisecond)
	observe(500 * time.Millisecond) // a slow sample: the estimate jumps
	if got := e.Latency(clk.Nanotime(), b.decay); got != float64(500*time.Millisecond) {
		t.Fatalf("estimate after a peak = %v, want 500ms", time.Duration(got))
	}
	observe(10 * time.Millisecond) // a fast one only pulls it down a little
	if got := time.Duration(e.Latency(clk.Nanotime(), b.decay)); got < 400*time.Millisecond {
		t.Fatalf("estimate after one fast sample = %v, want still near the peak", got)
	}
	clk.Advance(30 * time.Second) // three decay times idle
	if got := time.Duration(e.Latency(clk.Nanotime(), b.decay)); got > 30*time.Millisecond {
		t.Fatalf("estimate after idling = %v, want decayed", got)
	}
}

func TestFailingEndpointIsEjected(t *testing.T) {
	brk := &rules.Breaker{MinCalls: 5, ErrorRatio: 0.5, OpenBase: rules.Duration(5 * time.Second), HalfOpenProbes: 1}
	b, clk := settled(t, brk, "good", "bad")
	lat := map[string]time.Duration{"good": 10 * time.Millisecond, "bad": time.Millisecond}
	run(t, b, clk, 200, lat, map[string]bool{"bad": true})
	if ej := b.Ejected(clk.Nanotime()); len(ej) != 1 || ej[0] != "bad" {
		t.Fatalf("ejected = %v, want [bad]", ej)
	}
	got := run(t, b, clk, 200, lat, nil) // 2s: still inside the open period
	if got["bad"] != 0 {
		t.Fatalf("ejected endpoint got %d calls", got["bad"])
	}
	clk.Advance(5 * time.Second)
	got = run(t, b, clk, 500, lat, nil) // it recovered: a probe closes its breaker
	if got["bad"] == 0 || len(b.Ejected(clk.Nanotime())) != 0 {
		t.Fatalf("recovered endpoint got %d calls, ejected %v", got["bad"], b.Ejected(clk.Nanotime()))
	}
}

// TestCancelGivesBackTheCallAndRecordsNothing: an ejected endpoint's open
// period ends and its one half-open probe goes to a call whose caller gives
// up after 3s. Done had no neutral outcome: reported as a success, the
// cancelled probe closed the breaker of an endpoint nobody had seen recover,
// and its 3s fed the latency estimate. Cancel must give back the in-flight
// count and the probe slot, leave the breaker half-open for the next probe
// and leave the estimate where it was.
func TestCancelGivesBackTheCallAndRecordsNothing(t *testing.T) {
	brk := &rules.Breaker{MinCalls: 3, OpenBase: rules.Duration(time.Second), HalfOpenProbes: 1}
	b, clk := settled(t, brk, "a")
	run(t, b, clk, 3, map[string]time.Duration{"a": 5 * time.Millisecond}, map[string]bool{"a": true})
	if ej := b.Ejected(clk.Nanotime()); len(ej) != 1 {
		t.Fatalf("ejected = %v, want [a]", ej)
	}
	e := b.Endpoint("a")
	clk.Advance(time.Second) // the open period is over: the next pick is the probe
	for range 3 {
		before := e.Latency(clk.Nanotime(), b.decay)
		p, err := b.Pick(clk.Nanotime())
		if err != nil {
			t.Fatalf("Pick after a cancelled probe: %v", err)
		}
		clk.Advance(3 * time.Second)
		b.Cancel(p)
		if n := e.InFlight(); n != 0 {
			t.Fatalf("%d calls in flight after Cancel", n)
		}
		if st := e.brk.State(clk.Nanotime()); st != breaker.HalfOpen {
			t.Fatalf("endpoint breaker %v after a cancelled probe, want half-open", st)
		}
		if got := e.Latency(clk.Nanotime(), b.decay); got > before {
			t.Fatalf("estimate %v after a cancelled call, was %v: the call fed a sample",
				time.Duration(got), time.Duration(before))
		}
	}
	run(t, b, clk, 1, map[string]time.Duration{"a": 5 * time.Millisecond}, nil) // a probe that reports
	if st := e.brk.State(clk.Nanotime()); st != breaker.Closed {
		t.Fatalf("endpoint breaker %v after a successful probe, want closed", st)
	}
	b.Cancel(Pick{}) // a zero Pick is ignored
}

// TestEstimateRecoversAfterAFailureStreak: every call to the endpoint fails
// fast for a while (an outage of the whole downstream fails every endpoint
// this way), then it serves 10ms calls again. Failures must never make it
// look faster, but they must not inflate its estimate so far that it stays
// wrong long after the recovery: before, every failure in a row doubled the
// estimate, 200 of them left it at centuries, and ten decay times of 10ms
// calls still left it at days, so the balancer ignored latency for minutes.
func TestEstimateRecoversAfterAFailureStreak(t *testing.T) {
	b, clk := settled(t, nil, "a")
	e := b.Endpoint("a")
	for i := range 200 {
		p, err := b.Pick(clk.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
		before := e.Latency(clk.Nanotime(), b.decay)
		b.Done(p, clk.Nanotime(), true)
		if got := e.Latency(clk.Nanotime(), b.decay); got < before {
			t.Fatalf("failure %d lowered the estimate from %v to %v", i+1, time.Duration(before), time.Duration(got))
		}
	}
	if got := e.Latency(clk.Nanotime(), b.decay); got < 5*float64(time.Second) || got > b.decay {
		t.Fatalf("estimate after 200 failures = %v, want high but at most the decay time %v",
			time.Duration(got), time.Duration(b.decay))
	}
	run(t, b, clk, 10000, map[string]time.Duration{"a": 10 * time.Millisecond}, nil) // ten decay times
	if got := time.Duration(e.Latency(clk.Nanotime(), b.decay)); got > 20*time.Millisecond {
		t.Fatalf("estimate %v after ten decay times of 10ms calls, want near 10ms", got)
	}
}

// TestConcurrentAddAndRemoveLoseNothing: service discovery adds endpoints
// from several goroutines at once. Add and Remove read the list and write a
// new one; both must happen under the lock, or concurrent calls overwrite
// each other's changes and endpoints silently go missing.
func TestConcurrentAddAndRemoveLoseNothing(t *testing.T) {
	b, _ := newTest(t, rules.Balancer{}, nil)
	b.Update([]string{"gone-0", "gone-1", "gone-2", "gone-3"})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() { b.Add(fmt.Sprintf("10.0.0.%d:80", i)) })
	}
	for i := range 4 {
		wg.Go(func() { b.Remove(fmt.Sprintf("gone-%d", i)) })
	}
	wg.Wait()
	if got := b.Len(); got != 64 {
		t.Fatalf("Len = %d after 64 concurrent Adds and 4 Removes, want 64 (%v)", got, b.Endpoints())
	}
}

// TestAllEjectedWithoutPanicModeRefuses: with panic_threshold 0 a fully
// ejected downstream refuses calls (panic_test.go covers panic mode).
func TestAllEjectedWithoutPanicModeRefuses(t *testing.T) {
	brk := &rules.Breaker{MinCalls: 1, HalfOpenProbes: 1}
	off := 0.0
	b, clk := newTest(t, rules.Balancer{SlowStart: rules.Duration(time.Second), PanicThreshold: &off}, brk)
	b.Update([]string{"a", "b"})
	clk.Advance(time.Second)
	for _, addr := range []string{"a", "b"} {
		for !b.out(b.Endpoint(addr), clk.Nanotime(), b.eps.Load()) {
			p, err := b.Pick(clk.Nanotime())
			if err != nil {
				t.Fatal(err)
			}
			b.Done(p, clk.Nanotime(), p.Addr() == addr)
		}
	}
	_, err := b.Pick(clk.Nanotime())
	if !errors.Is(err, ErrNoEndpoint) || !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Pick = %v, want ErrNoEndpoint wrapping breaker.ErrOpen", err)
	}
}

func TestSlowStartRampsANewEndpoint(t *testing.T) {
	b, clk := newTest(t, rules.Balancer{SlowStart: rules.Duration(30 * time.Second)}, nil)
	b.Update([]string{"old"})
	clk.Advance(time.Minute)
	lat := map[string]time.Duration{"old": 10 * time.Millisecond, "new": 10 * time.Millisecond}
	run(t, b, clk, 100, lat, nil)
	b.Add("new")
	var shares []float64
	for range 6 { // six 10s periods: three in slow start, three after
		got := run(t, b, clk, 1000, lat, nil)
		shares = append(shares, float64(got["new"])/1000)
	}
	if shares[0] > 0.25 {
		t.Fatalf("first-period share %.2f, want small (shares %v)", shares[0], shares)
	}
	if !(shares[0] < shares[1] && shares[1] < shares[2]) {
		t.Fatalf("shares %v do not ramp up", shares)
	}
	if shares[5] < 0.4 || shares[5] > 0.6 {
		t.Fatalf("share after slow start %.2f, want about half (shares %v)", shares[5], shares)
	}
}

func TestUpdateKeepsState(t *testing.T) {
	b, clk := settled(t, nil, "a", "b")
	run(t, b, clk, 50, map[string]time.Duration{"a": time.Millisecond, "b": time.Millisecond}, nil)
	a := b.Endpoint("a")
	b.Update([]string{"c", "a", "a"})
	if got := b.Endpoints(); len(got) != 2 || got[0] != "c" || got[1] != "a" {
		t.Fatalf("Endpoints = %v", got)
	}
	if b.Endpoint("a") != a || b.Endpoint("b") != nil {
		t.Fatal("a lost its state or b was not removed")
	}
	b.Remove("c")
	b.Add("a")
	if got := b.Endpoints(); len(got) != 1 || got[0] != "a" || b.Len() != 1 {
		t.Fatalf("Endpoints = %v", got)
	}
	b.Remove("a")
	if _, err := b.Pick(clk.Nanotime()); !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("Pick on empty = %v", err)
	}
	b.Done(Pick{}, 0, false) // a zero Pick is ignored
}

func TestNewValidates(t *testing.T) {
	if _, err := New(rules.Balancer{Decay: -1}, Options{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v", err)
	}
	if _, err := New(rules.Balancer{}, Options{Breaker: &rules.Breaker{Kind: "x"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v", err)
	}
}

func BenchmarkPickDone(b *testing.B) {
	for _, n := range []int{2, 10} {
		b.Run(map[int]string{2: "endpoints=2", 10: "endpoints=10"}[n], func(b *testing.B) {
			bal, _ := New(rules.Balancer{SlowStart: rules.Duration(time.Nanosecond)}, Options{Breaker: &rules.Breaker{}})
			var addrs []string
			for i := range n {
				addrs = append(addrs, string(rune('a'+i)))
			}
			bal.Update(addrs)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				now := int64(time.Second)
				for pb.Next() {
					now += 1000
					p, err := bal.Pick(now)
					if err != nil {
						b.Fatal(err)
					}
					bal.Done(p, now+int64(time.Millisecond), false)
				}
			})
		})
	}
}

// BenchmarkPickCancel is a balanced call its caller cancels before it ends.
func BenchmarkPickCancel(b *testing.B) {
	bal, _ := New(rules.Balancer{SlowStart: rules.Duration(time.Nanosecond)}, Options{Breaker: &rules.Breaker{}})
	bal.Update([]string{"a", "b"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := int64(time.Second)
		for pb.Next() {
			now += 1000
			p, err := bal.Pick(now)
			if err != nil {
				b.Fatal(err)
			}
			bal.Cancel(p)
		}
	})
}

// TestInheritKeepsEndpointsAcrossARuleChange: a balancer rebuilt for a rule
// change started every endpoint afresh. An operator tuning slow_start during
// an incident put the dead, ejected endpoint straight back into rotation
// (and every call to it failed until its new breaker saw min_calls
// failures), and any change threw away the latency estimates. With equal
// breaker rules the endpoints must be the same ones; with other breaker
// rules they keep their estimate and slow-start age under a fresh breaker.
func TestInheritKeepsEndpointsAcrossARuleChange(t *testing.T) {
	brk := &rules.Breaker{MinCalls: 5, ErrorRatio: 0.5, OpenBase: rules.Duration(5 * time.Second), HalfOpenProbes: 1}
	old, clk := settled(t, brk, "good", "bad")
	run(t, old, clk, 200, map[string]time.Duration{"good": 10 * time.Millisecond, "bad": time.Millisecond},
		map[string]bool{"bad": true})
	if ej := old.Ejected(clk.Nanotime()); len(ej) != 1 || ej[0] != "bad" {
		t.Fatalf("ejected = %v, want [bad]", ej)
	}
	now := clk.Nanotime()
	goodCost := old.Endpoint("good").Latency(now, float64(DefaultDecay))

	same := *brk // equal rules, another pointer
	b, err := New(rules.Balancer{SlowStart: rules.Duration(time.Minute)}, Options{Clock: clk, Breaker: &same, Inherit: old})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Endpoints(); len(got) != 2 || got[0] != "good" || got[1] != "bad" {
		t.Fatalf("Endpoints = %v", got)
	}
	if b.Endpoint("good") != old.Endpoint("good") || b.Endpoint("bad") != old.Endpoint("bad") {
		t.Fatal("equal breaker rules: want the same endpoints")
	}
	if ej := b.Ejected(now); len(ej) != 1 || ej[0] != "bad" {
		t.Fatalf("after a slow_start change ejected = %v, want [bad]", ej)
	}
	for range 50 {
		p, err := b.Pick(now)
		if err != nil {
			t.Fatal(err)
		}
		if p.Addr() != "good" {
			t.Fatalf("picked %s, which is ejected", p.Addr())
		}
		b.Cancel(p)
	}

	other := *brk
	other.MinCalls = 50
	c, err := New(rules.Balancer{}, Options{Clock: clk, Breaker: &other, Inherit: b})
	if err != nil {
		t.Fatal(err)
	}
	g := c.Endpoint("good")
	switch {
	case g == nil || g == b.Endpoint("good"):
		t.Fatal("other breaker rules: want a new endpoint")
	case g.Latency(now, float64(DefaultDecay)) != goodCost:
		t.Fatalf("estimate %v, want %v kept", g.Latency(now, float64(DefaultDecay)), goodCost)
	case g.added != old.Endpoint("good").added:
		t.Fatal("slow-start age not kept")
	case len(c.Ejected(now)) != 0:
		t.Fatalf("a fresh breaker ejects %v", c.Ejected(now))
	}
	if len(old.Endpoints()) != 2 || b.Len() != 2 {
		t.Fatal("the inherited balancer changed")
	}
}

// TestEstimateFollowsASampleRelativeToTheDecayedEstimate: an endpoint's
// estimate has decayed from 100ms to about 50ms while it was idle. A 40ms
// call must pull it down (to between 40 and 50ms), and a 60ms call, slower
// than the estimate, must replace it. Both used to be averaged against the
// stale 100ms instead: the 40ms call raised the estimate to about 70ms and
// the 60ms call set it to about 80ms.
func TestEstimateFollowsASampleRelativeToTheDecayedEstimate(t *testing.T) {
	tests := []struct {
		name     string
		sample   time.Duration
		min, max time.Duration
	}{
		{"faster sample pulls the estimate down", 40 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond},
		{"slower sample replaces the estimate", 60 * time.Millisecond, 60 * time.Millisecond, 60 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk := settled(t, nil, "a")
			e := b.Endpoint("a")
			run(t, b, clk, 1, map[string]time.Duration{"a": 100 * time.Millisecond}, nil)
			clk.Advance(time.Duration(b.decay*math.Ln2) - tt.sample) // decayed to half once the call ends
			before := time.Duration(e.Latency(clk.Nanotime()+int64(tt.sample), b.decay))
			run(t, b, clk, 1, map[string]time.Duration{"a": tt.sample}, nil)
			got := time.Duration(e.Latency(clk.Nanotime(), b.decay))
			if got < tt.min-time.Microsecond || got > tt.max+time.Microsecond {
				t.Fatalf("estimate %v before a %v call, %v after; want within [%v, %v]", before, tt.sample, got, tt.min, tt.max)
			}
		})
	}
}
