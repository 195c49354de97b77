package limit

import (
	"math"

	"governor.dev/governor/sdk/clock"
)

// throughputDecay is how fast Little's law forgets a maximum throughput that
// is no longer reached while the limit is in use (per window).
const throughputDecay = 0.1

// Little is the Little's-law limiter: limit ~ max throughput x no-load
// latency, enforced while an overload signal is on. See the package
// documentation.
type Little struct{ core }

var (
	_ Limiter         = (*Little)(nil)
	_ Inspector       = (*Little)(nil)
	_ HintedObserver  = (*Little)(nil)
	_ RefusalObserver = (*Little)(nil)
)

type little struct {
	signal       func() bool // nil: the queueing signal
	hold         int64
	engagedUntil int64
	maxTP        float64 // requests per second
}

func newLittle(p params, o options, clk clock.Clock) *Little {
	l := &Little{}
	l.init(p, o, &little{signal: o.signal, hold: o.hold, maxTP: o.maxTP}, clk)
	l.snap.maxTP.Store(math.Float64bits(o.maxTP))
	return l
}

func (l *little) engaged(c *core, w *window) bool {
	var on bool
	if l.signal != nil {
		on = l.signal()
	} else {
		on = c.noLoad > 0 && w.avgRTT > c.noLoad*(1+c.p.tolerance)
	}
	// Releasing a limit that is in use would let the overload back in at
	// once: stay engaged while it binds, and for the hold time after the
	// signal was last on.
	if on || w.dropRatio() >= dropThreshold || (c.enforced && w.used) {
		l.engagedUntil = w.end + l.hold
		return true
	}
	return w.end < l.engagedUntil
}

func (l *little) update(c *core, w *window) float64 {
	if w.end > w.start {
		tp := w.rate()
		switch {
		case tp > l.maxTP:
			l.maxTP = tp
		case w.used:
			l.maxTP += throughputDecay * (tp - l.maxTP)
		}
		c.snap.maxTP.Store(math.Float64bits(l.maxTP))
	}
	cur := c.cur
	if w.idle(cur) {
		return cur
	}
	if r := w.dropRatio(); r >= dropThreshold {
		return cur * min(max(1-r, 0.5), 0.9)
	}
	if w.avgRTT <= 0 || c.noLoad <= 0 {
		return cur // no latency information (RTTs below the 64 ns resolution)
	}
	target := l.maxTP * ((2+c.p.tolerance)*c.noLoad - w.avgRTT) / 1e9
	if w.used && w.avgRTT <= c.noLoad*(1+c.p.tolerance/2) {
		// In use without queueing: the window's throughput is bounded by
		// the limit itself (bursts hit it), not by the server. Grow, so a
		// healthy service does not reject its bursts and the limit can be
		// released.
		target = max(target, cur*(1+c.p.tolerance/2))
	}
	target = min(max(target, cur/2), cur*2)
	if !w.used && (target > cur || w.avgRTT <= c.noLoad*(1+c.p.tolerance)) {
		return cur // an unused limit moves only on queueing, never toward the demand
	}
	return cur + smoothing*(target-cur)
}
