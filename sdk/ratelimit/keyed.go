package ratelimit

import (
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
)

// keyedParts is the number of independently locked parts of a Keyed limiter.
const keyedParts = 16

// Keyed is a token bucket per key with bounded memory: it remembers at most
// MaxKeys keys and forgets the least recently seen one to make room. The key
// that takes its place takes over the tokens it owed: a key forgotten with a
// full bucket loses nothing, and one forgotten while it was still paying off
// its burst does not hand a fresh burst to whoever comes next. Otherwise a
// caller cycling through a few more keys than a part remembers would find
// every key fresh, and no limit at all; with the debt kept, n keys sharing
// a part's m places get at most m keys' worth. A new key that takes over a
// debt waits at most one interval (1/rate) for its first token, and only
// while more keys are active than MaxKeys holds. It is safe for concurrent
// use; keys are spread over independently locked parts by a hash seeded
// at random for every limiter built (one that inherits another's keys takes
// over its seed, see Inherit), so a client that chooses its keys (an API-key
// header) cannot aim them all at the part of another client's key and push
// that key out with a handful of keys, far fewer than MaxKeys.
type Keyed struct {
	rate        float64
	burst       int
	interval    int64
	maxInterval int64 // bounds a (scaled) interval: burst times it stays within maxTolerance
	seed        maphash.Seed
	parts       [keyedParts]keyedPart
}

type keyedPart struct {
	mu    sync.Mutex
	index map[string]int32
	ents  []keyedEntry
	head  int32 // most recently used, -1 if empty
	tail  int32 // least recently used
	max   int32 // keys the part remembers at most; set once by NewKeyed
	_     [64]byte
}

type keyedEntry struct {
	key        string
	tat        int64
	interval   int64 // the interval tat's debt was counted in
	prev, next int32
}

// NewKeyed returns a per-key limiter: rate tokens per second per key up to
// burst, remembering at most maxKeys keys (rounded up to a multiple of 16).
// As for NewBucket, a refill of the burst is bounded to 73 years.
func NewKeyed(rate float64, burst, maxKeys int) (*Keyed, error) {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0 {
		return nil, fmt.Errorf("%w: rate must be a finite number above 0, got %v", ErrInvalid, rate)
	}
	if burst < 1 {
		return nil, fmt.Errorf("%w: burst must be at least 1, got %d", ErrInvalid, burst)
	}
	if maxKeys < 1 {
		return nil, fmt.Errorf("%w: max keys must be at least 1, got %d", ErrInvalid, maxKeys)
	}
	k := &Keyed{rate: rate, burst: burst, seed: maphash.MakeSeed()}
	k.maxInterval = max(1, maxTolerance/int64(burst))
	k.interval = toInterval(1e9/rate, k.maxInterval)
	per := (maxKeys + keyedParts - 1) / keyedParts
	for i := range k.parts {
		p := &k.parts[i]
		// Memory grows with the keys seen, up to per in each part: a limit
		// of a million keys that sees a thousand costs a thousand.
		p.index = make(map[string]int32)
		p.head, p.tail, p.max = -1, -1, int32(per)
	}
	return k, nil
}

// MaxKeys returns how many keys the limiter remembers at most.
func (k *Keyed) MaxKeys() int { return keyedParts * int(k.parts[0].max) }

// Len returns how many keys the limiter remembers now.
func (k *Keyed) Len() int {
	n := 0
	for i := range k.parts {
		p := &k.parts[i]
		p.mu.Lock()
		n += len(p.index)
		p.mu.Unlock()
	}
	return n
}

// Allow takes a token from key's bucket at time now (monotonic ns); scale
// (0 < scale <= 1) slows the refill during a warm-up, and, as for Bucket, the
// tokens owed stay owed across a change of scale. On refusal it returns how
// long until a token is due. Allow allocates only when it meets a new key.
func (k *Keyed) Allow(key string, now int64, scale float64) (bool, int64) {
	interval := k.interval
	if scale < 1 {
		interval = toInterval(float64(interval)/max(scale, 1e-3), k.maxInterval)
	}
	p := &k.parts[k.partOf(key)]
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := p.index[key]
	if !ok {
		i = p.insert(key, interval)
	} else {
		p.touch(i)
	}
	e := &p.ents[i]
	next := rebase(e.tat, now, e.interval, interval) + interval
	if over := next - now - int64(k.burst)*interval; over > 0 {
		return false, over
	}
	e.tat, e.interval = next, interval
	return true, 0
}

// Refund gives back a token Allow took from key's bucket at (about) now for
// a request that a later stage refused after all, as Bucket.Refund does. A
// full bucket stays full; a key no longer remembered is left alone.
func (k *Keyed) Refund(key string, now int64) {
	p := &k.parts[k.partOf(key)]
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := p.index[key]
	if !ok {
		return
	}
	if e := &p.ents[i]; e.tat > now {
		e.tat = max(now, e.tat-e.interval)
	}
}

