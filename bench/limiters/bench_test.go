package limiters

import (
	"context"
	"testing"
	"time"

	"governor.dev/governor/sdk/rules"
)

// hotPathNames are the BenchmarkAdmit sub-benchmarks, in the order the
// issue names them, then the baselines.
var hotPathNames = []string{"governor", "aegis-bbr", "failsafe-adaptive", "gozero-shedder", "xrate", "static", "none"}

// BenchmarkAdmit measures one admit + release with a latency sample passed
// in, from b.RunParallel goroutines. Limits are set high enough that nothing
// is rejected: this is the cost every admitted request pays.
func BenchmarkAdmit(b *testing.B) {
	for _, name := range hotPathNames {
		if _, ok := factories[name]; !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			l, err := New(name, Options{CapacityRPS: 1e12, StaticLimit: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			req := Request{Class: rules.ClassCore, User: 42}
			const latency = 5 * time.Millisecond
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, err := l.Acquire(ctx, req)
					if err != nil {
						continue
					}
					l.Release(t, latency, false)
				}
			})
		})
	}
}
