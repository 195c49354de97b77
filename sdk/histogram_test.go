package governor

import (
	"sync"
	"testing"
	"time"
)

// naiveHist is the reference: one bucket count and the sum, unpacked.
type naiveHist struct {
	counts [len(durationBounds) + 1]uint64
	sum    int64
}

func (n *naiveHist) observe(d time.Duration) {
	i := 0
	for i < len(durationBounds) && d > durationBounds[i] {
		i++
	}
	n.counts[i]++
	n.sum += int64(d)
}

func TestDurationHistMatchesUnpacked(t *testing.T) {
	tests := []struct {
		name  string
		d     time.Duration
		times int
	}{
		{"fast", 300 * time.Microsecond, 1000},
		{"bound exactly", time.Millisecond, 10},
		{"zero", 0, 5},
		{"negative", -time.Millisecond, 3},
		{"slow", 3 * time.Second, 100},
		{"count fold", 2 * time.Millisecond, 3 << 19},
		{"sum fold", time.Minute, 200},
		{"direct", histDirect + 1, 4},
		{"huge", 1 << 62, 2},
	}
	var h durationHist
	var want naiveHist
	for _, tt := range tests {
		for range tt.times {
			h.observe(tt.d)
			want.observe(tt.d)
		}
		var got naiveHist
		h.read(&got.counts, &got.sum)
		if got != want {
			t.Fatalf("after %s: got %v sum %d, want %v sum %d", tt.name, got.counts, got.sum, want.counts, want.sum)
		}
	}
	if h.folds.Load() == 0 {
		t.Fatal("no fold happened: the test does not exercise folding")
	}
}

func TestDurationHistReadDuringFolds(t *testing.T) {
	const workers, each = 4, 1 << 19
	var h durationHist
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				h.observe(2 * time.Millisecond)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var last uint64
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		var c [len(durationBounds) + 1]uint64
		var sum int64
		h.read(&c, &sum)
		var n uint64
		for _, v := range c {
			n += v
		}
		if n < last {
			t.Fatalf("count went back from %d to %d", last, n)
		}
		if sum != int64(n)*int64(2*time.Millisecond) {
			t.Fatalf("sum %d does not match count %d", sum, n)
		}
		last = n
	}
	var c [len(durationBounds) + 1]uint64
	var sum int64
	h.read(&c, &sum)
	if c[1] != workers*each || sum != workers*each*int64(2*time.Millisecond) {
		t.Fatalf("got count %d sum %d, want %d and %d", c[1], sum, workers*each, workers*each*int64(2*time.Millisecond))
	}
}
