package governor

import (
	"runtime"
	"sync/atomic"
	"time"
)

// durationBounds are the upper bounds of the request duration histogram.
var durationBounds = [...]time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// queueBounds are the upper bounds of the queue delay histogram.
var queueBounds = [...]time.Duration{
	500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond,
}

// A durationHist bucket packs its count (top 20 bits) and the sum of its
// durations in nanoseconds (low 44 bits) into one hot word, so that observe
// costs a single atomic add. Before either part can overflow (2^19 samples,
// or 2^43 ns of summed time) the word is folded into the cold totals; a
// duration outside [0, histDirect) goes to the cold totals directly.
const (
	histSumBits  = 44
	histSumMask  = 1<<histSumBits - 1
	histCountOne = 1 << histSumBits
	histFoldBits = 1<<63 | 1<<(histSumBits-1) // 2^19 samples or half the sum range fold the word
	histDirect   = 1 << 36                    // ns (about 69 s): far from a carry out of the sum
)

// durationHist is a lock-free duration histogram over durationBounds; the
// last bucket is +Inf. Buckets are not cumulative until exported.
type durationHist struct {
	hot [len(durationBounds) + 1]atomic.Uint64 // packed count and sum

	// Cold totals, written by folds and out-of-range durations only.
	counts  [len(durationBounds) + 1]atomic.Uint64
	sum     atomic.Int64 // nanoseconds
	folding atomic.Int64 // folds in progress
	folds   atomic.Uint64
}

func (h *durationHist) observe(d time.Duration) {
	i := 0
	for i < len(durationBounds) && d > durationBounds[i] {
		i++
	}
	if uint64(d) < histDirect && h.hot[i].Add(histCountOne|uint64(d))&histFoldBits == 0 {
		return
	}
	h.slow(i, d)
}

// slow records a duration outside the packed range, or folds a hot word
// that has reached a fold bit.
func (h *durationHist) slow(i int, d time.Duration) {
	if uint64(d) >= histDirect {
		h.counts[i].Add(1)
		h.sum.Add(int64(d))
		return
	}
	h.fold(i)
}

// fold moves bucket i's hot word into the cold totals.
func (h *durationHist) fold(i int) {
	h.folding.Add(1)
	v := h.hot[i].Swap(0)
	h.counts[i].Add(v >> histSumBits)
	h.sum.Add(int64(v & histSumMask))
	h.folds.Add(1)
	h.folding.Add(-1)
}

// read adds the per-bucket counts and the sum (ns) to counts and sum. A read
// that overlaps a fold is retried, so a sample is never counted twice or
// missed.
func (h *durationHist) read(counts *[len(durationBounds) + 1]uint64, sum *int64) {
	for {
		n := h.folds.Load()
		if h.folding.Load() == 0 {
			var c [len(durationBounds) + 1]uint64
			s := h.sum.Load()
			for b := range c {
				v := h.hot[b].Load()
				c[b] = h.counts[b].Load() + v>>histSumBits
				s += int64(v & histSumMask)
			}
			if h.folding.Load() == 0 && h.folds.Load() == n {
				for b := range c {
					counts[b] += c[b]
				}
				*sum += s
				return
			}
		}
		runtime.Gosched()
	}
}

// queueHist is durationHist over queueBounds; it sits on the slow (queued)
// path only.
type queueHist struct {
	buckets [len(queueBounds) + 1]atomic.Uint64
	sum     atomic.Int64
}

func (h *queueHist) observe(d time.Duration) {
	i := 0
	for i < len(queueBounds) && d > queueBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(int64(d))
}
