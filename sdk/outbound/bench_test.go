package outbound

import (
	"testing"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// BenchmarkBeginEnd is one protected call (breaker, bulkhead, metrics) with
// the time passed in, as transports do after reading a coarse clock.
func BenchmarkBeginEnd(b *testing.B) {
	s, _ := New(Options{Clock: clock.NewFake(clock.Real{}.Now())})
	_ = s.Apply([]rules.Downstream{{Name: "db", Breaker: &rules.Breaker{}, Bulkhead: &rules.Bulkhead{MaxConcurrent: 1 << 20}}})
	d := s.Get("db")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var now int64
		for pb.Next() {
			now += 1000
			c, err := d.Begin(now)
			if err != nil {
				b.Fatal(err)
			}
			c.End(now+1e6, false, false)
		}
	})
}

// BenchmarkBeginCancel is a protected call its caller cancels before it ends.
func BenchmarkBeginCancel(b *testing.B) {
	s, _ := New(Options{Clock: clock.NewFake(clock.Real{}.Now())})
	_ = s.Apply([]rules.Downstream{{Name: "db", Breaker: &rules.Breaker{}, Bulkhead: &rules.Bulkhead{MaxConcurrent: 1 << 20}}})
	d := s.Get("db")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var now int64
		for pb.Next() {
			now += 1000
			c, err := d.Begin(now)
			if err != nil {
				b.Fatal(err)
			}
			c.Cancel()
		}
	})
}
