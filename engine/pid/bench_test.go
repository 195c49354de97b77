package pid

import (
	"testing"
	"time"
)

// BenchmarkUpdate measures one controller step; each goroutine has its own
// controller, as each loop in the engine does.
func BenchmarkUpdate(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Kd, cfg.RateLimit, cfg.Deadband = 0.2, 0.5, 0.01
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c, err := New(cfg)
		if err != nil {
			b.Error(err)
			return
		}
		t0 := time.Unix(0, 0)
		i := 0
		for pb.Next() {
			i++
			c.Update(t0.Add(time.Duration(i)*time.Second), 0.5, float64(i%100)/100)
		}
	})
}
