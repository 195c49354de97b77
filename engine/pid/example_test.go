package pid_test

import (
	"fmt"
	"time"

	"governor.dev/governor/engine/pid"
)

// Raise a concurrency limit while p99 latency is under
// its 200 ms target, lower it when latency rises above. The controller starts
// in manual at the current limit so the hand-over to automatic is bumpless.
func Example() {
	cfg := pid.DefaultConfig()
	cfg.Kp, cfg.Ki = 200, 40 // limit units per second of latency error
	cfg.OutMin, cfg.OutMax = 10, 1000
	cfg.RateLimit = 20 // at most 20 units per second
	cfg.Deadband = 0.01
	c, err := pid.New(cfg)
	if err != nil {
		panic(err)
	}
	_ = c.SetManual(100) // the limit in force today
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c.Update(t0, 0.200, 0.180)
	c.SetAuto()
	for i, p99 := range []float64{0.180, 0.190, 0.260, 0.300, 0.240} {
		limit, _ := c.Update(t0.Add(time.Duration(i+1)*5*time.Second), 0.200, p99)
		s := c.State()
		fmt.Printf("p99 %.0fms -> limit %.1f (P %.1f, I %.1f, D %.1f)\n", p99*1000, limit, s.P, s.I, s.D)
	}
	// Output:
	// p99 180ms -> limit 102.0 (P 2.0, I 100.0, D 0.0)
	// p99 190ms -> limit 100.0 (P 0.0, I 100.0, D 0.0)
	// p99 260ms -> limit 80.0 (P -10.0, I 90.0, D 0.0)
	// p99 300ms -> limit 54.0 (P -18.0, I 72.0, D 0.0)
	// p99 240ms -> limit 60.0 (P -6.0, I 66.0, D 0.0)
}
