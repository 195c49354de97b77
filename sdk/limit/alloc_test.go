//go:build !race

// The allocation tests: the race detector allocates, so they are built
// without it only (make test runs them in its own step, -run DoesNotAllocate).

package limit

import (
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Observe allocates nothing, including the calls that close a window, probe
// and recompute the limit.
func TestObserveDoesNotAllocate(t *testing.T) {
	for _, alg := range []string{rules.AlgorithmGradient, rules.AlgorithmLittle} {
		l, err := New(rules.Concurrency{Algorithm: alg, ProbeInterval: rules.Duration(time.Second)}, clock.NewFake(time.Time{}),
			WithMinSamples(1), WithWindow(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		now, i := int64(0), 0
		allocs := testing.AllocsPerRun(5000, func() {
			i++
			now += int64(time.Millisecond) // every call closes a window
			l.Observe(now, int64(time.Duration(1+i%7)*time.Millisecond), 1+i%30, i%50 == 0)
		})
		if allocs != 0 {
			t.Fatalf("%s: %v allocations per Observe", alg, allocs)
		}
		if s := l.(Inspector).Snapshot(); s.Windows < 4000 || s.Probes == 0 {
			t.Fatalf("%s: the run did not exercise windows and probes: %+v", alg, s)
		}
	}
}

func TestRefusedDoesNotAllocate(t *testing.T) {
	l, err := New(rules.Concurrency{}, clock.NewFake(time.Time{}), WithWindow(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r := l.(RefusalObserver)
	now, i := int64(0), 0
	allocs := testing.AllocsPerRun(5000, func() {
		i++
		now += int64(time.Millisecond)
		if i%20 == 0 {
			l.Observe(now, int64(time.Millisecond), 2, false) // ends a stall
		}
		r.Refused(now)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Refused", allocs)
	}
	if s := l.(Inspector).Snapshot(); s.Stalls == 0 {
		t.Fatalf("the run did not exercise stall cuts: %+v", s)
	}
}
