package ratelimit

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// keysOfOnePart returns n keys that land in the same part as "k0".
func keysOfOnePart(n int) []string {
	keys := []string{"k0"}
	for i := 1; len(keys) < n; i++ {
		k := fmt.Sprint("k", i)
		if hashKey(k)%keyedParts == hashKey("k0")%keyedParts {
			keys = append(keys, k)
		}
	}
	return keys
}

// A caller cycling through one key more than a part remembers used to find
// every key forgotten, so with a fresh burst, on its next turn: no limit at
// all. The debt of a forgotten key stays with the key that takes its place.
func TestKeyedEvictionDoesNotGiveKeysCyclingThroughAPartFreshBursts(t *testing.T) {
	for _, keysInPart := range []int{1, 3} {
		t.Run(fmt.Sprintf("places=%d", keysInPart), func(t *testing.T) {
			k, err := NewKeyed(1, 1, keysInPart*keyedParts)
			if err != nil {
				t.Fatal(err)
			}
			keys := keysOfOnePart(keysInPart + 1)
			now := int64(time.Hour)
			n := 0
			for i := range 1000 { // 10 s, one request every 10 ms
				now += int64(10 * time.Millisecond)
				if ok, _ := k.Allow(keys[i%len(keys)], now, 1); ok {
					n++
				}
			}
			// At most what the remembered keys allow: their bursts and
			// 10 s of their rates.
			if limit := keysInPart * (1 + 10); n > limit {
				t.Fatalf("%d keys at 1/s burst 1 sharing %d places admitted %d in 10s, want at most %d",
					len(keys), keysInPart, n, limit)
			}
		})
	}
}

// A new key that takes over a forgotten key's debt waits at most one
// interval for its first token.
func TestKeyedNewKeyTakingOverADebtWaitsAtMostOneInterval(t *testing.T) {
	k, err := NewKeyed(10, 5, keyedParts) // one place per part
	if err != nil {
		t.Fatal(err)
	}
	keys := keysOfOnePart(2)
	now := int64(time.Hour)
	for range 5 {
		if ok, _ := k.Allow(keys[0], now, 1); !ok {
			t.Fatal("a full bucket refused its burst")
		}
	}
	ok, wait := k.Allow(keys[1], now, 1)
	if ok || wait <= 0 || wait > int64(100*time.Millisecond) {
		t.Fatalf("new key in place of a drained one: ok=%v wait=%s, want refused for at most 100ms",
			ok, time.Duration(wait))
	}
	if ok, _ := k.Allow(keys[1], now+wait, 1); !ok {
		t.Fatal("new key refused once its wait had passed")
	}
}

// A key that keeps asking stays remembered however many other keys come
// and go, so its debt is never forgotten.
func TestKeyedHotKeyKeepsItsDebtAmongManyOtherKeys(t *testing.T) {
	k, err := NewKeyed(1, 2, 4*keyedParts)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Hour)
	hot := 0
	for i := range 10_000 { // 10 s, a request every ms, one in 10 from the hot key
		now += int64(time.Millisecond)
		if i%10 == 0 {
			if ok, _ := k.Allow("hot", now, 1); ok {
				hot++
			}
			continue
		}
		k.Allow(fmt.Sprint("other-", i), now, 1)
	}
	if hot > 2+10 {
		t.Fatalf("hot key at 1/s burst 2 admitted %d in 10s, want at most 12", hot)
	}
}

// A per-key limit allowed up to 1<<20 keys (the most rules accept) must not
// take its full memory before it has seen a single key: a route's rules are
// rebuilt on every change, and each keyed limit used to cost tens of
// megabytes up front.
func TestKeyedMemoryGrowsWithTheKeysSeen(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	k, err := NewKeyed(10, 5, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		k.Allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), int64(time.Hour), 1)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("a limiter of 1<<20 keys holding 1000 allocated %d bytes, want under 1 MiB", got)
	}
	if k.MaxKeys() != 1<<20 || k.Len() != 1000 {
		t.Fatalf("MaxKeys %d, Len %d; want %d, 1000", k.MaxKeys(), k.Len(), 1<<20)
	}
	runtime.KeepAlive(k)
}
