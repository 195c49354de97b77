package limit

// The no-load RTT estimate and the probes that re-measure it.

type probeState struct {
	active     bool
	steps      int
	saved      float64
	prev, best float64
	bestLimit  float64 // the limit the fastest probe window ran at (0: it did not use it)
	settle     int64   // windows starting before this still see the previous limit
}

// episode is a run of congested windows.
type episode struct {
	active bool
	limit  float64 // the limit when it began or was last halved
	rtt    float64 // the latency then
	halved bool    // the limit was halved since; judged from judge
	judge  int64   // windows starting before this still see the limit before the halving
}

func (c *core) probeDelay() int64 { return c.jitter(c.p.probeInterval) }

// firstProbeDelay is the delay of the first probe: soon, because a service
// that starts under load sees no fast window to learn its no-load RTT from.
func (c *core) firstProbeDelay() int64 {
	return c.jitter(min(c.p.probeInterval, int64(firstProbe)))
}

func (c *core) jitter(d int64) int64 {
	f := 1 - probeJitter + 2*probeJitter*c.rng.Float64()
	return int64(float64(d) * f)
}

// lowerBaseline lowers the no-load RTT at once to a faster window.
func (c *core) lowerBaseline(w *window) {
	if w.avgRTT <= 0 || (c.noLoad != 0 && w.avgRTT >= c.noLoad) {
		return
	}
	if w.avgRTT < c.noLoad*staleBaseline && !c.probe.active {
		// The no-load RTT fell a lot at once: the estimate was stale (a
		// slow period ended), and the limit learned against it is too.
		// Probe soon instead of at the next interval, but not before the
		// requests admitted in the slow period have drained (one slow
		// RTT): while they finish the latency keeps falling whatever the
		// limit, and a probe would read that as its own doing and lower
		// the limit step after step. Meanwhile the slots the slow
		// requests held turn over many times faster: let the limit be at
		// least the recent peak in flight (and end the additive growth
		// after drops, which were the slow period's), so that new
		// requests take the slots as the slow ones free them, instead of
		// waiting for the in-flight count to fall below a limit learned
		// at the slow RTT. The latency of those draining requests is no
		// reason to cut either. The estimate often falls in several
		// steps as the slow requests thin out (1.1 s, then 0.56 s, then
		// 0.11 s): each step's RTT is shorter than the slow period's, so
		// the wait is the longest one, not the last.
		c.drainEnd = max(c.drainEnd, w.end+int64(c.lastRTT))
		c.nextProbe = c.drainEnd
		c.cur = c.clamp(max(c.cur, c.peak))
		c.calm = 0
	}
	c.noLoad = w.avgRTT
}

// maybeStartProbe starts a due probe. A probe only makes sense where the
// limit shapes the load: it waits for a window that uses an enforced limit.
func (c *core) maybeStartProbe(w *window) {
	if w.end < c.nextProbe || !w.used || !c.enforced {
		return
	}
	c.probe = probeState{active: true, saved: c.cur, prev: w.avgRTT, best: w.avgRTT, bestLimit: c.cur,
		settle: w.end + int64(w.avgRTT*probeSettle)}
	c.cur = c.clamp(c.cur * probeStep)
}

// watchResponse follows an episode of congestion (latency above the
// tolerance): if the limit was halved during it and the latency did not come
// down, the latency is not this limiter's queue but a slower dependency or a
// slower service. The no-load RTT is then stale: probe at once instead of
// holding the limit at its floor until the next interval. It reports whether
// it concluded so.
func (c *core) watchResponse(w *window, next float64) bool {
	congested := c.noLoad > 0 && w.avgRTT > c.tolerated()
	ep := &c.episode
	switch {
	case !congested:
		ep.active = false
	case !ep.active:
		*ep = episode{active: true, limit: c.cur, rtt: w.avgRTT}
	case ep.halved:
		// Judge the halving on a window of requests admitted under it,
		// not on the window that decided it.
		if w.start < ep.judge {
			return false
		}
		if w.used && w.avgRTT >= ep.rtt*unresponsive {
			c.nextProbe = w.end
			ep.active = false
			return true
		}
		*ep = episode{active: true, limit: next, rtt: w.avgRTT} // it did respond: compare the next halving with here
	case next <= ep.limit/2 || next <= float64(c.p.min) && c.cur <= float64(c.p.min):
		// Halved since the episode began, or held at Min, where it
		// cannot halve any more.
		ep.halved, ep.judge = true, w.end+int64(w.avgRTT*probeSettle)
	}
	return false
}

// probeWindow handles a window measured under a lowered probe limit: lower
// further while the latency keeps falling, else adopt the fastest window as
// the no-load RTT and restore the limit.
func (c *core) probeWindow(w *window) {
	pr := &c.probe
	if w.start < pr.settle {
		return // requests admitted before the last step still finish in this window
	}
	pr.steps++
	if w.avgRTT <= pr.best {
		pr.best, pr.bestLimit = w.avgRTT, c.cur
		if !w.used {
			pr.bestLimit = 0 // the limit did not shape this window: it says nothing about the limit
		}
	}
	falling := w.avgRTT < pr.prev*probeFalling
	pr.prev = w.avgRTT
	atMin := c.cur <= float64(c.p.min)
	if falling && !atMin && pr.steps < probeMaxSteps {
		c.cur = c.clamp(c.cur * probeStep)
		pr.settle = w.end + int64(w.avgRTT*probeSettle)
		return
	}
	// The probe is conclusive when the latency stopped responding to a lower
	// limit; an inconclusive probe may only lower the estimate.
	if !falling || atMin || pr.best < c.noLoad {
		c.noLoad = pr.best
	}
	// Restore the limit, but not above what the fastest probe window ran
	// at plus the tolerance: after a stale estimate the saved limit was
	// learned against the wrong baseline.
	restore := pr.saved
	if pr.bestLimit > 0 {
		restore = min(restore, pr.bestLimit*(1+c.p.tolerance))
	}
	c.cur = c.clamp(restore)
	pr.active = false
	c.nextProbe = w.end + c.probeDelay()
	c.snap.probes.Add(1)
}
