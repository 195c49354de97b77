package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

func TestBucketBurstAndRate(t *testing.T) {
	tests := []struct {
		rate          float64
		burst, shards int
	}{
		{10, 5, 1}, {10, 5, 4}, {1000, 64, 8}, {1, 1, 8}, {100, 3, 64},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("rate=%v/burst=%d/shards=%d", tt.rate, tt.burst, tt.shards), func(t *testing.T) {
			b, err := NewBucket(tt.rate, tt.burst, tt.shards)
			if err != nil {
				t.Fatal(err)
			}
			now := int64(time.Hour)
			n := 0
			for k := uint32(0); ; k++ {
				ok, wait := b.Allow(now, k*2654435761, 1)
				if !ok {
					if wait <= 0 {
						t.Fatalf("refusal with wait %d", wait)
					}
					break
				}
				n++
			}
			if n != tt.burst {
				t.Fatalf("a full bucket admitted %d at once, want the burst %d", n, tt.burst)
			}
			// Over 10 s at a steady arrival far above the rate, the bucket
			// admits rate x 10 s (within one burst).
			admitted := 0
			step := int64(1e9 / (tt.rate * 4))
			end := now + 10*int64(time.Second)
			for k := uint32(0); now < end; k++ {
				now += step
				if ok, _ := b.Allow(now, k*2654435761, 1); ok {
					admitted++
				}
			}
			want := tt.rate * 10
			if math.Abs(float64(admitted)-want) > float64(tt.burst)+1 {
				t.Fatalf("admitted %d in 10s, want %v", admitted, want)
			}
		})
	}
}

func TestBucketScaleSlowsRefill(t *testing.T) {
	b, err := NewBucket(100, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(0)
	n := 0
	for range 1000 {
		now += int64(time.Millisecond)
		if ok, _ := b.Allow(now, 0, 0.25); ok {
			n++
		}
	}
	if n < 24 || n > 26 {
		t.Fatalf("at scale 0.25 of 100/s one second admitted %d, want 25", n)
	}
}

func TestNewBucketRefusesBadConfig(t *testing.T) {
	for _, tt := range []struct {
		rate  float64
		burst int
	}{{0, 1}, {-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, 0}} {
		if _, err := NewBucket(tt.rate, tt.burst, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewBucket(%v, %d): %v, want ErrInvalid", tt.rate, tt.burst, err)
		}
	}
}

func TestKeyedLimitsEachKey(t *testing.T) {
	k, err := NewKeyed(1, 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Hour)
	for _, key := range []string{"a", "b"} {
		for i := range 2 {
			if ok, _ := k.Allow(key, now, 1); !ok {
				t.Fatalf("key %s request %d refused", key, i)
			}
		}
		if ok, wait := k.Allow(key, now, 1); ok || wait != int64(time.Second) {
			t.Fatalf("key %s beyond its burst: ok=%v wait=%s, want refused for 1s", key, ok, time.Duration(wait))
		}
	}
	if ok, _ := k.Allow("a", now+int64(time.Second), 1); !ok {
		t.Fatal("key a not refilled after 1s")
	}
}

func TestKeyedMemoryIsBounded(t *testing.T) {
	k, err := NewKeyed(1, 1, 160)
	if err != nil {
		t.Fatal(err)
	}
	if k.MaxKeys() != 160 {
		t.Fatalf("MaxKeys %d, want 160", k.MaxKeys())
	}
	now := int64(time.Hour)
	for i := range 100_000 {
		k.Allow(fmt.Sprint("key-", i), now, 1)
		if i%997 == 0 && k.Len() > 160 {
			t.Fatalf("after %d keys the limiter holds %d, want at most 160", i+1, k.Len())
		}
	}
	if k.Len() > 160 || k.Len() < 100 {
		t.Fatalf("holds %d keys, want close to 160", k.Len())
	}
}

func TestKeyedEvictsLeastRecentlyUsed(t *testing.T) {
	k, err := NewKeyed(1, 1, 16) // one key per part
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Hour)
	// Find two keys of the same part.
	a := "k0"
	var b string
	for i := 1; ; i++ {
		b = fmt.Sprint("k", i)
		if k.partOf(a) == k.partOf(b) {
			break
		}
	}
	if ok, _ := k.Allow(a, now, 1); !ok {
		t.Fatal("first request of a refused")
	}
	if ok, _ := k.Allow(a, now, 1); ok {
		t.Fatal("a's empty bucket admitted")
	}
	k.Allow(b, now, 1) // evicts a
	part := &k.parts[k.partOf(a)]
	if _, ok := part.index[a]; ok || len(part.index) != 1 {
		t.Fatalf("part holds %v after b arrived, want only b", part.index)
	}
	// Once every debt is paid, a comes back with a full bucket.
	if ok, _ := k.Allow(a, now+int64(time.Second), 1); !ok {
		t.Fatal("an evicted key did not come back with a full bucket once its debt was paid")
	}
}