// Inherit takes over, at now, the state of the keys old remembers, for a
// limiter built to replace old (a changed rule): each key keeps the tokens
// it has left, up to k's burst, and owes the rest, now at k's rate. A
// drained key stays drained and a full one stays full (up to the new burst),
// so changing a per-key limit hands no key a fresh burst, and raising one
// hands out no more at once to a key seen before than the old limit held (a
// key never seen starts with the new burst, as always).
//
// Call it before k is in use; requests old admits meanwhile are not seen.
// An unused k takes over old's hash seed (random per process, as ever), so
// every key lands in the part it had in old: when k remembers at least as
// many keys as old (a change of rate or burst only), it forgets none of
// them. When it remembers fewer, each part keeps its most recently seen
// keys, those k would remember had it been in place all along, and the
// debts of the others go with them (a key forgotten at a change of max_keys
// starts full when it comes back). Keys go in from the least recently seen
// to the most recent, taken in turn from each of old's parts by their place
// in its order of use, so that a k already in use (whose parts differ from
// old's) also forgets mostly the least recently seen.
func (k *Keyed) Inherit(old *Keyed, now int64) {
	if k.unused() {
		k.seed = old.seed
	}
	type inherited struct {
		key           string
		tat, interval int64
	}
	var byPart [keyedParts][]inherited // each least recent first
	longest := 0
	for i := range old.parts {
		op := &old.parts[i]
		op.mu.Lock()
		ents := make([]inherited, 0, len(op.index))
		for j := op.tail; j >= 0; j = op.ents[j].prev {
			e := &op.ents[j]
			ents = append(ents, inherited{e.key, e.tat, e.interval})
		}
		op.mu.Unlock()
		byPart[i] = ents
		longest = max(longest, len(ents))
	}
	// r counts from the most recently seen key of each part (r = 1).
	for r := longest; r > 0; r-- {
		for _, ents := range byPart {
			if len(ents) < r {
				continue
			}
			e := &ents[len(ents)-r]
			have := float64(old.burst)
			if e.tat > now {
				have -= float64(e.tat-now) / float64(e.interval)
			}
			tat, _ := owed(have, k.burst, k.interval, now)
			p := &k.parts[k.partOf(e.key)]
			p.mu.Lock()
			n, ok := p.index[e.key]
			if !ok {
				n = p.insert(e.key, k.interval)
			} else {
				p.touch(n)
			}
			p.ents[n].tat, p.ents[n].interval = tat, k.interval
			p.mu.Unlock()
		}
	}
}

// unused reports whether k remembers no key.
func (k *Keyed) unused() bool {
	for i := range k.parts {
		p := &k.parts[i]
		p.mu.Lock()
		n := len(p.index)
		p.mu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// owed returns the theoretical arrival time, at now, of a bucket of burst
// counted in interval that holds have tokens (at most burst of them), or 0
// and false if it is full.
func owed(have float64, burst int, interval, now int64) (int64, bool) {
	debt := float64(burst) - min(max(have, 0), float64(burst))
	if !(debt > 0) {
		return 0, false
	}
	// debt <= burst and burst x interval <= maxTolerance: no overflow.
	return now + int64(debt*float64(interval)), true
}

// insert adds key as the most recently used entry with a full bucket counted
// in interval, or, when the part is full, in place of the least recently
// used entry, whose debt it takes over.
func (p *keyedPart) insert(key string, interval int64) int32 {
	key = strings.Clone(key)
	var i int32
	var tat int64
	if len(p.ents) < int(p.max) {
		p.ents = append(p.ents, keyedEntry{})
		i = int32(len(p.ents) - 1)
	} else {
		i = p.tail
		p.unlink(i)
		delete(p.index, p.ents[i].key)
		tat, interval = p.ents[i].tat, p.ents[i].interval
	}
	p.ents[i] = keyedEntry{key: key, tat: tat, interval: interval, prev: -1, next: -1}
	p.index[key] = i
	p.pushFront(i)
	return i
}

func (p *keyedPart) touch(i int32) {
	if p.head == i {
		return
	}
	p.unlink(i)
	p.pushFront(i)
}

func (p *keyedPart) unlink(i int32) {
	e := &p.ents[i]
	if e.prev >= 0 {
		p.ents[e.prev].next = e.next
	} else {
		p.head = e.next
	}
	if e.next >= 0 {
		p.ents[e.next].prev = e.prev
	} else {
		p.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (p *keyedPart) pushFront(i int32) {
	e := &p.ents[i]
	e.prev, e.next = -1, p.head
	if p.head >= 0 {
		p.ents[p.head].prev = i
	}
	p.head = i
	if p.tail < 0 {
		p.tail = i
	}
}

// partOf returns the index of key's part.
func (k *Keyed) partOf(key string) uint64 { return maphash.String(k.seed, key) % keyedParts }
