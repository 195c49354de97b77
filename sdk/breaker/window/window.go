// Package window provides striped, bucketed sliding-window counters: the
// statistics behind the circuit breaker, the adaptive throttle and the retry
// budget.
//
// A Ring divides its window into buckets of equal width. Each bucket is split
// into stripes on separate cache lines; a writer adds to a randomly chosen
// stripe, so concurrent writers on different cores rarely touch the same line
// and the hot path costs one compare-and-swap without contention. Readers sum
// every live cell, which is the expensive side and is done only when a
// decision needs it.
//
// A bucket is recycled lazily by the first writer that sees it belong to an
// older epoch. Each count shares its atomic word with a tag of the epoch it
// belongs to, so a writer adds only to a count of its own epoch and recycling
// is a compare-and-swap that never clears a newer count: no add within the
// window is lost, under any concurrency, and a reader never counts a recycled
// cell's previous lap. A count holds 40 bits and saturates at about ±5.5e11
// per stripe and bucket.
package window

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Counters is the number of independent counters a Ring keeps per cell.
const Counters = 3

// DefaultBuckets is the number of buckets of a Ring when New is given none.
const DefaultBuckets = 8

// stripes per bucket; a power of two so the stripe is picked with a mask.
const stripes = 8

// cell is 128 bytes with its data in the first 40: whatever the alignment of
// the slice, no two cells' data share a 64-byte cache line.
//
// epoch is the newest epoch claimed for the cell; it only grows (until
// Reset). Each word of c packs a count (low countBits, two's complement) under
// the tag of the epoch it counts (the epoch's low tagBits). clean is the
// newest claimed epoch whose words all carry its tag (see claim).
type cell struct {
	epoch atomic.Int64
	clean atomic.Int64
	c     [Counters]atomic.Uint64
	_     [128 - 8*(Counters+2)]byte
}

const (
	countBits = 40
	tagBits   = 64 - countBits
	countMask = 1<<countBits - 1
	maxCount  = 1<<(countBits-1) - 1
	minCount  = -1 << (countBits - 1)
	noEpoch   = -1 << 62 // the epoch of a cell never written
)

func tagOf(e int64) uint64       { return uint64(e) << countBits }
func countOf(w uint64) int64     { return int64(w<<tagBits) >> tagBits }
func sameTag(w, tag uint64) bool { return w&^countMask == tag }

// addCount adds d to n, saturating at the range of a count.
func addCount(n, d int64) int64 {
	switch {
	case d > 0 && n > maxCount-d:
		return maxCount
	case d < 0 && n < minCount-d:
		return minCount
	}
	return n + d
}

// Ring is a sliding window of Counters counters. It is safe for concurrent
// use. The zero value is not usable: call New.
type Ring struct {
	width   int64 // bucket width in nanoseconds
	buckets int64 // a power of two
	cells   []cell
	// cur caches the latest epoch seen, so the hot path usually replaces a
	// 64-bit division by a multiplication and two compares. It is written
	// once per bucket width.
	cur atomic.Int64

	// afterClaim is a test hook, nil outside tests: it runs with the index of
	// a cell just claimed for a newer epoch, before its counts are cleared.
	afterClaim func(i int64)
}

// New returns a ring covering window, split into buckets (DefaultBuckets if
// <= 0, rounded up to a power of two, at most 1024). A window shorter than
// one nanosecond per bucket is lengthened to that.
func New(window time.Duration, buckets int) *Ring {
	n := 1
	for n < min(buckets, 1024) {
		n *= 2
	}
	if buckets <= 0 {
		n = DefaultBuckets
	}
	if window < time.Duration(n) {
		window = time.Duration(n)
	}
	r := &Ring{
		width:   int64(window) / int64(n),
		buckets: int64(n),
	}
	r.cells = make([]cell, n*stripes)
	for i := range r.cells {
		r.cells[i].epoch.Store(noEpoch)
		r.cells[i].clean.Store(noEpoch)
	}
	return r
}

// Window returns the span the ring covers.
func (r *Ring) Window() time.Duration { return time.Duration(r.width * r.buckets) }

// BucketWidth returns the width of one bucket.
func (r *Ring) BucketWidth() time.Duration { return time.Duration(r.width) }

func (r *Ring) epochOf(now int64) int64 {
	cur := r.cur.Load()
	if start := cur * r.width; now >= start && now-start < r.width {
		return cur
	}
	var e int64
	if now < 0 {
		e = (now - r.width + 1) / r.width
	} else {
		e = now / r.width
	}
	if e > cur {
		r.cur.CompareAndSwap(cur, e)
	}
	return e
}

