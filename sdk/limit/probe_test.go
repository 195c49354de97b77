package limit

import (
	"testing"
	"time"

	"governor.dev/governor/sdk/rules"
)

// A probe restores the saved limit, capped at the limit of its fastest
// window plus the tolerance, but only if that window used its limit: one
// that did not (the load fell, the tail of a pause drained) says nothing
// about what the limit should be.
func TestProbeRestoreCap(t *testing.T) {
	const ms = float64(time.Millisecond)
	tests := []struct {
		name string
		used bool
		want float64
	}{
		{"fastest window used its limit: capped", true, 12}, // 8 x 1.5
		{"fastest window did not use it: saved limit", false, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCore(t, rules.Concurrency{}, WithSeed(1))
			c.noLoad, c.cur = 10*ms, 8
			c.probe = probeState{active: true, saved: 20, prev: 30 * ms, best: 30 * ms, bestLimit: 20}
			// Faster: lower again, then no longer faster: conclude.
			c.probeWindow(&window{start: 0, end: int64(100 * ms), count: 20, avgRTT: 8 * ms, used: tt.used})
			if !c.probe.active || c.cur != 6 {
				t.Fatalf("after a faster probe window: active %v, limit %v; want still probing at 6", c.probe.active, c.cur)
			}
			c.probeWindow(&window{start: int64(200 * ms), end: int64(300 * ms), count: 20, avgRTT: 8.2 * ms, used: tt.used})
			if c.probe.active {
				t.Fatal("probe still active after a window that was not faster")
			}
			if c.noLoad != 8*ms || c.cur != tt.want {
				t.Fatalf("no-load RTT %v, limit %v; want 8ms, %v", time.Duration(c.noLoad), c.cur, tt.want)
			}
		})
	}
}
