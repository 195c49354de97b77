package lab

import (
	"sync"
	"sync/atomic"
	"time"
)

// burner does real CPU work: a calibrated number of xorshift rounds per
// nanosecond of requested CPU time, in chunks of about 50 µs between which
// it passes the pause gate.
type burner struct {
	perNs float64 // rounds per nanosecond
	gate  *sync.RWMutex
	sink  atomic.Uint64
}

const chunk = 50 * time.Microsecond

func spin(n int, x uint64) uint64 {
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// newBurner measures the work rate on this machine: the fastest of five
// timed runs (the least disturbed by other processes).
func newBurner(gate *sync.RWMutex) *burner {
	const rounds = 2_000_000
	best := time.Duration(1<<63 - 1)
	var x uint64 = 88172645463325252
	for range 5 {
		t := time.Now()
		x = spin(rounds, x)
		best = min(best, time.Since(t))
	}
	b := &burner{perNs: rounds / float64(best.Nanoseconds()), gate: gate}
	b.sink.Store(x)
	return b
}

// burn spends d of CPU time (as measured unloaded).
func (b *burner) burn(d time.Duration) {
	x := b.sink.Load() | 1
	for d > 0 {
		c := min(d, chunk)
		x = spin(int(float64(c.Nanoseconds())*b.perNs), x)
		d -= c
		waitPause(b.gate)
	}
	b.sink.Store(x)
}

// waitPause returns at once unless a pause holds the gate, and then when the
// pause ends.
func waitPause(gate *sync.RWMutex) {
	gate.RLock()
	//lint:ignore SA2001 an empty critical section is the point: it waits out a pause.
	gate.RUnlock()
}
