// Package window provides striped, bucketed sliding-window counters: the
// statistics behind the circuit breaker, the adaptive throttle and the retry
// budget.
//
// A Ring divides its window into buckets of equal width. Each bucket is split
// into stripes on separate cache lines; a writer adds to a randomly chosen
// stripe, so concurrent writers on different cores rarely touch the same line
// and the hot path costs one atomic add without contention. Readers sum every
// live cell, which is the expensive side and is done only when a decision
// needs it.
//
// A bucket is recycled lazily by the first writer that sees it belong to an
// older epoch. Under concurrency a handful of counts can be lost at the moment
// a bucket is recycled; the statistics are approximate by that amount and
// exact for a single writer.
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

// cell is 128 bytes with its data in the first 32: whatever the alignment of
// the slice, no two cells' data share a 64-byte cache line.
type cell struct {
	epoch atomic.Int64
	c     [Counters]atomic.Int64
	_     [128 - 8*(Counters+1)]byte
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
		r.cells[i].epoch.Store(-1 << 62)
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

// cellFor returns the cell of a random stripe of the bucket holding now,
// recycling it if it still holds an older epoch.
func (r *Ring) cellFor(now int64) *cell {
	e := r.epochOf(now)
	i := (e&(r.buckets-1))*stripes + int64(rand.Uint32()&(stripes-1))
	c := &r.cells[i]
	if old := c.epoch.Load(); old != e {
		if old > e {
			return nil // a sample older than the window: drop it
		}
		if c.epoch.CompareAndSwap(old, e) {
			for i := range c.c {
				c.c[i].Store(0)
			}
		}
	}
	return c
}

// Add adds delta to counter i (0 <= i < Counters) at time now. now may lie in
// the past: a negative delta at the time of an earlier Add takes that count
// back from the bucket that holds it, and has no effect once that bucket
// has left the window.
func (r *Ring) Add(now int64, i int, delta int64) {
	if c := r.cellFor(now); c != nil {
		c.c[i].Add(delta)
	}
}

// Add2 adds da to counter a and db to counter b in the same cell, skipping
// zero deltas. It saves choosing a cell twice on the hot path.
func (r *Ring) Add2(now int64, a int, da int64, b int, db int64) {
	c := r.cellFor(now)
	if c == nil {
		return
	}
	if da != 0 {
		c.c[a].Add(da)
	}
	if db != 0 {
		c.c[b].Add(db)
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
		for j := range out {
			out[j] += c.c[j].Load()
		}
	}
	return out
}

// Reset forgets every count.
func (r *Ring) Reset() {
	for i := range r.cells {
		c := &r.cells[i]
		c.epoch.Store(-1 << 62)
		for j := range c.c {
			c.c[j].Store(0)
		}
	}
}
