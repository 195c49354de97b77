package balancer

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// newEjecting returns a balancer with the ejection options and endpoints,
// past slow start.
func newEjecting(t *testing.T, ej Ejection, brk *rules.Breaker, addrs ...string) (*Balancer, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Time{})
	rng := rand.New(rand.NewPCG(1, 2))
	b, err := New(rules.Balancer{SlowStart: rules.Duration(time.Second)},
		Options{Clock: clk, IntN: rng.IntN, Float64: rng.Float64, Breaker: brk, Ejection: ej})
	if err != nil {
		t.Fatal(err)
	}
	b.Update(addrs)
	clk.Advance(time.Second)
	return b, clk
}

// TestConsecutiveFailuresEjectForGrowingCappedPeriods: an endpoint whose
// calls keep failing was ejected only once its breaker saw min_calls calls
// at error_ratio over its window, and not at all without a breaker. Five
// failures in a row must eject it for the base time, then 2x and 3x the
// base time, capped at the max time; it returns when the time is up, and a
// success between failures starts the count again.
func TestConsecutiveFailuresEjectForGrowingCappedPeriods(t *testing.T) {
	ej := Ejection{ConsecutiveFailures: 5, BaseTime: 10 * time.Second, MaxTime: 25 * time.Second}
	clk := clock.NewFake(time.Time{})
	off := 0.0 // panic mode off: the only endpoint ejected refuses calls
	b, err := New(rules.Balancer{PanicThreshold: &off}, Options{Clock: clk, Ejection: ej})
	if err != nil {
		t.Fatal(err)
	}
	b.Update([]string{"a"})
	clk.Advance(time.Minute)
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 25 * time.Second, 25 * time.Second} {
		run(t, b, clk, 5, map[string]time.Duration{"a": time.Millisecond}, map[string]bool{"a": true})
		if got := b.Ejected(clk.Nanotime()); len(got) != 1 {
			t.Fatalf("ejection %d: ejected %v after 5 failures in a row, want [a]", i+1, got)
		}
		clk.Advance(want - time.Nanosecond)
		if _, err := b.Pick(clk.Nanotime()); !errors.Is(err, ErrNoEndpoint) {
			t.Fatalf("ejection %d: Pick %v before %v, want ErrNoEndpoint", i+1, err, want)
		}
		clk.Advance(time.Nanosecond)
		p, err := b.Pick(clk.Nanotime())
		if err != nil {
			t.Fatalf("ejection %d: Pick %v after %v, want the endpoint back", i+1, err, want)
		}
		b.Cancel(p)
	}
	// A success between failures resets the count.
	b2, clk2 := newEjecting(t, ej, nil, "a")
	for _, failed := range []bool{true, true, true, true, false, true, true, true, true} {
		p, err := b2.Pick(clk2.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		b2.Done(p, clk2.Nanotime(), failed)
	}
	if got := b2.Ejected(clk2.Nanotime()); len(got) != 0 {
		t.Fatalf("ejected %v after four failures, a success and four failures", got)
	}
}

// TestEjectionMemoryFadesWhileInRotation: each base time an endpoint spends
// back in rotation forgets one of its ejections, so one that flapped long
// ago is not kept out for the max time on its next failure streak.
func TestEjectionMemoryFadesWhileInRotation(t *testing.T) {
	ej := Ejection{ConsecutiveFailures: 1, BaseTime: 10 * time.Second, MaxTime: time.Minute, MaxShare: 1}
	b, clk := newEjecting(t, ej, nil, "a", "b")
	failA := func() {
		for len(b.Ejected(clk.Nanotime())) == 0 {
			run(t, b, clk, 1, nil, map[string]bool{"a": true})
		}
	}
	failA()                       // 10s
	clk.Advance(10 * time.Second) // back
	failA()                       // 20s
	clk.Advance(20 * time.Second) // back
	clk.Advance(10 * time.Second) // one base time in rotation forgets one ejection
	failA()
	until := b.Endpoint("a").outUntil.Load()
	if got := time.Duration(until - clk.Nanotime()); got != 20*time.Second {
		t.Fatalf("third ejection after a base time in rotation lasts %v, want 20s", got)
	}
}

