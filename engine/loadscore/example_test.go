package loadscore_test

import (
	"fmt"
	"time"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/signals"
)

func Example() {
	tr, _ := loadscore.New(loadscore.Options{
		Targets: loadscore.Targets{CPUCores: 2, MemoryBytes: 1 << 30, Latency: 200 * time.Millisecond},
	})
	e := &signals.Entry{Key: signals.Key{Service: "checkout"}, Values: map[signals.Signal]signals.Value{
		signals.CPU:        signals.KnownValue(1.5), // of 2 cores: 0.75
		signals.Memory:     signals.Unknown(signals.Stale, "newest sample 5m0s old"),
		signals.LatencyP99: signals.KnownValue(0.3), // of 200ms: clamped to 1
	}}
	sc := tr.Observe(time.Unix(0, 0), e)
	fmt.Printf("score %.3f overloaded %v\n", sc.Value, sc.Overloaded)
	for _, c := range sc.Raw.Terms {
		if c.Known {
			fmt.Printf("%-7s %.2f × %.3f = %.3f\n", c.Term, c.Normalized, c.EffectiveWeight, c.Contribution)
		} else {
			fmt.Printf("%-7s %s\n", c.Term, c.Reason)
		}
	}
	// Output:
	// score 0.857 overloaded true
	// cpu     0.75 × 0.571 = 0.429
	// memory  unknown (stale: newest sample 5m0s old)
	// latency 1.00 × 0.429 = 0.429
}