// cellFor returns the cell of a random stripe of the bucket holding now and
// its epoch, claiming the cell if it still holds an older epoch. It returns
// nil for a sample older than the window.
func (r *Ring) cellFor(now int64) (*cell, int64) {
	e := r.epochOf(now)
	i := (e&(r.buckets-1))*stripes + int64(rand.Uint32()&(stripes-1))
	c := &r.cells[i]
	if ce := c.epoch.Load(); ce != e && !r.claim(i, ce, e) {
		return nil, e
	}
	return c, e
}

// claim moves cell i from epoch ce to e, once per cell and bucket width. It
// reports false when the cell already holds a newer epoch: e has left the
// window.
//
// A claim starts from a clean epoch, whose words all carry its tag, so after
// it every word tagged e holds a count of e. When e's tag equals the clean
// epoch's (the cell sat idle for a multiple of 2^tagBits epochs), the claim
// goes through e minus one lap first, whose tag differs from both.
func (r *Ring) claim(i int64, ce, e int64) bool {
	c := &r.cells[i]
	for ce < e {
		if c.clean.Load() != ce {
			c.retag(ce) // finish the claim of ce, whoever started it
		}
		next := e
		if tagOf(ce) == tagOf(e) {
			next = e - r.buckets
		}
		if c.epoch.CompareAndSwap(ce, next) {
			if r.afterClaim != nil {
				r.afterClaim(i)
			}
			c.retag(next)
		}
		ce = c.epoch.Load()
	}
	return ce == e
}

// retag gives every word of c still tagged with an older epoch the tag of e
// and a zero count, then marks e clean. It stops once a newer epoch claims
// the cell; the words of that epoch are its claimer's.
func (c *cell) retag(e int64) {
	tag := tagOf(e)
	for k := range c.c {
		for {
			w := c.c[k].Load()
			// The load of w comes before the check of the epoch, so a CAS
			// on w cannot overwrite a word of a newer epoch.
			if sameTag(w, tag) || c.epoch.Load() != e ||
				c.c[k].CompareAndSwap(w, tag) {
				break
			}
		}
	}
	for {
		cl := c.clean.Load()
		if cl >= e || c.epoch.Load() != e || c.clean.CompareAndSwap(cl, e) {
			return
		}
	}
}

// add adds d to counter k of c for epoch e.
func (c *cell) add(k int, e, d int64) {
	tag := tagOf(e)
	for {
		w := c.c[k].Load()
		var n int64
		if sameTag(w, tag) {
			n = countOf(w)
		} else if c.epoch.Load() != e {
			return // a later lap claimed the cell: e has left the window
		} // else the word is of an older lap, not yet retagged: start at zero
		if c.c[k].CompareAndSwap(w, tag|uint64(addCount(n, d))&countMask) {
			return
		}
	}
}

// Add adds delta to counter i (0 <= i < Counters) at time now. now may lie in
// the past: a negative delta at the time of an earlier Add takes that count
// back from the bucket that holds it, and has no effect once that bucket
// has left the window.
func (r *Ring) Add(now int64, i int, delta int64) {
	if c, e := r.cellFor(now); c != nil {
		c.add(i, e, delta)
	}
}

// Add2 adds da to counter a and db to counter b in the same cell, skipping
// zero deltas. It saves choosing a cell twice on the hot path.
func (r *Ring) Add2(now int64, a int, da int64, b int, db int64) {
	c, e := r.cellFor(now)
	if c == nil {
		return
	}
	if da != 0 {
		c.add(a, e, da)
	}
	if db != 0 {
		c.add(b, e, db)
	}
}

// Sum returns the totals of every counter over the window ending at now.
func (r *Ring) Sum(now int64) [Counters]int64 {
	var out [Counters]int64
	e := r.epochOf(now)
	for i := range r.cells {
		c := &r.cells[i]
		ce := c.epoch.Load()
		if ce <= e-r.buckets || ce > e {
			continue
		}
		tag := tagOf(ce)
		for j := range out {
			// A word not yet retagged holds an older lap; one with another
			// tag, a lap claimed since ce was read.
			if w := c.c[j].Load(); sameTag(w, tag) {
				out[j] += countOf(w)
			}
		}
	}
	return out
}

// Reset forgets every count. Adds that run concurrently with it may be
// kept or forgotten.
func (r *Ring) Reset() {
	for i := range r.cells {
		c := &r.cells[i]
		c.epoch.Store(noEpoch)
		c.clean.Store(noEpoch)
		for j := range c.c {
			c.c[j].Store(tagOf(noEpoch))
		}
	}
}
