// Package ratelimit holds Governor's token buckets.
//
// Bucket is a route's token bucket (rate, burst) sharded so that concurrent
// admissions on different CPUs do not fight over one cache line: each shard
// holds a share of the rate and the burst as a GCRA "theoretical arrival time"
// in one atomic word, and a request refused by its shard tries the others
// before it is rejected, so the bucket as a whole admits exactly what an
// unsharded one would. A scale below 1 (a warm-up ramp) stretches the
// interval between tokens; the debt a shard carries is kept in tokens across
// a change of scale, so a drained bucket refills at the scaled rate of the
// moment while the ramp rises. Keyed is a bucket per key (caller, client IP,
// user) with bounded memory: beyond MaxKeys the least recently seen keys are
// forgotten, and the key taking a forgotten one's place takes over its debt.
// Its memory grows with the keys seen, up to MaxKeys.
//
// A bucket or per-key limiter built to replace another (a changed rule)
// Inherits its tokens, so that changing a limit never refills the buckets.
//
// Refund gives a token back for a request a later stage refused (a per-key
// limit after the route's bucket, a concurrency limit), so that requests
// refused there do not use up the rate of admitted ones: without it, one
// client far over its per-key limit drains the route's bucket for everyone.
//
// Time is passed in as monotonic nanoseconds (clock.Clock.Nanotime); nothing
// here reads a clock or allocates on the admission path.
package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
)

// ErrInvalid is wrapped by constructor errors.
var ErrInvalid = errors.New("ratelimit: invalid configuration")

// MaxShards bounds the shards of a Bucket.
const MaxShards = 64

// maxTolerance bounds burst x interval (2^61 ns, about 73 years): a rate so
// low, or a burst so large, that refilling the burst would take longer
// refills it in that time instead. Without the bound, 1e9/rate would not fit
// in an int64 for a tiny rate (which turned into one token per nanosecond,
// no limit at all), and the tolerance burst x interval would overflow for a
// large burst at a low or warm-up-scaled rate (which refused everything);
// with it, a theoretical arrival time ahead of now by the tolerance and an
// interval stays far from the end of int64.
const maxTolerance = 1 << 61

// toInterval converts ns, a floating-point interval, to whole nanoseconds
// between 1 and limit.
func toInterval(ns float64, limit int64) int64 {
	if !(ns < float64(limit)) { // also +Inf and NaN
		return limit
	}
	return max(1, int64(ns))
}

// bucketShard is padded to two cache lines: adjacent-line prefetch pairs
// 64-byte lines, so neighbours 64 bytes apart would still share.
type bucketShard struct {
	tat atomic.Int64 // theoretical arrival time of the next request
	// interval is the interval tat's debt was counted in. It is stored
	// after tat, without a lock (a second word would need a lock to move
	// with tat): a caller racing that store may pair tat with the interval
	// of the call before. That happens only while the scale changes (at a
	// steady scale nobody writes it), and it misjudges the debt by the
	// ratio between two concurrent calls' intervals, which under a ramp is
	// its drift over those few nanoseconds.
	interval atomic.Int64
	_        [112]byte
}

// Bucket is a sharded token bucket. It is safe for concurrent use.
type Bucket struct {
	rate     float64
	burst    int
	interval int64 // ns between tokens of one shard
	// maxInterval bounds a (scaled) interval: the largest shard's share of
	// the burst times it stays within maxTolerance.
	maxInterval int64
	mask        uint32
	bursts      []int64 // per-shard share of the burst
	shards      []bucketShard
}

// NewBucket returns a bucket refilling rate tokens per second up to burst,
// spread over up to shards shards (a power of two; never more than burst, and
// one per 100/s of rate). The bucket starts full. A rate so low that
// refilling the burst would take over 73 years refills it in 73 years.
func NewBucket(rate float64, burst, shards int) (*Bucket, error) {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0 {
		return nil, fmt.Errorf("%w: rate must be a finite number above 0, got %v", ErrInvalid, rate)
	}
	if burst < 1 {
		return nil, fmt.Errorf("%w: burst must be at least 1, got %d", ErrInvalid, burst)
	}
	// Shard only what is worth sharding: every shard must hold a token of
	// the burst and refill at least every 10 ms, so low rates stay exact.
	n := 1
	for n*2 <= shards && n*2 <= burst && n*2 <= MaxShards && float64(n*2)*100 <= rate {
		n *= 2
	}
	b := &Bucket{rate: rate, burst: burst, mask: uint32(n - 1), shards: make([]bucketShard, n), bursts: make([]int64, n)}
	for i := range b.bursts {
		share := burst / n
		if i < burst%n {
			share++
		}
		b.bursts[i] = int64(share)
	}
	b.maxInterval = max(1, maxTolerance/b.bursts[0]) // shard 0 has the largest share
	b.interval = toInterval(float64(n)*1e9/rate, b.maxInterval)
	for i := range b.shards {
		b.shards[i].interval.Store(b.interval)
	}
	return b, nil
}