func TestKeyedLRUOrder(t *testing.T) {
	p := &keyedPart{index: map[string]int32{}, head: -1, tail: -1, max: 3}
	for _, key := range []string{"a", "b", "c"} {
		p.insert(key, 1)
	}
	p.touch(p.index["a"]) // order: a c b
	p.insert("d", 1)      // evicts b
	if _, ok := p.index["b"]; ok || len(p.index) != 3 {
		t.Fatalf("index after eviction: %v, want a c d", p.index)
	}
	var order []string
	for i := p.head; i >= 0; i = p.ents[i].next {
		order = append(order, p.ents[i].key)
	}
	if fmt.Sprint(order) != "[d a c]" {
		t.Fatalf("LRU order %v, want [d a c]", order)
	}
}

func BenchmarkBucketAllow(b *testing.B) {
	bk, _ := NewBucket(1e12, 1<<30, 8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var k uint32
		var now int64
		for pb.Next() {
			k += 2654435761
			now += 1000
			bk.Allow(now, k, 1)
		}
	})
}

func BenchmarkKeyedAllow(b *testing.B) {
	k, _ := NewKeyed(1e9, 1<<20, 10000)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("10.0.", i/256, ".", i%256)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			k.Allow(keys[i%len(keys)], int64(i), 1)
		}
	})
}

// rampScale is the Governor's warm-up ramp (route.scale): linear from 0.1 to
// 1 over 30 s.
func rampScale(now int64) float64 {
	const from, dur = 0.1, int64(30 * time.Second)
	if now >= dur {
		return 1
	}
	return from + (1-from)*float64(now)/float64(dur)
}

// While a warm-up scale rises, a drained bucket must admit at the scaled rate
// of the moment: the tokens it owes stay owed when the scale changes, so the
// debt taken at a low scale does not outlast the tolerance of the higher
// scales that follow (which once starved a fresh instance that used its burst
// for more than five seconds).
func TestWarmUpRampRefillsAtTheScaledRate(t *testing.T) {
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			b, err := NewBucket(100, 100, shards)
			if err != nil {
				t.Fatal(err)
			}
			k, err := NewKeyed(100, 100, 16)
			if err != nil {
				t.Fatal(err)
			}
			// Ask every millisecond, far above the rate, for 40 s.
			ms := int64(time.Millisecond)
			var bucketRamp, keyedRamp, bucketAll, keyedAll int
			for now := int64(0); now < 40*int64(time.Second); now += ms {
				s := rampScale(now)
				okB, _ := b.Allow(now, uint32(now/ms)*2654435761, s)
				okK, _ := k.Allow("client", now, s)
				inRamp := now >= int64(time.Second) && now < 5*int64(time.Second)
				if okB {
					bucketAll++
					if inRamp {
						bucketRamp++
					}
				}
				if okK {
					keyedAll++
					if inRamp {
						keyedRamp++
					}
				}
			}
			// Over [1s, 5s) the scaled rate 100 x (0.1 + 0.9 t/30s)
			// adds up to 76 tokens.
			if bucketRamp < 74 || bucketRamp > 78 || keyedRamp < 74 || keyedRamp > 78 {
				t.Errorf("admitted in [1s,5s) of the ramp: bucket %d, keyed %d; want 76 each", bucketRamp, keyedRamp)
			}
			// Over 40 s: the burst, 1650 during the ramp, 1000 after it.
			if bucketAll < 2740 || bucketAll > 2760 || keyedAll < 2740 || keyedAll > 2760 {
				t.Errorf("admitted in 40 s: bucket %d, keyed %d; want 2750 each", bucketAll, keyedAll)
			}
		})
	}
}