// TestMaxShareCapsConsecutiveFailureEjection: three of ten endpoints fail
// every call; with max share 0.2 two are ejected and the third keeps its
// share of calls, so a fleet-wide failure cannot pile every call onto the
// few endpoints left. The refusals are counted.
func TestMaxShareCapsConsecutiveFailureEjection(t *testing.T) {
	addrs := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	ej := Ejection{ConsecutiveFailures: 3, MaxShare: 0.2}
	b, clk := newEjecting(t, ej, nil, addrs...)
	bad := map[string]bool{"a": true, "b": true, "c": true}
	run(t, b, clk, 300, nil, bad)
	if got := b.Ejected(clk.Nanotime()); len(got) != 2 {
		t.Fatalf("ejected %v with max share 0.2 of 10, want 2", got)
	}
	if b.SkippedEjections() == 0 {
		t.Fatal("SkippedEjections = 0, want the refused ejections counted")
	}
}

// TestMaxShareHoldsUnderConcurrentFailures: every endpoint fails every
// call from many goroutines at once, breakers and consecutive failures
// alike; the ejections judged at the same time must not overshoot the cap.
func TestMaxShareHoldsUnderConcurrentFailures(t *testing.T) {
	addrs := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	clk := clock.NewFake(time.Time{})
	b, err := New(rules.Balancer{SlowStart: rules.Duration(time.Second)}, // the default random source: safe for concurrent use
		Options{Clock: clk, Breaker: panicBreaker, Ejection: Ejection{ConsecutiveFailures: 2, MaxShare: 0.3}})
	if err != nil {
		t.Fatal(err)
	}
	b.Update(addrs)
	clk.Advance(time.Second)
	now := clk.Nanotime()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				p, err := b.Pick(now)
				if err != nil {
					t.Error(err)
					return
				}
				b.Done(p, now, true)
				if n := len(b.Ejected(now)); n > 3 {
					t.Errorf("%d endpoints ejected, want at most 3 (max share 0.3 of 10)", n)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := len(b.Ejected(now)); n != 3 {
		t.Fatalf("%d endpoints ejected after every call failed, want 3", n)
	}
}

// TestDefaultMaxShareCapsBreakerEjection: ten endpoints, three breakers
// open. Every open breaker ejected its endpoint, up to half the fleet
// (panic threshold) piled onto the rest. By default at most 10% (at least
// one) are ejected; the others keep getting calls, around their breakers.
func TestDefaultMaxShareCapsBreakerEjection(t *testing.T) {
	b, clk := newEjecting(t, Ejection{}, panicBreaker, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	now := clk.Nanotime()
	eject(t, b, now, "a", "b", "c")
	got := map[string]int{}
	for range 1000 {
		p, err := b.Pick(now)
		if err != nil {
			t.Fatal(err)
		}
		got[p.Addr()]++
		b.Cancel(p)
	}
	if ej := b.Ejected(now); len(ej) != 1 {
		t.Fatalf("ejected %v, want 1 of 10 (default max share 0.1)", ej)
	}
	if n := got["a"] + got["b"] + got["c"]; n < 100 {
		t.Fatalf("calls %v: want the endpoints over the cap to get calls", got)
	}
}

// TestSingleEndpointEjectedByFailuresStillTakesCallsInPanicMode: at least
// one endpoint may always be ejected, so a lone endpoint can be; panic mode
// (which counts consecutive-failure ejections as unhealthy) still sends it
// calls, and with panic mode off Pick refuses.
func TestSingleEndpointEjectedByFailuresStillTakesCallsInPanicMode(t *testing.T) {
	b, clk := newEjecting(t, Ejection{ConsecutiveFailures: 2}, nil, "a")
	run(t, b, clk, 2, nil, map[string]bool{"a": true})
	if got := b.Ejected(clk.Nanotime()); len(got) != 1 {
		t.Fatalf("ejected %v, want [a]", got)
	}
	if !b.Panicking(clk.Nanotime()) {
		t.Fatal("not panicking with the only endpoint ejected")
	}
	run(t, b, clk, 5, nil, nil)
	off := 0.0
	b2, err := New(rules.Balancer{PanicThreshold: &off}, Options{Clock: clk, Ejection: Ejection{ConsecutiveFailures: 2}})
	if err != nil {
		t.Fatal(err)
	}
	b2.Update([]string{"a"})
	clk.Advance(time.Minute)
	run(t, b2, clk, 2, nil, map[string]bool{"a": true})
	if _, err := b2.Pick(clk.Nanotime()); !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("Pick with the only endpoint ejected and panic mode off = %v, want ErrNoEndpoint", err)
	}
}

// rampBalancer returns a balancer with a 30s slow start and a short decay
// (so a failure streak's estimate is forgotten within the ejection), its
// endpoints past slow start.
func rampBalancer(t *testing.T, ej Ejection, brk *rules.Breaker, addrs ...string) (*Balancer, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Time{})
	rng := rand.New(rand.NewPCG(3, 4))
	b, err := New(rules.Balancer{SlowStart: rules.Duration(30 * time.Second), Decay: rules.Duration(100 * time.Millisecond)},
		Options{Clock: clk, IntN: rng.IntN, Float64: rng.Float64, Breaker: brk, Ejection: ej})
	if err != nil {
		t.Fatal(err)
	}
	b.Update(addrs)
	clk.Advance(time.Minute)
	return b, clk
}

