package outbound

import (
	"testing"
	"time"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/bulkhead"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

type observed struct{ n int }

func (o *observed) Limit() int                            { return 10 }
func (o *observed) Observe(now, rtt int64, _ int, _ bool) { o.n++ }

// TestEndUnmeasuredGivesNoLatencySample: a long-lived stream ends with an
// outcome but its lifetime is no latency: it must not feed the adaptive
// bulkhead's limiter, count as a slow call for the breaker, or land in the
// latency histogram, while its slot is given back and its outcome counted.
func TestEndUnmeasuredGivesNoLatencySample(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	lim := &observed{}
	s, err := New(Options{Clock: clk, NewLimiter: func(rules.Concurrency, clock.Clock) (bulkhead.Limiter, error) { return lim, nil }})
	if err != nil {
		t.Fatal(err)
	}
	b := brk()
	b.SlowCallRatio, b.SlowCall = 0.5, rules.Duration(time.Second)
	if err := s.Apply([]rules.Downstream{{Name: "watch", Breaker: b, Bulkhead: &rules.Bulkhead{MaxConcurrent: 10, Adaptive: true}}}); err != nil {
		t.Fatal(err)
	}
	d := s.Get("watch")
	for range 10 {
		c, err := d.Begin(clk.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Minute) // a stream that lived ten minutes
		c.EndUnmeasured(clk.Nanotime(), false)
	}
	if lim.n != 0 {
		t.Fatalf("the limiter observed %d stream lifetimes, want 0", lim.n)
	}
	if n := d.Bulkhead().InFlight(); n != 0 {
		t.Fatalf("%d bulkhead slots held, want 0", n)
	}
	if st := d.Breaker().State(clk.Nanotime()); st != breaker.Closed {
		t.Fatalf("breaker %v after ten long streams that succeeded, want closed (no slow calls)", st)
	}
	snap := d.stats.snapshot()
	if snap.calls[iSuccess] != 10 || snap.sum != 0 {
		t.Fatalf("successes %d, latency sum %d; want 10 and 0", snap.calls[iSuccess], snap.sum)
	}
}
