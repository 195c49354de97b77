package limit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/rules"
)

// BenchmarkObserve measures the hot path: one Observe per request, windows
// closing as the caller's clock moves (1 µs of virtual time per call, so a
// 100 ms window closes every 100k calls and the closing cost is included).
func BenchmarkObserve(b *testing.B) {
	for _, alg := range []string{rules.AlgorithmGradient, rules.AlgorithmLittle, rules.AlgorithmFixed} {
		b.Run(alg, func(b *testing.B) {
			l, err := limit.New(rules.Concurrency{Algorithm: alg, Max: 1000}, nil)
			if err != nil {
				b.Fatal(err)
			}
			var clock atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				now := clock.Add(int64(time.Second))
				for pb.Next() {
					now += 1000
					l.Observe(now, int64(5*time.Millisecond), 10, false)
				}
			})
		})
	}
}

// BenchmarkLimit measures reading the limit.
func BenchmarkLimit(b *testing.B) {
	l, err := limit.New(rules.Concurrency{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		n := 0
		for pb.Next() {
			n += l.Limit()
		}
		_ = n
	})
}