// shares runs periods of 1000 calls of 10ms each (10s) and returns addr's
// share of the calls in each.
func shares(t *testing.T, b *Balancer, clk *clock.Fake, addr string, periods int) []float64 {
	t.Helper()
	lat := map[string]time.Duration{}
	for _, a := range b.Endpoints() {
		lat[a] = 10 * time.Millisecond
	}
	var out []float64
	for range periods {
		got := run(t, b, clk, 1000, lat, nil)
		out = append(out, float64(got[addr])/1000)
	}
	return out
}

// TestEndpointReturningFromConsecutiveFailureEjectionStartsSlowly: an
// endpoint took its full share the moment its ejection ended, so a
// just-recovered instance met the whole herd at once. It must ramp up over
// slow start as a new endpoint does.
func TestEndpointReturningFromConsecutiveFailureEjectionStartsSlowly(t *testing.T) {
	b, clk := rampBalancer(t, Ejection{ConsecutiveFailures: 3, BaseTime: 10 * time.Second}, nil, "a", "b")
	for i := 0; len(b.Ejected(clk.Nanotime())) == 0; i++ {
		if i == 100 {
			t.Fatal("a not ejected after 100 calls")
		}
		run(t, b, clk, 1, map[string]time.Duration{"b": 10 * time.Millisecond}, map[string]bool{"a": true})
	}
	clk.Advance(10 * time.Second) // the ejection ends
	if got := b.Ejected(clk.Nanotime()); len(got) != 0 {
		t.Fatalf("ejected %v after the ejection time", got)
	}
	s := shares(t, b, clk, "a", 6)
	if s[0] > 0.25 || !(s[0] < s[1] && s[1] < s[2]) || s[5] < 0.4 || s[5] > 0.6 {
		t.Fatalf("shares %v of a returning from ejection: want a ramp over slow start to about half", s)
	}
}

