package alerts

import "testing"

func BenchmarkFingerprint(b *testing.B) {
	l := Labels{"alertname": "GovernorCriticalShed", "service": "checkout", "severity": "P0", "instance": "10.0.0.1:8080"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = l.Fingerprint()
		}
	})
}
