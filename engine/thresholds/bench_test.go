package thresholds

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkObserve is the cost of one sample of one series (ns/op is
// ns/sample); each goroutine follows its own series, as the engine does.
func BenchmarkObserve(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	vals := make([]float64, 4096)
	for i := range vals {
		vals[i] = 50 + 10*rng.NormFloat64()
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d, err := New(DefaultOptions())
		if err != nil {
			b.Error(err)
			return
		}
		t := time.Unix(0, 0)
		i := 0
		for pb.Next() {
			t = t.Add(5 * time.Minute)
			d.Observe(t, vals[i&4095])
			i++
		}
	})
}

func BenchmarkSketchAdd(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s, err := NewSketch(DefaultSketchOptions())
		if err != nil {
			b.Error(err)
			return
		}
		t := time.Unix(0, 0)
		v := 0.001
		for pb.Next() {
			t = t.Add(time.Second)
			v *= 1.001
			if v > 10 {
				v = 0.001
			}
			s.Add(t, v)
		}
	})
}
