package governor

import (
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

// durationHist is a lock-free duration histogram over durationBounds; the
// last bucket is +Inf. Buckets are not cumulative until exported.
type durationHist struct {
	buckets [len(durationBounds) + 1]atomic.Uint64
	sum     atomic.Int64 // nanoseconds
}

func (h *durationHist) observe(d time.Duration) {
	i := 0
	for i < len(durationBounds) && d > durationBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(int64(d))
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
