package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A request admitted by a bucket but refused by a later stage (a per-key
// limit, the concurrency limit) gives its token back: the bucket admits
// exactly one more request per refund, never more than its burst, at any
// shard count and scale.
func TestRefundedTokenIsAdmittedAgain(t *testing.T) {
	for _, tt := range []struct {
		rate          float64
		burst, shards int
		scale         float64
	}{{0.1, 1, 1, 1}, {10, 5, 1, 1}, {1000, 8, 8, 1}, {6400, 64, 64, 1}, {1000, 8, 8, 0.25}} {
		t.Run(fmt.Sprintf("rate=%v/burst=%d/shards=%d/scale=%v", tt.rate, tt.burst, tt.shards, tt.scale), func(t *testing.T) {
			b, err := NewBucket(tt.rate, tt.burst, tt.shards)
			if err != nil {
				t.Fatal(err)
			}
			now := int64(time.Hour)
			drain := func() int {
				n := 0
				for i := uint32(0); ; i++ {
					if ok, _ := b.Allow(now, i*2654435761, tt.scale); !ok {
						return n
					}
					n++
				}
			}
			if n := drain(); n != tt.burst {
				t.Fatalf("full bucket admitted %d, want %d", n, tt.burst)
			}
			for i := range 3 {
				b.Refund(now, uint32(i)*40503)
			}
			if n := drain(); n != min(3, tt.burst) {
				t.Fatalf("after 3 refunds admitted %d, want %d", n, min(3, tt.burst))
			}
			// Refunds beyond a full bucket are lost, as tokens beyond the
			// burst are.
			later := now + int64(1e6*float64(time.Hour))
			for i := range tt.burst + 5 {
				b.Refund(later, uint32(i))
			}
			now = later
			if n := drain(); n != tt.burst {
				t.Fatalf("full bucket after surplus refunds admitted %d, want %d", n, tt.burst)
			}
		})
	}
}

func TestKeyedRefundedTokenIsAdmittedAgain(t *testing.T) {
	k, err := NewKeyed(1, 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Hour)
	for range 2 {
		if ok, _ := k.Allow("a", now, 1); !ok {
			t.Fatal("full bucket refused")
		}
	}
	if ok, _ := k.Allow("a", now, 1); ok {
		t.Fatal("drained bucket admitted")
	}
	k.Refund("a", now)
	k.Refund("b", now) // unknown key: nothing to give back
	if ok, _ := k.Allow("a", now, 1); !ok {
		t.Fatal("refunded token refused")
	}
	if ok, _ := k.Allow("a", now, 1); ok {
		t.Fatal("one refund admitted twice")
	}
	for range 5 {
		k.Refund("a", now+int64(time.Hour))
	}
	n := 0
	for range 10 {
		if ok, _ := k.Allow("a", now+int64(time.Hour), 1); ok {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("full bucket after surplus refunds admitted %d, want the burst 2", n)
	}
	if k.Len() != 1 {
		t.Fatalf("Refund of an unknown key remembered it: %d keys", k.Len())
	}
}

// Refunds racing admissions on a sharded bucket give back exactly what they
// refund: with the clock standing still, the bucket admits its burst plus
// one request per refund, however the goroutines interleave.
func TestConcurrentRefundsAreExact(t *testing.T) {
	b, err := NewBucket(1e4, 64, 8)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Hour)
	var admitted, refunded atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := uint32(g) * 2654435761
			for i := 0; i < 200; i++ {
				h += 40503
				if ok, _ := b.Allow(now, h, 1); !ok {
					continue
				}
				admitted.Add(1)
				if refunded.Add(1) <= 100 {
					b.Refund(now, h)
				} else {
					refunded.Add(-1)
				}
			}
		}()
	}
	wg.Wait()
	for i := uint32(0); i < 1000; i++ {
		if ok, _ := b.Allow(now, i, 1); ok {
			admitted.Add(1)
		}
	}
	if got, want := admitted.Load(), 64+refunded.Load(); got != want {
		t.Fatalf("admitted %d, want the burst 64 plus %d refunds", got, refunded.Load())
	}
}
