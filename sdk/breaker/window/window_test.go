package window

import (
	"testing"
	"time"
)

func TestRingSlides(t *testing.T) {
	r := New(8*time.Second, 8)
	sec := int64(time.Second)
	tests := []struct {
		name string
		at   int64
		add  [Counters]int64
		want [Counters]int64
	}{
		{"first bucket", 0, [Counters]int64{1, 2, 3}, [Counters]int64{1, 2, 3}},
		{"same bucket", sec / 2, [Counters]int64{1, 0, 0}, [Counters]int64{2, 2, 3}},
		{"later bucket", 5 * sec, [Counters]int64{1, 1, 1}, [Counters]int64{3, 3, 4}},
		{"first bucket still inside", 7*sec + sec/2, [Counters]int64{}, [Counters]int64{3, 3, 4}},
		{"first bucket expired", 8 * sec, [Counters]int64{}, [Counters]int64{1, 1, 1}},
		{"everything expired", 15 * sec, [Counters]int64{}, [Counters]int64{}},
		{"reuse a recycled bucket", 20 * sec, [Counters]int64{4, 0, 0}, [Counters]int64{4, 0, 0}},
	}
	for _, tt := range tests {
		for i, d := range tt.add {
			if d != 0 {
				r.Add(tt.at, i, d)
			}
		}
		if got := r.Sum(tt.at); got != tt.want {
			t.Fatalf("%s: Sum(%d) = %v, want %v", tt.name, tt.at, got, tt.want)
		}
	}
}

func TestRingDropsSamplesOlderThanTheirBucket(t *testing.T) {
	r := New(time.Second, 8)
	ms := int64(time.Millisecond)
	for range 20 { // every stripe of the slot
		r.Add(1500*ms, 0, 1)
	}
	r.Add(500*ms, 0, 1) // same slot, previous epoch
	if got := r.Sum(1500 * ms); got[0] != 20 {
		t.Fatalf("Sum = %v, want the stale sample dropped", got)
	}
}

// A count added at an earlier time is taken back from the bucket that
// holds it (the throttle takes back the request of a cancelled call), and a
// bucket that has left the window has nothing to give back.
func TestRingTakesBackFromAnEarlierBucket(t *testing.T) {
	r := New(8*time.Second, 8)
	sec := int64(time.Second)
	r.Add(sec, 0, 2)
	r.Add(5*sec, 0, 1)
	r.Add(sec, 0, -1) // at 5s, back into the bucket of 1s
	if got := r.Sum(5 * sec)[0]; got != 2 {
		t.Fatalf("Sum(5s) = %d, want 2", got)
	}
	if got := r.Sum(9 * sec)[0]; got != 1 { // the bucket of 1s left with its net count
		t.Fatalf("Sum(9s) = %d, want 1", got)
	}
	r.Add(sec, 0, -1) // too late: nothing to take back
	if got := r.Sum(9 * sec)[0]; got != 1 {
		t.Fatalf("Sum(9s) after a late take-back = %d, want 1", got)
	}
}

func TestRingAdd2AndReset(t *testing.T) {
	r := New(time.Second, 4)
	r.Add2(0, 0, 2, 2, 5)
	r.Add2(0, 1, 0, 2, 1)
	if got, want := r.Sum(0), [Counters]int64{2, 0, 6}; got != want {
		t.Fatalf("Sum = %v, want %v", got, want)
	}
	r.Reset()
	if got := r.Sum(0); got != [Counters]int64{} {
		t.Fatalf("after Reset Sum = %v", got)
	}
	if r.Window() != time.Second || r.BucketWidth() != 250*time.Millisecond {
		t.Fatalf("Window %v BucketWidth %v", r.Window(), r.BucketWidth())
	}
	if n := New(time.Second, 5).buckets; n != 8 {
		t.Fatalf("5 buckets rounded to %d, want 8", n)
	}
	if n := New(time.Second, 0).buckets; n != DefaultBuckets {
		t.Fatalf("default buckets %d", n)
	}
}

func TestRingConcurrentAddsAreCounted(t *testing.T) {
	r := New(time.Second, 10)
	const workers, per = 4, 1000
	done := make(chan struct{})
	for range workers {
		go func() {
			for range per {
				r.Add(0, 0, 1)
			}
			done <- struct{}{}
		}()
	}
	for range workers {
		<-done
	}
	// All adds fall into one epoch, so nothing is recycled and nothing lost.
	if got := r.Sum(0)[0]; got != workers*per {
		t.Fatalf("Sum = %d, want %d", got, workers*per)
	}
}

func BenchmarkRingAdd(b *testing.B) {
	r := New(10*time.Second, 10)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var now int64
		for pb.Next() {
			now += 100
			r.Add(now, 0, 1)
		}
	})
}
