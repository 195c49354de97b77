package breaker

import (
	"sync/atomic"
	"testing"
	"time"

	"governor.dev/governor/sdk/rules"
)

// BenchmarkAllowRecord is the hot path of a closed breaker: one Allow and one
// successful Record per call, with the time passed in as the SDK does.
func BenchmarkAllowRecord(b *testing.B) {
	g, _ := New(rules.Breaker{}, Options{})
	var clock atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := clock.Add(1)
		for pb.Next() {
			now += 50
			tk, err := g.Allow(now)
			if err != nil {
				b.Fatal(err)
			}
			g.Record(tk, now, time.Millisecond, false)
		}
	})
}

func BenchmarkThrottleAllowRecord(b *testing.B) {
	g, _ := New(rules.Breaker{Kind: rules.BreakerKindThrottle}, Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var now int64
		for pb.Next() {
			now += 50
			tk, err := g.Allow(now)
			if err == nil {
				g.Record(tk, now, time.Millisecond, false)
			}
		}
	})
}

// BenchmarkAllowRelease is a call its caller cancels: one Allow and one
// Release, for both kinds.
func BenchmarkAllowRelease(b *testing.B) {
	for _, kind := range []string{rules.BreakerKindBreaker, rules.BreakerKindThrottle} {
		b.Run(kind, func(b *testing.B) {
			g, _ := New(rules.Breaker{Kind: kind}, Options{})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var now int64
				for pb.Next() {
					now += 50
					if tk, err := g.Allow(now); err == nil {
						g.Release(tk)
					}
				}
			})
		})
	}
}
