package sim

import (
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
)

// feed sends n samples of rtt, one per millisecond, with inflight requests
// in flight, and returns the policy's lowest limit on the way and the time.
func feed(p Policy, from time.Duration, n int, rtt time.Duration, inflight int) (int, time.Duration) {
	t := from
	lowest := p.Limit()
	for range n {
		t += time.Millisecond
		p.Done(nil, t, rtt, inflight, false)
		lowest = min(lowest, p.Limit())
	}
	return lowest, t
}

func TestReimplementationsReactToLatency(t *testing.T) {
	tests := []struct {
		name string
		new  func() Policy
	}{
		{"netflix-gradient2-reimpl", func() Policy { return newGradient2() }},
		{"netflix-vegas-reimpl", func() Policy { return newVegas() }},
		{"envoy-gradient-reimpl", func() Policy { p, _ := newEnvoy(nil); return p }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.new()
			// Healthy and busy: 10 ms round trips with the limit in use.
			l0 := p.Limit()
			_, at := feed(p, 0, 5000, 10*time.Millisecond, 1000)
			grown := p.Limit()
			if grown < l0 {
				t.Fatalf("limit fell from %d to %d while latency was flat", l0, grown)
			}
			// Latency quadruples: the limit must come down (Vegas later
			// re-baselines on its probe and grows back: its known drift).
			shrunk, _ := feed(p, at, 5000, 40*time.Millisecond, 1000)
			if shrunk >= grown {
				t.Fatalf("limit did not shrink when latency quadrupled: %d -> %d", grown, shrunk)
			}
		})
	}
}

func TestCPUModelsEngageOnlyWhenCPUIsHigh(t *testing.T) {
	for _, name := range []string{"aegis-bbr-reimpl", "gozero-shedder-reimpl"} {
		t.Run(name, func(t *testing.T) {
			cpu := 0.0
			inflight := 0
			env := &Env{Clock: clock.NewFake(time.Time{}), CPU: func() float64 { return cpu }, Inflight: func() int { return inflight }}
			p, err := Factories()[name](env)
			if err != nil {
				t.Fatal(err)
			}
			// Learn: 100 requests/s of 10 ms for 3 s -> max in flight ~1.
			var now time.Duration
			for range 300 {
				now += 10 * time.Millisecond
				p.Done(nil, now, 10*time.Millisecond, 1, false)
			}
			inflight = 50
			if _, ok := p.Admit(now, 1, 50); !ok {
				t.Fatal("rejected at idle CPU")
			}
			// CPU pegged for 30 s: the EMA crosses the threshold and the
			// shedder refuses far above the learned in-flight.
			cpu = 1
			rejected := false
			for range 3000 {
				now += 10 * time.Millisecond
				p.Done(nil, now, 10*time.Millisecond, 1, false)
				if _, ok := p.Admit(now, 1, 50); !ok {
					rejected = true
					break
				}
			}
			if !rejected {
				t.Fatal("never rejected with CPU at 100% and 50 in flight")
			}
		})
	}
}

// After a gap longer than the whole window every bucket is stale: aegis'
// and go-zero's rolling windows reset them all.
func TestBucketsForgetEverythingAfterAWholeWindow(t *testing.T) {
	b := newBuckets(10, 100*time.Millisecond)
	b.add(550*time.Millisecond, 7)
	b.add(650*time.Millisecond, 3)
	var sum, count float64
	b.each(100*time.Second, func(s, c float64) { sum += s; count += c })
	if sum != 0 || count != 0 {
		t.Fatalf("100 s later the 1 s window still holds %v in %v samples", sum, count)
	}
	// A gap shorter than the window keeps the buckets still inside it.
	b.add(100*time.Second, 5)
	sum = 0
	b.each(100*time.Second+500*time.Millisecond, func(s, _ float64) { sum += s })
	if sum != 5 {
		t.Fatalf("the window holds %v, want the 5 added 0.5 s earlier", sum)
	}
}
