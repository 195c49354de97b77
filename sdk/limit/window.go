package limit

import (
	"math/bits"
	"runtime"
	"sync/atomic"
)

// A sample shard packs three counters into one word so that Observe costs
// two atomic adds: count, busy (admitted near the limit) and dropped, 21 bits
// each. The round-trip times add up in a second word.
const (
	fieldBits  = 21
	fieldMask  = 1<<fieldBits - 1
	busyShift  = fieldBits
	dropShift  = 2 * fieldBits
	busyOne    = 1 << busyShift
	dropOne    = 1 << dropShift
	shardGuard = 1 << 20 // a shard this full closes the window whatever the clock says
	cacheLine  = 128     // two lines: adjacent-line prefetch makes 64 bytes share
)

type shard struct {
	packed atomic.Uint64
	rtt    atomic.Uint64
	_      [cacheLine - 16]byte
}

// window is the summary of the samples of one window.
type window struct {
	start, end  int64
	count, busy int64
	drops       int64
	sumRTT      uint64
	avgRTT      float64 // nanoseconds
	concurrency float64 // time-averaged in-flight (Little's law: sum of RTTs / duration)
	used        bool    // the limit was in use
}

func (w *window) finish() {
	if w.count > 0 {
		w.avgRTT = float64(w.sumRTT) / float64(w.count)
	}
	if d := w.end - w.start; d > 0 {
		w.concurrency = float64(w.sumRTT) / float64(d)
	}
	w.used = w.busy*10 >= w.count && w.busy > 0
}

// idle reports whether the window's load was far below limit: neither
// latency nor drops then say anything about the limit, and acting on them at
// low traffic would ratchet the limit down with nothing to grow it back.
func (w *window) idle(limit float64) bool {
	return !w.used && w.concurrency < limit*idleShare
}

func (w *window) dropRatio() float64 {
	if w.count == 0 {
		return 0
	}
	return float64(w.drops) / float64(w.count)
}

func newShards(n int) []shard {
	if n <= 0 {
		n = max(8, 4*runtime.GOMAXPROCS(0))
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	return make([]shard, n)
}

// countSamples returns the samples accumulated so far without taking them.
func countSamples(shards []shard) int64 {
	var n int64
	for i := range shards {
		n += int64(shards[i].packed.Load() & fieldMask)
	}
	return n
}

// take empties the shards into w.
func take(shards []shard, w *window) {
	for i := range shards {
		p := shards[i].packed.Swap(0)
		w.count += int64(p & fieldMask)
		w.busy += int64(p >> busyShift & fieldMask)
		w.drops += int64(p >> dropShift & fieldMask)
		w.sumRTT += shards[i].rtt.Swap(0)
	}
	// A sample whose two adds straddle the swap is split between windows;
	// keep the summary consistent.
	w.busy = min(w.busy, w.count)
	w.drops = min(w.drops, w.count)
}
