package limit

import (
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestObserveShardMatchesObserve feeds the same samples to two limiters, one
// through Observe and one through ObserveShard with arbitrary hints: every
// decided window, and so every limit, must be the same.
func TestObserveShardMatchesObserve(t *testing.T) {
	for _, alg := range []string{rules.AlgorithmGradient, rules.AlgorithmLittle, rules.AlgorithmFixed} {
		t.Run(alg, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			cfg := rules.Concurrency{Algorithm: alg, Initial: 40, Max: 200}
			opts := []Option{WithSeed(7), WithWindow(100 * time.Millisecond), WithMinSamples(10)}
			plain, err := New(cfg, clk, opts...)
			if err != nil {
				t.Fatal(err)
			}
			hinted, err := New(cfg, clk, opts...)
			if err != nil {
				t.Fatal(err)
			}
			h, ok := hinted.(HintedObserver)
			if !ok {
				t.Fatalf("%T does not implement HintedObserver", hinted)
			}
			start := clk.Nanotime()
			for i := range 20000 {
				now := start + int64(i)*int64(100*time.Microsecond)
				// The latency rises with time, so the limit moves.
				rtt := int64(time.Millisecond) + int64(i)*int64(time.Microsecond)/10
				inflight := 1 + i%60
				dropped := i%97 == 0
				plain.Observe(now, rtt, inflight, dropped)
				h.ObserveShard(uint32(i*2654435761), now, rtt, inflight, dropped)
				if p, q := plain.Limit(), hinted.Limit(); p != q {
					t.Fatalf("sample %d: Observe gives limit %d, ObserveShard %d", i, p, q)
				}
			}
			ps, hs := plain.(Inspector).Snapshot(), hinted.(Inspector).Snapshot()
			if ps != hs {
				t.Fatalf("snapshots differ:\nObserve      %+v\nObserveShard %+v", ps, hs)
			}
			if alg != rules.AlgorithmFixed && (ps.Windows == 0 || ps.Limit == cfg.Initial) {
				t.Fatalf("the limit never moved (%+v): the test compares nothing", ps)
			}
		})
	}
}
