package shed

import (
	"math"
	"sync/atomic"
	"time"
)

// DefaultReserveWindow is the period over which a Reserve remembers the
// critical class's peak concurrency when NewReserve is given none.
const DefaultReserveWindow = time.Second

// Reserve measures the critical class's concurrency, so that the room kept
// for it follows what it really needs, not a fixed share of the limit: at a
// limit of 6 a 10% share is less than one slot, while critical traffic at a
// tenth of the arrivals of a saturated server holds several slots (its
// arrival rate times the latency, which grows with the load).
//
// The critical class's in-flight count is tracked as its requests are
// admitted and released; Peak, its largest value over the current and the
// previous window, is the measured concurrency that Plan sizes the critical
// ceiling from (the peak plus Margin's one standard deviation). When the
// room is too small, critical requests fill it, the peak rises to the
// ceiling and the next ceiling is larger, so the estimate corrects itself
// upwards within a window (up to Plan's bound); once the critical load
// falls, the old peak is forgotten after two windows.
//
// A Reserve is safe for concurrent use and allocates nothing; the zero value
// is not usable, call NewReserve.
type Reserve struct {
	window   int64
	inflight atomic.Int64
	peak     atomic.Int64 // peak in-flight in the current window
	last     atomic.Int64 // peak of the previous window
	start    atomic.Int64 // start of the current window (ns, clock's Nanotime)
}

// NewReserve returns a Reserve remembering peaks for window (two windows at
// most); window <= 0 means DefaultReserveWindow.
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
		r.inflight.Store(0) // more releases than admissions: a caller bug, do not go negative
	}
	r.roll(now)
}

// Peak returns the critical class's measured concurrency: its largest
// in-flight count over the current and the previous window as of now.
func (r *Reserve) Peak(now int64) int {
	r.roll(now)
	return int(max(r.peak.Load(), r.last.Load()))
}

// Margin returns the room to keep for a measured critical concurrency of
// peak slots: peak plus one standard deviation of a Poisson count with that
// mean, ceil(sqrt(peak)); at least 1.
func Margin(peak int) int {
	if peak <= 0 {
		return 1
	}
	return peak + int(math.Ceil(math.Sqrt(float64(peak))))
}

// roll starts a new window when the current one has ended: the current peak
// becomes the previous one (or, after more than one idle window, is
// forgotten) and the new window's peak starts at the present in-flight count.
func (r *Reserve) roll(now int64) {
	s := r.start.Load()
	if now-s < r.window {
		return
	}
	if !r.start.CompareAndSwap(s, now) {
		return // another caller rolled it
	}
	p := r.peak.Swap(r.inflight.Load())
	if now-s >= 2*r.window {
		p = 0
	}
	r.last.Store(p)
}
