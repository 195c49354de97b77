package limit

import (
	"math/bits"
	"runtime"
	"sync/atomic"
)

// A sample shard packs the sample count and the sum of round-trip times into
// one word, so that Observe costs a single atomic add: the count in the top
// 20 bits, the RTT sum in units of 64 ns in the low 44 bits. The largest
// in-flight count and the drops live beside it; they are written rarely (a
// new maximum, a drop).
const (
	rttBits    = 44
	rttMask    = 1<<rttBits - 1
	rttShift   = 6                  // RTT unit: 64 ns
	maxRTTUnit = 1<<30 - 1          // one sample's RTT is capped at about 68 s
	countOne   = 1 << rttBits       // one sample
	countGuard = 1 << 63            // a shard with 2^19 samples ...
	rttGuard   = 1 << (rttBits - 1) // ... or half its RTT range closes the window whatever the clock says
	cacheLine  = 128                // two lines: adjacent-line prefetch makes 64 bytes share
)

type shard struct {
	packed      atomic.Uint64
	maxInflight atomic.Int64
	drops       atomic.Int64
	_           [cacheLine - 24]byte
}

// window is the summary of the samples of one window.
type window struct {
	start, end  int64
	count       int64
	drops       int64
	maxInflight int64
	sumRTT      float64 // nanoseconds
	avgRTT      float64 // nanoseconds
	concurrency float64 // time-averaged in-flight (Little's law: sum of RTTs / duration)
	used        bool    // the limit was in use
}

// finish derives the window's statistics; the limit was in use when in-flight
// reached busyAt at least once.
func (w *window) finish(busyAt int64) {
	if w.count > 0 {
		w.avgRTT = w.sumRTT / float64(w.count)
	}
	if d := w.end - w.start; d > 0 {
		w.concurrency = w.sumRTT / float64(d)
	}
	w.used = w.count > 0 && w.maxInflight >= busyAt
}

// idle reports whether the window's load was far below limit: neither
// latency nor drops then say anything about the limit, and acting on them at
// low traffic would ratchet the limit down with nothing to grow it back.
func (w *window) idle(limit float64) bool {
	return !w.used && w.concurrency < limit*idleShare
}

// rate returns the window's completions per second.
func (w *window) rate() float64 {
	if d := w.end - w.start; d > 0 {
		return float64(w.count) * 1e9 / float64(d)
	}
	return 0
}

func (w *window) dropRatio() float64 {
	if w.count == 0 {
		return 0
	}
	return float64(w.drops) / float64(w.count)
}

func newShards(n int) []shard {
	if n <= 0 {
		// Random picks collide: with 8 shards per P two busy Ps share a
		// cache line on about one Observe in eight.
		n = max(16, 8*runtime.GOMAXPROCS(0))
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	return make([]shard, n)
}

// rttUnits converts a round-trip time to the shard's units, rounding to the
// nearest unit and capping.
func rttUnits(rtt int64) uint64 {
	if rtt <= 0 {
		return 0
	}
	return min(uint64(rtt+1<<(rttShift-1))>>rttShift, maxRTTUnit)
}

// countSamples returns the samples accumulated so far without taking them.
func countSamples(shards []shard) int64 {
	var n int64
	for i := range shards {
		n += int64(shards[i].packed.Load() >> rttBits)
	}
	return n
}

// take empties the shards into w.
func take(shards []shard, w *window) {
	var units uint64
	for i := range shards {
		p := shards[i].packed.Swap(0)
		w.count += int64(p >> rttBits)
		units += p & rttMask
		w.drops += shards[i].drops.Swap(0)
		w.maxInflight = max(w.maxInflight, shards[i].maxInflight.Swap(0))
	}
	w.sumRTT = float64(units) * (1 << rttShift)
	// A drop added just after the swap of its shard's count lands in the
	// next window; keep the summary consistent.
	w.drops = min(w.drops, w.count)
}