// Rate returns the configured rate in tokens per second.
func (b *Bucket) Rate() float64 { return b.rate }

// Burst returns the configured burst.
func (b *Bucket) Burst() int { return b.burst }

// Allow takes a token at time now (monotonic ns), starting with shard
// hint&mask and trying every other shard before refusing. scale (0 < scale
// <= 1) slows the refill, as a warm-up ramp does; pass 1 otherwise. When the
// scale changes, the tokens owed stay owed, now at the new rate: a rising
// scale pays a drained bucket's debt off faster. On refusal it returns how
// long until a token is due.
func (b *Bucket) Allow(now int64, hint uint32, scale float64) (bool, int64) {
	interval := b.interval
	if scale < 1 {
		if scale <= 0 {
			scale = 1e-3
		}
		interval = toInterval(float64(interval)/scale, b.maxInterval)
	}
	n := uint32(len(b.shards))
	wait := int64(math.MaxInt64)
	for k := uint32(0); k < n; k++ {
		i := (hint + k) & b.mask
		ok, w := b.take(i, now, interval)
		if ok {
			return true, 0
		}
		wait = min(wait, w)
	}
	return false, wait
}

func (b *Bucket) take(i uint32, now, interval int64) (bool, int64) {
	s := &b.shards[i]
	tau := b.bursts[i] * interval
	for {
		tat := s.tat.Load()
		old := s.interval.Load()
		base := rebase(tat, now, old, interval)
		next := base + interval
		if over := next - now - tau; over > 0 {
			return false, over
		}
		if s.tat.CompareAndSwap(tat, next) {
			if old != interval {
				s.interval.Store(interval)
			}
			return true, 0
		}
	}
}

// Inherit takes over, at now, the tokens old holds, for a bucket built to
// replace old (a changed rule): b starts with as many tokens as old has
// left, up to its own burst, and owes the rest, now at its own rate. A
// drained bucket stays drained and a full one stays full (up to the new
// burst), so lowering a rate during an overload hands out no fresh burst,
// and raising one hands out no more at once than the old bucket held. Call it before b is in use; tokens old
// hands out meanwhile are not seen.
func (b *Bucket) Inherit(old *Bucket, now int64) {
	have := 0.0
	for i := range old.shards {
		s := &old.shards[i]
		tat, interval := s.tat.Load(), s.interval.Load()
		debt := 0.0
		if tat > now {
			debt = float64(tat-now) / float64(interval)
		}
		have += max(float64(old.bursts[i])-debt, 0)
	}
	// Fill the shards one after the other rather than each by a share:
	// a share of a token in every shard would be lost to the rounding of
	// each, and Allow tries every shard anyway.
	for i := range b.shards {
		s := &b.shards[i]
		give := min(have, float64(b.bursts[i]))
		have -= give
		tat, _ := owed(give, int(b.bursts[i]), b.interval, now)
		s.tat.Store(tat)
		s.interval.Store(b.interval)
	}
}

// Refund gives back a token Allow took at (about) now for a request that a
// later stage refused after all (a per-key limit, a concurrency limit), so
// that requests refused there do not use up the rate of those admitted, as
// cancelling a reservation of golang.org/x/time/rate does. hint is the hint
// given to Allow. The token goes to the first shard from hint that owes
// one; a bucket that is full stays full. Refund each admission at most once.
func (b *Bucket) Refund(now int64, hint uint32) {
	n := uint32(len(b.shards))
	for k := uint32(0); k < n; k++ {
		s := &b.shards[(hint+k)&b.mask]
		for {
			tat := s.tat.Load()
			if tat <= now {
				break // this shard is full: try the next
			}
			if s.tat.CompareAndSwap(tat, max(now, tat-s.interval.Load())) {
				return
			}
		}
	}
}

// rebase returns when a GCRA whose theoretical arrival time is tat, counted
// in intervals of old, would have paid its debt at time now if it counted in
// intervals of interval: the tokens owed stay the same. Without a rebase, a
// debt taken at a low warm-up scale would outlast the tolerance of the
// higher scales that follow, and the bucket would admit nothing for seconds
// while its rate rises.
func rebase(tat, now, old, interval int64) int64 {
	if tat <= now {
		return now
	}
	if old == interval {
		return tat
	}
	return now + int64(float64(tat-now)*float64(interval)/float64(old))
}
