package inhibit

import (
	"fmt"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

// storm returns n firing alerts of a shared dependency's outage: n/5
// services (at most 2,000), a P0 in every fourth of them, and P1/P2
// alerts of several instances in every service.
func storm(n int) []alerts.Alert {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	svcs := min(max(n/5, 1), 2000)
	out := make([]alerts.Alert, 0, n)
	for i := range n {
		svc := i % svcs
		l := alerts.Labels{"service": fmt.Sprintf("svc%04d", svc), "instance": fmt.Sprintf("i%d", i/svcs)}
		switch {
		case i < svcs && svc%4 == 0:
			l["alertname"], l["severity"] = "DependencyDown", "P0"
		case i%2 == 0:
			l["alertname"], l["severity"] = "HighLoad", "P1"
		default:
			l["alertname"], l["severity"] = "Shedding", "P2"
		}
		out = append(out, alerts.Alert{Labels: l, StartsAt: t0})
	}
	return out
}

// BenchmarkMutedByFlush is the manager's former call pattern: whether each of n
// firing alerts is inhibited, against the same n, under the default rule.
func BenchmarkMutedByFlush(b *testing.B) {
	in, err := New(Defaults())
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1000, 10000} {
		firing := storm(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				muted := 0
				for _, a := range firing {
					if _, ok := in.MutedBy(a.Labels, firing); ok {
						muted++
					}
				}
				if muted == 0 {
					b.Fatal("nothing inhibited")
				}
			}
		})
	}
}

// BenchmarkSnapshotFlush is BenchmarkMutedByFlush through a Snapshot,
// built once per flush as the manager does.
func BenchmarkSnapshotFlush(b *testing.B) {
	in, err := New(Defaults())
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1000, 10000} {
		firing := storm(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				snap := in.Snapshot(firing)
				muted := 0
				for _, a := range firing {
					if _, ok := snap.MutedBy(a.Labels); ok {
						muted++
					}
				}
				if muted == 0 {
					b.Fatal("nothing inhibited")
				}
			}
		})
	}
}
