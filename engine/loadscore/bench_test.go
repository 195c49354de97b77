package loadscore

import (
	"fmt"
	"testing"
	"time"

	"governor.dev/governor/engine/signals"
)

// fleetSnapshot is services × instances entries with every signal known.
func fleetSnapshot(services, instances int) *signals.Snapshot {
	snap := &signals.Snapshot{At: t0, Scope: signals.PerInstance, Entries: make(map[signals.Key]*signals.Entry, services*instances)}
	for s := range services {
		for i := range instances {
			e := entry(fmt.Sprintf("svc-%04d", s), map[signals.Signal]float64{
				signals.CPU: float64(i%10) / 10, signals.Memory: 300 * mib, signals.LatencyP99: 0.1,
				signals.InFlight: 10, signals.Limit: 40, signals.QueueDelayP99: 0.002,
			})
			e.Key.Instance = fmt.Sprintf("10.0.%d.%d:8080", s/250, i)
			snap.Entries[e.Key] = e
		}
	}
	return snap
}

// BenchmarkUpdate scores a fleet of 1000 services × 10 instances per op.
func BenchmarkUpdate(b *testing.B) {
	snap := fleetSnapshot(1000, 10)
	tr, err := New(Options{Weights: Weights{CPU: 0.4, Memory: 0.3, Latency: 0.3, InFlight: 0.2, Queue: 0.1}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		snap.At = snap.At.Add(15 * time.Second)
		if got := tr.Update(snap); len(got) != len(snap.Entries) {
			b.Fatal(len(got))
		}
	}
	b.ReportMetric(float64(len(snap.Entries)), "entries/op")
}

// BenchmarkCompute scores one entry, from many goroutines at once.
func BenchmarkCompute(b *testing.B) {
	e := fleetSnapshot(1, 1).Entries
	var one *signals.Entry
	for _, v := range e {
		one = v
	}
	o, err := Options{Weights: Weights{CPU: 0.4, Memory: 0.3, Latency: 0.3, InFlight: 0.2, Queue: 0.1}}.normalize()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !Compute(&o, one).Known {
				b.Fatal("unknown")
			}
		}
	})
}
