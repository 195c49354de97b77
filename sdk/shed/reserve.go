package shed

import (
	"math"
	"sync/atomic"
	"time"
)

// DefaultReserveWindow is the length of the windows over which a Reserve
// measures the critical class's peak concurrency when NewReserve is given
// none.
const DefaultReserveWindow = 500 * time.Millisecond

// Reserve measures the critical class's concurrency, so that the room kept
// for it follows what it really needs, not a fixed share of the limit: at a
// limit of 6 a 10% share is less than one slot, while critical traffic at a
// tenth of the arrivals of a saturated server holds several slots (its
// arrival rate times the latency, which grows with the load).
//
// The critical class's in-flight count is tracked as its requests are
// admitted and released. Peak is its largest value over the last two
// complete windows: the measured concurrency Plan sizes the critical ceiling
// from. Only complete windows count, so the ceilings change at most once per
// window, from a finished measurement, and a burst cannot raise its own
// ceiling while it arrives. When the room is too small, critical requests
// fill it, the peak reaches the ceiling and the next window's ceiling is
// larger (Plan adds a margin), so the estimate corrects itself upwards
// window by window (up to Plan's bound); once the critical load falls, the
// old peak is forgotten after two windows.
//
// A Reserve is safe for concurrent use and allocates nothing; the zero value
// is not usable, call NewReserve.
type Reserve struct {
	window   int64
	inflight atomic.Int64
	peak     atomic.Int64 // peak in-flight in the open window
	last     atomic.Int64 // peak of the last complete window
	prev     atomic.Int64 // peak of the window before it
	start    atomic.Int64 // start of the open window (ns, the caller's Nanotime)
}

// NewReserve returns a Reserve measuring over windows of the given length;
// window <= 0 means DefaultReserveWindow.
func NewReserve(window time.Duration) *Reserve {
	if window <= 0 {
		window = DefaultReserveWindow
	}
	return &Reserve{window: int64(window)}
}

// Admitted records a critical request taking a slot at now (ns).
func (r *Reserve) Admitted(now int64) {
	r.roll(now)
	v := r.inflight.Add(1)
	for {
		p := r.peak.Load()
		if v <= p || r.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// Released records a critical request giving its slot back at now (ns).
func (r *Reserve) Released(now int64) {
	if r.inflight.Add(-1) < 0 {
		r.inflight.Store(0) // more releases than admissions (a caller bug): do not go negative
	}
	r.roll(now)
}

// Peak returns the critical class's measured concurrency as of now: its
// largest in-flight count over the last two complete windows.
func (r *Reserve) Peak(now int64) int {
	r.roll(now)
	return int(max(r.last.Load(), r.prev.Load()))
}

// Margin returns the room to keep for a measured critical concurrency of
// peak slots: peak plus one standard deviation of a Poisson count with that
// mean, ceil(sqrt(peak)); 0 when nothing was measured.
func Margin(peak int) int {
	if peak <= 0 {
		return 0
	}
	return peak + int(math.Ceil(math.Sqrt(float64(peak))))
}

// roll closes the open window when it has ended: its peak becomes the last
// one, the last one the one before, and windows that passed without any
// call count as idle. The new window's peak starts at the present in-flight
// count.
func (r *Reserve) roll(now int64) {
	s := r.start.Load()
	if now-s < r.window {
		return
	}
	if !r.start.CompareAndSwap(s, now) {
		return // another caller closed it
	}
	p := r.peak.Swap(r.inflight.Load())
	last := r.last.Load()
	switch ended := (now - s) / r.window; {
	case ended >= 3: // the open window and two more passed: all old
		p, last = 0, 0
	case ended == 2: // one idle window after the open one
		p, last = 0, p
	}
	r.prev.Store(last)
	r.last.Store(p)
}
