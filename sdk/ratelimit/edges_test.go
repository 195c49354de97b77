package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Concurrent callers at one instant share the burst exactly.
func TestConcurrentCallersShareTheBurstExactly(t *testing.T) {
	b, err := NewBucket(1000, 500, 8)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKeyed(1000, 500, 16)
	if err != nil {
		t.Fatal(err)
	}
	var nb, nk atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				if ok, _ := b.Allow(5, uint32(g*1000+i)*2654435761, 1); ok {
					nb.Add(1)
				}
				if ok, _ := k.Allow("x", 5, 1); ok {
					nk.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if nb.Load() != 500 || nk.Load() != 500 {
		t.Fatalf("admitted bucket %d, keyed %d at one instant; want the burst 500", nb.Load(), nk.Load())
	}
}

// A reading older than the last one (callers racing between reading the
// clock and admitting) refuses with a positive wait, and an idle gap of
// decades refills only the burst.
func TestTimeGoingBackAndLongIdleGaps(t *testing.T) {
	b, err := NewBucket(10, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKeyed(10, 5, 16)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1 << 62)
	for range 5 {
		b.Allow(now, 0, 1)
		k.Allow("a", now, 1)
	}
	if ok, wait := b.Allow(now-int64(time.Second), 0, 1); ok || wait <= 0 {
		t.Fatalf("bucket, earlier reading: ok=%v wait=%d, want refused", ok, wait)
	}
	if ok, wait := k.Allow("a", now-int64(time.Second), 1); ok || wait <= 0 {
		t.Fatalf("keyed, earlier reading: ok=%v wait=%d, want refused", ok, wait)
	}
	later := now + 1<<60
	nb, nk := 0, 0
	for range 100 {
		if ok, _ := b.Allow(later, 0, 1); ok {
			nb++
		}
		if ok, _ := k.Allow("a", later, 1); ok {
			nk++
		}
	}
	if nb != 5 || nk != 5 {
		t.Fatalf("after a 36-year idle gap admitted bucket %d, keyed %d; want the burst 5", nb, nk)
	}
}

// Fractional rates and a rate of 1e9/s keep their rate once drained.
func TestFractionalAndVeryHighRates(t *testing.T) {
	for _, tt := range []struct {
		rate          float64
		burst, shards int
	}{{0.5, 1, 1}, {0.5, 3, 8}, {1e9, 1, 1}, {1e9, 64, 64}} {
		t.Run(fmt.Sprintf("rate=%v/burst=%d/shards=%d", tt.rate, tt.burst, tt.shards), func(t *testing.T) {
			b, err := NewBucket(tt.rate, tt.burst, tt.shards)
			if err != nil {
				t.Fatal(err)
			}
			k, err := NewKeyed(tt.rate, tt.burst, 16)
			if err != nil {
				t.Fatal(err)
			}
			now := int64(time.Hour)
			drain := func(at int64) (nb, nk int) {
				for i := uint32(0); ; i++ {
					if ok, _ := b.Allow(at, i*2654435761, 1); !ok {
						break
					}
					nb++
				}
				for {
					if ok, _ := k.Allow("a", at, 1); !ok {
						break
					}
					nk++
				}
				return nb, nk
			}
			drain(now)
			// Over the time of 1000 tokens, asking 10 times per token.
			span := int64(1000 / tt.rate * 1e9)
			step := max(1, span/10_000)
			nb, nk := 0, 0
			for d := step; d <= span; d += step {
				b1, k1 := drain(now + d)
				nb, nk = nb+b1, nk+k1
			}
			if nb < 1000-tt.burst || nb > 1000 || nk < 999 || nk > 1000 {
				t.Fatalf("admitted bucket %d, keyed %d over the time of 1000 tokens", nb, nk)
			}
		})
	}
}