// A rate so low that 1e9/rate does not fit in an int64 (a typo in a rule,
// 1e-11/s) once became one token per nanosecond: no limit at all.
func TestTinyRateIsNotUnlimited(t *testing.T) {
	b, err := NewBucket(1e-11, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKeyed(1e-11, 1, 16)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Hour)
	nb, nk := 0, 0
	for i := range 100 {
		if ok, _ := b.Allow(now+int64(i), 0, 1); ok {
			nb++
		}
		if ok, _ := k.Allow("a", now+int64(i), 1); ok {
			nk++
		}
	}
	if nb != 1 || nk != 1 {
		t.Fatalf("rate 1e-11/s burst 1 admitted bucket %d, keyed %d in 100ns, want 1", nb, nk)
	}
}

// A large burst at a low rate, or at a warm-up scale, must not overflow the
// tolerance burst x interval, which refused every request, the first of a
// full bucket included.
func TestLargeBurstAtLowRateDoesNotOverflow(t *testing.T) {
	for _, scale := range []float64{1, 0.1, 1e-3} {
		b, err := NewBucket(0.01, 1<<30, 1)
		if err != nil {
			t.Fatal(err)
		}
		k, err := NewKeyed(0.01, 1<<30, 16)
		if err != nil {
			t.Fatal(err)
		}
		now := int64(time.Hour)
		for i := range 3 {
			okB, waitB := b.Allow(now, 0, scale)
			okK, waitK := k.Allow("a", now, scale)
			if !okB || !okK {
				t.Fatalf("scale %v: request %d of a full bucket of 2^30 at 0.01/s refused: bucket %v (wait %d), keyed %v (wait %d)",
					scale, i, okB, waitB, okK, waitK)
			}
		}
	}
}

// Inherit keeps the tokens a bucket has left, up to the new burst, spread
// over the new shards, whatever the shards, rates and warm-up scale of
// either bucket.
func TestBucketInheritKeepsItsTokens(t *testing.T) {
	tests := []struct {
		name         string
		rate         float64
		burst, use   int
		scale        float64
		newRate      float64
		newBurst     int
		newShards    int
		want         int
		wantWaitNear time.Duration // for a drained bucket: about one new interval
	}{
		{"drained, rate halved", 1000, 64, 64, 1, 500, 64, 8, 0, 8 * 2 * time.Millisecond},
		{"drained during a warm-up", 1000, 64, 64, 0.1, 2000, 128, 8, 0, 8 * 500 * time.Microsecond},
		{"24 left, 8 shards to 1", 1000, 64, 40, 1, 100, 32, 8, 24, 0},
		{"24 left, burst lowered", 1000, 64, 40, 1, 1000, 16, 8, 16, 0},
		{"full, burst raised", 100, 10, 0, 1, 1000, 100, 8, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, err := NewBucket(tt.rate, tt.burst, 8)
			if err != nil {
				t.Fatal(err)
			}
			now := int64(time.Hour)
			for i := range tt.use {
				if ok, _ := old.Allow(now, uint32(i), tt.scale); !ok {
					t.Fatalf("request %d of the burst refused", i)
				}
			}
			b, err := NewBucket(tt.newRate, tt.newBurst, tt.newShards)
			if err != nil {
				t.Fatal(err)
			}
			b.Inherit(old, now)
			n := 0
			var wait int64
			for ; n < 1000; n++ {
				var ok bool
				if ok, wait = b.Allow(now, uint32(n), 1); !ok {
					break
				}
			}
			if n != tt.want {
				t.Fatalf("admitted %d at once, want %d", n, tt.want)
			}
			if tt.wantWaitNear > 0 && (time.Duration(wait) > tt.wantWaitNear || time.Duration(wait) < tt.wantWaitNear/2) {
				t.Fatalf("drained bucket: next token in %v, want about %v", time.Duration(wait), tt.wantWaitNear)
			}
		})
	}
}