// TestEndpointReturningFromAnOpenBreakerStartsSlowly: an endpoint whose
// breaker closes after an ejection the cap admitted ramps up; one whose open
// breaker was over the cap kept its calls and takes its full share at once.
func TestEndpointReturningFromAnOpenBreakerStartsSlowly(t *testing.T) {
	b, clk := rampBalancer(t, Ejection{}, panicBreaker, "a", "b", "c", "d")
	now := clk.Nanotime()
	eject(t, b, now, "a")
	if got := b.Ejected(now); len(got) != 1 {
		t.Fatalf("ejected %v, want [a]", got)
	}
	eject(t, b, now, "b") // over the cap (one of four): b keeps its calls
	if got := b.Ejected(now); len(got) != 1 {
		t.Fatalf("ejected %v, want [a] only", got)
	}
	clk.Advance(time.Minute) // half-open: the next calls are probes
	run(t, b, clk, 100, nil, nil)
	for _, a := range []string{"a", "b"} {
		if st := b.Endpoint(a).brk.State(clk.Nanotime()); st != breaker.Closed {
			t.Fatalf("%s: breaker %v after successful probes, want closed", a, st)
		}
	}
	if sa := shares(t, b, clk, "a", 1)[0]; sa > 0.1 {
		t.Fatalf("share %.2f of a just back from ejection, want a slow start", sa)
	}
	b2, clk2 := rampBalancer(t, Ejection{}, panicBreaker, "a", "b", "c", "d")
	now = clk2.Nanotime()
	eject(t, b2, now, "a")
	b2.Ejected(now)
	eject(t, b2, now, "b")
	b2.Ejected(now)
	clk2.Advance(time.Minute)
	run(t, b2, clk2, 100, nil, nil)
	if s := shares(t, b2, clk2, "b", 1)[0]; s < 0.15 {
		t.Fatalf("share %.2f of b, never ejected (over the cap), want its full share", s)
	}
}

// TestNewValidatesEjection: bad options are refused naming the field.
func TestNewValidatesEjection(t *testing.T) {
	tests := []struct {
		name  string
		ej    Ejection
		field string
	}{
		{"negative failures", Ejection{ConsecutiveFailures: -1}, "ConsecutiveFailures"},
		{"negative base", Ejection{BaseTime: -1}, "BaseTime"},
		{"negative max", Ejection{MaxTime: -1}, "MaxTime"},
		{"share above 1", Ejection{MaxShare: 1.5}, "MaxShare"},
		{"negative share", Ejection{MaxShare: -0.1}, "MaxShare"},
		{"NaN share", Ejection{MaxShare: math.NaN()}, "MaxShare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(rules.Balancer{}, Options{Ejection: tt.ej})
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("New = %v, want ErrInvalidConfig naming %s", err, tt.field)
			}
		})
	}
}

// TestPickDoneWithEjectionDoesNotAllocate: counting failures and judging
// ejections against the cap stay off the heap.
func TestPickDoneWithEjectionDoesNotAllocate(t *testing.T) {
	b, clk := newEjecting(t, Ejection{ConsecutiveFailures: 3, MaxShare: 0.5}, panicBreaker, "a", "b", "c", "d")
	now := clk.Nanotime()
	i := 0
	f := func() {
		p, err := b.Pick(now)
		if err != nil {
			t.Fatal(err)
		}
		i++
		b.Done(p, now, i%2 == 0)
	}
	if n := testing.AllocsPerRun(500, f); n != 0 {
		t.Fatalf("%v allocations, want 0", n)
	}
}

// BenchmarkPickDoneWithEjection is Pick and Done over ten endpoints with
// consecutive-failure ejection on; one call in four fails.
func BenchmarkPickDoneWithEjection(b *testing.B) {
	ej := Ejection{ConsecutiveFailures: 5}
	bal, _ := New(rules.Balancer{SlowStart: rules.Duration(time.Nanosecond)}, Options{Breaker: &rules.Breaker{}, Ejection: ej})
	var addrs []string
	for i := range 10 {
		addrs = append(addrs, string(rune('a'+i)))
	}
	bal.Update(addrs)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := int64(time.Second)
		i := 0
		for pb.Next() {
			now += 1000
			i++
			p, err := bal.Pick(now)
			if err != nil {
				b.Fatal(err)
			}
			bal.Done(p, now+int64(time.Millisecond), i%4 == 0)
		}
	})
}
