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
// complete windows. Only complete windows count, so the ceilings change at
// most once per window, from a finished measurement, and a burst cannot
// raise its own ceiling while it arrives. When the room is too small,
// critical requests fill it, the peak reaches the ceiling and the next
// window's ceiling is larger (Plan adds a margin), so the estimate corrects
// itself upwards window by window (up to Plan's bound); once the critical
// load falls, the old peak is forgotten after two windows.
//
// Room is the measured concurrency Plan sizes the critical ceiling from:
// Peak, except after a complete window in which critical requests held
// slots and the lower classes got at most a fifth of the admissions
// (crowdedShare; the admissions are counted through the function given to
// NewReserve). The room beyond the limit exists because
// the lower classes' requests, up to their own ceilings, stretch critical's
// latency and so the slots it needs. Once they are all shed there is nothing
// left to make room against: the critical class is the route's whole load,
// and its in-flight count grows only with its own queue. Behind a dependency
// that serves fewer critical requests than arrive (the laboratory's latency
// step: 32 connections at 1.2 s serve 26.7 a second, critical requests
// arrive at 30 a second), room grown from that count ratchets up window
// after window to Plan's bound, 4x the limit, and every request waits
// behind the queue (simulator: 72 in flight at a limit of 18, answers after
// 2.2-2.7 s for a 2 s deadline). Room is then 0 and the critical ceiling is
// the limit, which the limiter sizes from the latency: in the simulator
// the step's p99 fell from 2367 to 1803 ms and its goodput ratio rose from
// 0.953 to 0.964, every other scenario unchanged. A trickle of lower-class
// requests, each taking a slot the moment critical frees one, does not
// stretch critical's latency either: in the simulated step they got 0-7 of
// a half-second window's admissions beside 5-20 critical ones, and each such
// window gave the room back (live, 36-47 in flight on the 32 connections). Counted
// as crowded, the in-flight count stays near the limit: over 7 alternated
// live runs against 8 of the code before, the step's p99 was 1.04-1.15x
// (mean 1.08) the static baseline's instead of 1.08-1.19x (mean 1.12), the
// goodput ratio 0.94-0.98 (0.95-0.98), and critical success 69-77% instead
// of 76-85%: the requests the room admitted beyond the connections queued
// and answered late in their deadline, at the cost of everyone's tail. In
// the CPU-bound scenarios the lower classes get more than a fifth of the
// admissions (the simulator's rows are unchanged) and Room is Peak.
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

	admitted  func() (critical, lower uint64) // the admissions so far (nil: not counted)
	critMark  atomic.Uint64                   // the critical admissions when the open window began
	lowerMark atomic.Uint64                   // the lower classes' admissions then
	crowded   atomic.Bool                     // the last complete window: critical held slots, the lower classes got at most crowdedShare of the admissions
}

// crowdedShare is the largest share of a window's admissions the lower
// classes may get for the window to count as crowded (see Reserve).
const crowdedShare = 0.2

// NewReserve returns a Reserve measuring over windows of the given length;
// window <= 0 means DefaultReserveWindow. admitted, if not nil, returns how
// many requests of the critical class and of the lower classes (every class
// but critical) have been admitted so far, counts that only grow (the
// caller's metrics); it is called once per window (see Room). With nil, Room
// is Peak.
func NewReserve(window time.Duration, admitted func() (critical, lower uint64)) *Reserve {
	if window <= 0 {
		window = DefaultReserveWindow
	}
	r := &Reserve{window: int64(window), admitted: admitted}
	if admitted != nil {
		c, l := admitted()
		r.critMark.Store(c)
		r.lowerMark.Store(l)
	}
	return r
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

// Room returns the critical concurrency Plan should make room for as of now:
// Peak, or 0 when in the last complete window critical requests held slots
// while the lower classes got at most a fifth of the admissions (see
// Reserve).
func (r *Reserve) Room(now int64) int {
	p := r.Peak(now) // rolls the window first, so crowded is the last complete one's
	if r.crowded.Load() {
		return 0
	}
	return p
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
// count. With the admission counts, it also notes whether the closed window
// (the last complete one) had critical requests in flight and the lower
// classes at most crowdedShare of its admissions; an idle last window does
// not.
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
	if r.admitted != nil {
		c, l := r.admitted()
		crit, lower := float64(c-r.critMark.Swap(c)), float64(l-r.lowerMark.Swap(l))
		r.crowded.Store(p > 0 && lower <= crowdedShare*(lower+crit))
	}
}
