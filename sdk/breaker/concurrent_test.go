package breaker

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestConcurrentProbesNeverExceedTheConfiguredCount hammers a breaker from
// several goroutines while the clock moves, and checks that no half-open
// round ever admits more than HalfOpenProbes calls.
func TestConcurrentProbesNeverExceedTheConfiguredCount(t *testing.T) {
	const probes = 2
	clk := clock.NewFake(time.Time{})
	g, err := New(rules.Breaker{MinCalls: 5, OpenBase: rules.Duration(time.Millisecond),
		OpenMax: rules.Duration(4 * time.Millisecond), HalfOpenProbes: probes, Window: rules.Duration(100 * time.Millisecond)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		granted = map[Ticket]int{}
		wg      sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 5000 {
				if i%10 == 0 {
					clk.Advance(100 * time.Microsecond) // the workers move the clock too
				}
				now := clk.Nanotime()
				tk, err := g.Allow(now)
				if err != nil {
					continue
				}
				if stateOf(uint64(tk)) == HalfOpen {
					mu.Lock()
					granted[tk]++
					mu.Unlock()
				}
				g.Record(tk, clk.Nanotime(), 0, rng.IntN(3) != 0) // two in three fail
			}
		}()
	}
	wg.Wait()
	if len(granted) < 5 {
		t.Fatalf("only %d half-open rounds", len(granted))
	}
	t.Logf("%d half-open rounds", len(granted))
	for tk, n := range granted {
		if n > probes {
			t.Fatalf("half-open generation %d admitted %d probes, want at most %d", tk>>2, n, probes)
		}
	}
}
