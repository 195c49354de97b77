package ratelimit

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// keysOfOnePart returns n keys that land in the same part of l as "k0".
func keysOfOnePart(l *Keyed, n int) []string {
	keys := []string{"k0"}
	for i := 1; len(keys) < n; i++ {
		k := fmt.Sprint("k", i)
		if l.partOf(k) == l.partOf("k0") {
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
			keys := keysOfOnePart(k, keysInPart+1)
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
	keys := keysOfOnePart(k, 2)
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

// fnv1a is the unseeded hash that used to choose a key's part.
func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Parts used to be chosen by an unseeded FNV-1a, so a client choosing its
// keys (an API-key header) could compute a handful that share a victim's
// part and push the victim's entry out, its replacement taking over a
// drained bucket: far fewer keys than MaxKeys denied another client. The
// hash is seeded for each limiter now, so keys chosen that way spread.
func TestKeyedKeysAimedAtOnePartDoNotEvictAVictim(t *testing.T) {
	k, err := NewKeyed(1, 5, 160) // 10 places per part
	if err != nil {
		t.Fatal(err)
	}
	victim := "10.0.0.1"
	var attackers []string
	for i := 0; len(attackers) < 10; i++ {
		a := fmt.Sprintf("a%d", i)
		if fnv1a(a)%keyedParts == fnv1a(victim)%keyedParts {
			attackers = append(attackers, a)
		}
	}
	now := int64(1e9)
	k.Allow(victim, now, 1)
	for _, a := range attackers { // each drains its burst
		for {
			if ok, _ := k.Allow(a, now, 1); !ok {
				break
			}
		}
	}
	if ok, wait := k.Allow(victim, now, 1); !ok {
		t.Fatalf("victim with 4 of its 5 tokens left refused (wait %dns) while only %d of %d keys are in use",
			wait, k.Len(), k.MaxKeys())
	}
}

// Two limiters place keys differently: keys found to share a part of one
// (by a client timing its requests, say) are spread in the other.
func TestKeyedPartsAreSeededPerLimiter(t *testing.T) {
	a, _ := NewKeyed(1, 1, keyedParts)
	b, _ := NewKeyed(1, 1, keyedParts)
	keys := keysOfOnePart(a, 20)
	for _, key := range keys[1:] {
		if b.partOf(key) != b.partOf(keys[0]) {
			return
		}
	}
	t.Fatalf("20 keys of one part of a limiter share a part of another: the hash is not seeded")
}

// Inherit keeps each key's tokens, up to the new burst; a limiter
// remembering fewer keys keeps no more than it can.
func TestKeyedInheritKeepsEachKeysTokens(t *testing.T) {
	old, _ := NewKeyed(10, 10, 1600) // 100 places per part: no key is forgotten here
	now := int64(time.Hour)
	for range 10 {
		old.Allow("drained", now, 1)
	}
	for range 4 {
		old.Allow("six left", now, 1)
	}
	old.Allow("full", now-int64(time.Second), 1)
	tests := []struct {
		rate  float64
		burst int
		want  map[string]int
	}{
		{5, 10, map[string]int{"drained": 0, "six left": 6, "full": 10, "new": 10}},
		{10, 4, map[string]int{"drained": 0, "six left": 4, "full": 4, "new": 4}},
		{10, 20, map[string]int{"drained": 0, "six left": 6, "full": 10, "new": 20}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.rate, "/s burst ", tt.burst), func(t *testing.T) {
			k, _ := NewKeyed(tt.rate, tt.burst, 1600)
			k.Inherit(old, now)
			if n := k.Len(); n != old.Len() {
				t.Fatalf("remembers %d keys, want the %d of old", n, old.Len())
			}
			for key, want := range tt.want {
				n := 0
				for n < 100 {
					if ok, _ := k.Allow(key, now, 1); !ok {
						break
					}
					n++
				}
				if n != want {
					t.Errorf("%s: admitted %d at once, want %d", key, n, want)
				}
			}
			// The debt is paid at the new rate.
			if ok, wait := k.Allow("drained", now, 1); ok || wait != int64(1e9/tt.rate) {
				t.Errorf("drained key: ok=%v wait=%v, want a token in 1/%v s", ok, time.Duration(wait), tt.rate)
			}
		})
	}
	for i := range 100 {
		old.Allow(fmt.Sprint("k", i), now, 1)
	}
	small, _ := NewKeyed(10, 10, keyedParts)
	small.Inherit(old, now)
	if small.Len() > keyedParts {
		t.Fatalf("remembers %d keys, want at most %d", small.Len(), keyedParts)
	}
}

// A rate change with max_keys unchanged, the limiter at capacity: the
// abusive keys it had drained stay remembered and drained; none of the
// keys it remembered is forgotten.
func TestKeyedInheritWithTheSameMaxKeysForgetsNoKey(t *testing.T) {
	for _, maxKeys := range []int{160, 1600, 10000} {
		t.Run(fmt.Sprint(maxKeys), func(t *testing.T) {
			old, _ := NewKeyed(1, 10, maxKeys)
			now := int64(1e9)
			hot := map[string]bool{}
			for i := range maxKeys * 3 {
				key := fmt.Sprint("client-", i)
				n := 1
				if i%(maxKeys*3/100) == 0 {
					n = 10
					hot[key] = true
				}
				for range n {
					old.Allow(key, now, 1)
				}
			}
			var drained []string
			for i := range old.parts {
				for _, e := range old.parts[i].ents {
					if hot[e.key] {
						drained = append(drained, e.key)
					}
				}
			}
			if len(drained) == 0 {
				t.Fatal("old remembers no drained key")
			}
			k, _ := NewKeyed(2, 10, maxKeys) // only the rate changed
			k.Inherit(old, now)
			if k.Len() != old.Len() {
				t.Fatalf("remembers %d keys, want the %d of old", k.Len(), old.Len())
			}
			for _, key := range drained {
				if ok, _ := k.Allow(key, now, 1); ok {
					t.Fatalf("drained key %s admitted after a rate-only change", key)
				}
			}
		})
	}
}

// A limiter remembering fewer keys than old keeps the most recently seen,
// as far as its parts' places allow: a key of old is forgotten only for
// more recently seen keys that fill its part.
func TestKeyedInheritIntoFewerKeysKeepsTheMostRecent(t *testing.T) {
	old, _ := NewKeyed(1, 10, 1600)
	now := int64(1e9)
	for i := range 1600 {
		old.Allow(fmt.Sprint("k", i), now+int64(i), 1) // k1599 the most recent
	}
	k, _ := NewKeyed(1, 10, 160)
	k.Inherit(old, now+2000)
	if k.Len() != k.MaxKeys() {
		t.Fatalf("remembers %d keys, want %d", k.Len(), k.MaxKeys())
	}
	oldest := [keyedParts]int{} // the least recent key kept in each part
	recent := 0
	for i := range k.parts {
		oldest[i] = 1 << 30
		for _, e := range k.parts[i].ents {
			var n int
			fmt.Sscanf(e.key, "k%d", &n)
			oldest[i] = min(oldest[i], n)
			if n >= 1600-160 {
				recent++
			}
		}
	}
	for i := range 1600 {
		key := fmt.Sprint("k", i)
		p := k.partOf(key)
		if _, ok := k.parts[p].index[key]; !ok && i > oldest[p] {
			t.Fatalf("%s forgotten, but its part keeps k%d, seen before it", key, oldest[p])
		}
	}
	t.Logf("kept %d of the 160 most recent keys", recent)
}

// A limiter already in use keeps its own seed when it inherits: the keys it
// remembers stay where Allow finds them.
func TestKeyedInheritIntoALimiterInUseKeepsItsKeys(t *testing.T) {
	now := int64(1e9)
	old, _ := NewKeyed(1, 10, 1600)
	for i := range 100 {
		old.Allow(fmt.Sprint("k", i), now, 1)
	}
	k, _ := NewKeyed(1, 10, 1600)
	for range 10 {
		k.Allow("drained", now, 1)
	}
	k.Inherit(old, now)
	if k.Len() != 101 {
		t.Fatalf("remembers %d keys, want 101", k.Len())
	}
	if ok, _ := k.Allow("drained", now, 1); ok {
		t.Fatal("a key the limiter had drained was admitted after Inherit")
	}
}
