package outbound

import (
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestApplyWhileCalling swaps rules back and forth while calls run, and
// checks that every bulkhead slot taken is given back.
func TestApplyWhileCalling(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s, err := New(Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	a := []rules.Downstream{{Name: "db", Breaker: &rules.Breaker{}, Bulkhead: &rules.Bulkhead{MaxConcurrent: 8}}}
	b := []rules.Downstream{{Name: "db", Breaker: &rules.Breaker{MinCalls: 50}, Bulkhead: &rules.Bulkhead{MaxConcurrent: 4},
		Retry: &rules.Retry{}}}
	if err := s.Apply(a); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				d := s.Get("db")
				c, err := d.Begin(clk.Nanotime())
				if err != nil {
					continue
				}
				d.Request(clk.Nanotime())
				c.End(clk.Nanotime(), i%7 == 0, false)
			}
		}()
	}
	for i := range 200 {
		rs := a
		if i%2 == 1 {
			rs = b
		}
		if err := s.Apply(rs); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	wg.Wait()
	if n := s.Get("db").Bulkhead().InFlight(); n != 0 {
		t.Fatalf("%d bulkhead slots never given back", n)
	}
}
