package watch

import (
	"testing"
)

// BenchmarkStableValue is the per-instance cost of one new version: size and
// JSON checks, strict decoding, checksum, validation, apply and the ACK.
func BenchmarkStableValue(b *testing.B) {
	values := make([][]byte, 1024)
	for i := range values {
		values[i] = envelopeBytes(b, "checkout", int64(i+1))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s, _, _, _ := newTestState(b, "checkout", "i", nil)
		s.send = func(*Report) {}
		i := 0
		for pb.Next() {
			if i == len(values) {
				s, _, _, _ = newTestState(b, "checkout", "i", nil)
				s.send = func(*Report) {}
				i = 0
			}
			s.onStable(values[i])
			i++
		}
	})
}
