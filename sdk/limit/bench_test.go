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
// "varying" admits with an in-flight count that keeps changing, so new
// per-shard maxima (a compare-and-swap) and drops (1%) are included too.
func BenchmarkObserve(b *testing.B) {
	for _, bc := range []struct {
		name    string
		alg     string
		varying bool
	}{
		{"gradient", rules.AlgorithmGradient, false},
		{"gradient/varying", rules.AlgorithmGradient, true},
		{"little", rules.AlgorithmLittle, false},
		{"fixed", rules.AlgorithmFixed, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := limit.New(rules.Concurrency{Algorithm: bc.alg, Max: 1000}, nil)
			if err != nil {
				b.Fatal(err)
			}
			var clock atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				now := clock.Add(int64(time.Second))
				i := 0
				for pb.Next() {
					now += 1000
					inflight, dropped := 10, false
					if bc.varying {
						i++
						inflight, dropped = 1+i%200, i%100 == 0
					}
					l.Observe(now, int64(5*time.Millisecond), inflight, dropped)
				}
			})
		})
	}
}

// BenchmarkWindowClose measures closing a window and recomputing the limit,
// the work one Observe per window does (every call here closes one).
func BenchmarkWindowClose(b *testing.B) {
	l, err := limit.New(rules.Concurrency{}, nil, limit.WithMinSamples(1), limit.WithWindow(time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	now := int64(0)
	for b.Loop() {
		now += int64(time.Millisecond)
		l.Observe(now, int64(5*time.Millisecond), 15, false)
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
