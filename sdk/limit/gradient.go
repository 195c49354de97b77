package limit

import (
	"math"

	"governor.dev/governor/sdk/clock"
)

// Gradient is the gradient limiter: the limit follows noLoadRTT / sampleRTT
// with a bounded, smoothed step and square-root headroom. See the package
// documentation.
type Gradient struct{ core }

var (
	_ Limiter         = (*Gradient)(nil)
	_ Inspector       = (*Gradient)(nil)
	_ HintedObserver  = (*Gradient)(nil)
	_ RefusalObserver = (*Gradient)(nil)
)

type gradient struct{}

func newGradient(p params, o options, clk clock.Clock) *Gradient {
	g := &Gradient{}
	g.init(p, o, gradient{}, clk)
	return g
}

func (gradient) engaged(*core, *window) bool { return true }

func (gradient) update(c *core, w *window) float64 {
	l := c.cur
	if w.idle(l) {
		return l
	}
	if r := w.dropRatio(); r >= dropThreshold {
		return l * min(max(1-r, 0.5), 0.9)
	}
	if w.avgRTT <= 0 || c.noLoad <= 0 {
		return l // no latency information (RTTs below the 64 ns resolution)
	}
	g := min(max(c.tolerated()/w.avgRTT, 0.5), 2)
	target := l*g + math.Sqrt(l*g)
	if target > l && (!w.used || (w.concurrency < l-burstRoom*math.Sqrt(l) && w.maxInflight < c.limit.Load())) {
		// Never grow a limit nobody uses, nor one already well above
		// the load: a window whose in-flight touched the busy share
		// once (a burst) but whose average stayed more than burstRoom
		// square roots below the limit shows the limit has room for
		// its bursts.
		return l
	}
	if c.congested && w.avgRTT >= severe*c.noLoad && w.avgRTT >= c.lastRTT*persists {
		// The second slow window in a row, several times the no-load
		// RTT and not recovering: a step (a slow dependency, an
		// overload onset), not the tail of a pause. Cut by the whole
		// bounded gradient, without headroom or smoothing: the limit
		// halves at once (g is clamped to 1/2 that far above the
		// tolerance).
		return l * g
	}
	return l + smoothing*(target-l)
}
