package balancer

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/rules"
)

// panicBreaker opens on the first failure and stays open for a minute.
var panicBreaker = &rules.Breaker{MinCalls: 1, OpenBase: rules.Duration(time.Minute), HalfOpenProbes: 1}

func threshold(v float64) *float64 { return &v }

// eject opens the breakers of addrs.
func eject(t testing.TB, b *Balancer, now int64, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		e := b.Endpoint(a)
		for e.brk.State(now) != breaker.Open {
			tk, err := e.brk.Allow(now)
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			e.brk.Record(tk, now, time.Millisecond, true)
		}
	}
}

// TestFullyEjectedFleetPanicsInsteadOfRefusingEveryCall: a dependency
// shared by every endpoint fails and every endpoint's breaker opens. Pick
// refused every call until the breakers' open periods ended. With the
// default panic threshold it must spread calls over all endpoints, say so
// (Pick.Panic, PanicPicks, Panicking) and leave the breakers alone; with
// panic_threshold 0 it must refuse as before.
func TestFullyEjectedFleetPanicsInsteadOfRefusingEveryCall(t *testing.T) {
	tests := []struct {
		name      string
		threshold *float64
		panics    bool
	}{
		{"default threshold", nil, true},
		{"threshold 1", threshold(1), true},
		{"panic mode off", threshold(0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk := newTest(t, rules.Balancer{SlowStart: rules.Duration(time.Second), PanicThreshold: tt.threshold}, panicBreaker)
			b.Update([]string{"a", "b", "c"})
			clk.Advance(time.Second)
			now := clk.Nanotime()
			eject(t, b, now, "a", "b", "c")
			openUntil := map[string]int64{}
			for _, a := range b.Endpoints() {
				openUntil[a] = b.Endpoint(a).brk.(*breaker.Breaker).OpenUntil()
			}
			if got := b.Panicking(now); got != tt.panics {
				t.Fatalf("Panicking = %v, want %v", got, tt.panics)
			}
			got := map[string]int{}
			for i := range 300 {
				p, err := b.Pick(now)
				if !tt.panics {
					if !errors.Is(err, ErrNoEndpoint) || !errors.Is(err, breaker.ErrOpen) {
						t.Fatalf("Pick = %v, want ErrNoEndpoint wrapping breaker.ErrOpen", err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Pick %d with every endpoint ejected: %v, want an endpoint (panic mode)", i, err)
				}
				if !p.Panic() {
					t.Fatalf("pick of ejected %s does not report panic mode", p.Addr())
				}
				got[p.Addr()]++
				b.Done(p, now+int64(time.Millisecond), i%2 == 0) // failures and successes alike
			}
			if !tt.panics && b.PanicPicks() != 0 {
				t.Fatalf("PanicPicks = %d with panic mode off", b.PanicPicks())
			}
			if tt.panics {
				if b.PanicPicks() != 300 {
					t.Fatalf("PanicPicks = %d, want 300", b.PanicPicks())
				}
				for _, a := range []string{"a", "b", "c"} {
					if got[a] < 50 {
						t.Fatalf("calls %v: want them spread over every endpoint", got)
					}
				}
			}
			for _, a := range b.Endpoints() {
				e := b.Endpoint(a)
				if e.InFlight() != 0 {
					t.Fatalf("%s: %d calls in flight after Done", a, e.InFlight())
				}
				if st := e.brk.State(now); st != breaker.Open || e.brk.(*breaker.Breaker).OpenUntil() != openUntil[a] {
					t.Fatalf("%s: breaker %v until %d, want open until %d: panic calls must not move it",
						a, st, e.brk.(*breaker.Breaker).OpenUntil(), openUntil[a])
				}
			}
		})
	}
}

// TestPanicThresholdIsAShareOfClosedBreakers: with threshold 0.5, two of
// four endpoints ejected is not below it, so ejection holds; a third
// ejected is, and every endpoint takes calls again. Removing ejected
// endpoints from the list ends panic mode.
func TestPanicThresholdIsAShareOfClosedBreakers(t *testing.T) {
	b, clk := newTest(t, rules.Balancer{SlowStart: rules.Duration(time.Second), PanicThreshold: threshold(0.5)}, panicBreaker)
	b.Update([]string{"a", "b", "c", "d"})
	clk.Advance(time.Second)
	now := clk.Nanotime()
	picks := func() map[string]int {
		got := map[string]int{}
		for range 400 {
			p, err := b.Pick(now)
			if err != nil {
				t.Fatal(err)
			}
			got[p.Addr()]++
			b.Cancel(p)
		}
		return got
	}

	eject(t, b, now, "a", "b")
	if b.Panicking(now) {
		t.Fatal("panicking with half of the endpoints healthy")
	}
	if got := picks(); got["a"]+got["b"] != 0 || b.PanicPicks() != 0 {
		t.Fatalf("calls %v, %d panic picks: ejected endpoints got calls above the threshold", got, b.PanicPicks())
	}
	eject(t, b, now, "c")
	if !b.Panicking(now) {
		t.Fatal("not panicking with one endpoint of four healthy")
	}
	got := picks()
	for _, a := range []string{"a", "b", "c", "d"} {
		if got[a] < 40 {
			t.Fatalf("calls %v in panic mode: want every endpoint to get some", got)
		}
	}
	if n := b.PanicPicks(); n != uint64(400-got["d"]) {
		t.Fatalf("PanicPicks = %d, want the %d calls sent to ejected endpoints", n, 400-got["d"])
	}

	b.Remove("a")
	b.Remove("b")
	if b.Panicking(now) { // one of two is healthy
		t.Fatalf("panicking after the ejected endpoints were removed")
	}
	if got := picks(); got["c"] != 0 {
		t.Fatalf("calls %v: the ejected endpoint got calls out of panic mode", got)
	}
}

// TestPanicModeLetsHalfOpenProbesDecide: a half-open endpoint still counts
// as unhealthy, so a fleet whose open periods end together stays in panic
// mode instead of refusing all but a few probe calls; in panic mode the
// first call to each endpoint is its probe (its outcome decides the
// breaker), the others bypass the breaker and decide nothing. Once probes
// close enough breakers panic mode ends.
func TestPanicModeLetsHalfOpenProbesDecide(t *testing.T) {
	b, clk := newTest(t, rules.Balancer{SlowStart: rules.Duration(time.Second)}, panicBreaker)
	b.Update([]string{"a", "b"})
	clk.Advance(time.Second)
	eject(t, b, clk.Nanotime(), "a", "b")
	clk.Advance(time.Minute) // the open periods end
	now := clk.Nanotime()
	if !b.Panicking(now) {
		t.Fatal("half-open endpoints count as healthy: panic mode ended before any probe reported")
	}
	probes := map[string]Pick{}
	var others []Pick
	for range 100 {
		p, err := b.Pick(now)
		if err != nil {
			t.Fatalf("Pick with both endpoints half-open: %v", err)
		}
		if !p.Panic() {
			if _, dup := probes[p.Addr()]; dup {
				t.Fatalf("a second probe went to %s, which has one probe slot", p.Addr())
			}
			probes[p.Addr()] = p
			continue
		}
		others = append(others, p)
	}
	if len(probes) != 2 || len(others) != 98 || b.PanicPicks() != 98 {
		t.Fatalf("%d probes, %d other calls, PanicPicks %d: want one probe per endpoint and 98 panic picks",
			len(probes), len(others), b.PanicPicks())
	}
	for _, p := range others {
		b.Done(p, now, p.Addr() == "a") // calls around the breaker: no outcome reaches it
	}
	for _, a := range []string{"a", "b"} {
		if st := b.Endpoint(a).brk.State(now); st != breaker.HalfOpen {
			t.Fatalf("%s: breaker %v after panic calls, want still half-open", a, st)
		}
	}
	b.Done(probes["a"], now, false) // a recovered: 1 of 2 healthy is not below 0.5
	if st := b.Endpoint("a").brk.State(now); st != breaker.Closed {
		t.Fatalf("a: breaker %v after a successful probe, want closed", st)
	}
	if b.Panicking(now) {
		t.Fatal("still panicking with half the endpoints closed")
	}
	for range 50 { // b's one probe is out: a takes every call
		p, err := b.Pick(now)
		if err != nil || p.Addr() != "a" || p.Panic() {
			t.Fatalf("Pick = %v %v panic=%v, want a through its breaker", p.Addr(), err, p.Panic())
		}
		b.Cancel(p)
	}
	b.Done(probes["b"], now, true) // b is still broken: it reopens, ejection holds
	if st := b.Endpoint("b").brk.State(now); st != breaker.Open || b.Panicking(now) {
		t.Fatalf("b: breaker %v, panicking %v; want open and no panic", st, b.Panicking(now))
	}
}

// TestPanicModeFollowsInheritedEndpoints: a balancer rebuilt for a rule
// change with equal breaker rules shares the endpoints, and so their
// breakers' state changes; its healthy count must follow them.
func TestPanicModeFollowsInheritedEndpoints(t *testing.T) {
	old, clk := newTest(t, rules.Balancer{SlowStart: rules.Duration(time.Second)}, panicBreaker)
	old.Update([]string{"a", "b", "c"})
	clk.Advance(time.Second)
	now := clk.Nanotime()
	eject(t, old, now, "a")
	same := *panicBreaker
	b, err := New(rules.Balancer{SlowStart: rules.Duration(time.Minute)}, Options{Clock: clk, Breaker: &same, Inherit: old, Ejection: Ejection{MaxShare: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Panicking(now) {
		t.Fatal("panicking with two of three endpoints healthy")
	}
	eject(t, b, now, "b")
	if !b.Panicking(now) || !old.Panicking(now) {
		t.Fatalf("one of three healthy: Panicking = %v (old %v), want true", b.Panicking(now), old.Panicking(now))
	}
	p, err := b.Pick(now)
	if err != nil {
		t.Fatal(err)
	}
	b.Cancel(p)
}

// TestThrottleRefusalsStandWithoutPanicMode: a throttle never ejects, and
// what it rejects stays rejected: panic mode is off with kind throttle.
func TestThrottleRefusalsStandWithoutPanicMode(t *testing.T) {
	b, clk := settled(t, &rules.Breaker{Kind: rules.BreakerKindThrottle}, "a")
	if b.panicAt != 0 || b.Panicking(clk.Nanotime()) {
		t.Fatalf("panic threshold %v with a throttle, want off", b.panicAt)
	}
}

// TestSlowStartingEndpointDoesNotLoseAPickToABrokenOne: in panic mode an
// endpoint whose breaker is open is a candidate like any other; a healthy
// endpoint in slow start must not hand it its pick.
func TestSlowStartingEndpointDoesNotLoseAPickToABrokenOne(t *testing.T) {
	b, clk := rampBalancer(t, Ejection{MaxShare: 1}, panicBreaker, "a", "b")
	eject(t, b, clk.Nanotime(), "a", "b")
	b.Add("new") // one of three healthy: panic mode
	if !b.Panicking(clk.Nanotime()) {
		t.Fatal("not panicking")
	}
	got := run(t, b, clk, 1000, nil, nil)
	if got["new"] < 250 {
		t.Fatalf("calls %v: the slow-starting endpoint handed its picks to the broken ones", got)
	}
}

// TestThrottlingDoesNotBringOnPanicMode: a throttle never ejects, so a
// fleet whose throttles reject a share of calls is healthy for panic mode;
// an endpoint ejected for consecutive failures must stay out.
func TestThrottlingDoesNotBringOnPanicMode(t *testing.T) {
	thr := &rules.Breaker{Kind: rules.BreakerKindThrottle}
	b, clk := newEjecting(t, Ejection{ConsecutiveFailures: 2}, thr, "a", "b", "c")
	for i := range 50 { // few calls accepted: every throttle rejects a share
		for _, a := range b.Endpoints() {
			e := b.Endpoint(a)
			if tk, err := e.brk.Allow(clk.Nanotime()); err == nil {
				e.brk.Record(tk, clk.Nanotime(), time.Millisecond, i%5 >= 2)
			}
		}
		clk.Advance(100 * time.Millisecond)
	}
	for _, a := range b.Endpoints() {
		if st := b.Endpoint(a).brk.State(clk.Nanotime()); st != breaker.HalfOpen {
			t.Fatalf("%s: throttle %v, want rejecting a share", a, st)
		}
	}
	for i := 0; len(b.Ejected(clk.Nanotime())) == 0; i++ {
		if i == 100 {
			t.Fatal("a not ejected after 100 calls")
		}
		p, err := b.Pick(clk.Nanotime())
		if err != nil {
			continue // throttled
		}
		b.Done(p, clk.Nanotime(), p.Addr() == "a")
	}
	now := clk.Nanotime()
	if b.Panicking(now) {
		t.Fatal("panicking with throttles rejecting and one endpoint of three ejected")
	}
	for range 200 {
		if p, err := b.Pick(now); err == nil {
			if p.Addr() == "a" {
				t.Fatal("the ejected endpoint got a call")
			}
			b.Cancel(p)
		}
	}
}

func TestNewValidatesThePanicThreshold(t *testing.T) {
	for _, v := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
		_, err := New(rules.Balancer{PanicThreshold: &v}, Options{Breaker: panicBreaker})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "panic_threshold") {
			t.Fatalf("New with panic_threshold %v = %v, want ErrInvalidConfig naming panic_threshold", v, err)
		}
	}
}

// TestPickDoesNotAllocate covers the healthy, the partly ejected and the
// panic paths.
func TestPickDoesNotAllocate(t *testing.T) {
	b, clk := settled(t, panicBreaker, "a", "b", "c", "d")
	now := clk.Nanotime()
	pickCancel := func() {
		p, err := b.Pick(now)
		if err != nil {
			t.Fatal(err)
		}
		b.Done(p, now, false)
	}
	for _, ejected := range [][]string{nil, {"a", "b"}, {"c", "d"}} {
		eject(t, b, now, ejected...)
		if n := testing.AllocsPerRun(200, pickCancel); n != 0 {
			t.Fatalf("Pick+Done with %v ejected: %v allocations, want 0", ejected, n)
		}
	}
	if b.PanicPicks() == 0 {
		t.Fatal("the panic path did not run")
	}
}

// BenchmarkPickDoneEjected is Pick and Done over ten endpoints with some of
// them ejected: two (ejection holds, the healthy count is read from its
// cache) and all ten (panic mode).
func BenchmarkPickDoneEjected(b *testing.B) {
	for _, n := range []int{2, 10} {
		b.Run(map[int]string{2: "ejected=2of10", 10: "ejected=10of10"}[n], func(b *testing.B) {
			brk := &rules.Breaker{MinCalls: 1, OpenBase: rules.Duration(time.Hour), OpenMax: rules.Duration(time.Hour)}
			bal, _ := New(rules.Balancer{SlowStart: rules.Duration(time.Nanosecond)}, Options{Breaker: brk, Ejection: Ejection{MaxShare: 1}})
			var addrs []string
			for i := range 10 {
				addrs = append(addrs, string(rune('a'+i)))
			}
			bal.Update(addrs)
			eject(b, bal, int64(time.Second), addrs[:n]...)
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
