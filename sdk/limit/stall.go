package limit

import "math"

// Stalls: no request finishes while the limit refuses requests.

// Refused records that a request was refused at now because the limit was
// full (see RefusalObserver). It costs one atomic load unless the current
// window is overdue, that is unless no request has finished since its end:
// then a refusal notes when the limit was found full, and the next look
// comes a window or a stall time later.
func (c *core) Refused(now int64) {
	end := c.windowEnd.Load()
	if end == closing || end == math.MinInt64 || now < end || now < c.stallNext.Load() ||
		!c.windowEnd.CompareAndSwap(end, closing) {
		return // a request finished recently, the first window has not begun, or checked recently
	}
	next := end
	defer func() { c.windowEnd.Store(next) }()
	next = c.stall(now, end)
}

// stall runs with the closing token when no request has finished since end
// (the overdue window end) and a request was refused at now. It returns the
// window end to restore.
func (c *core) stall(now, end int64) int64 {
	if end != c.fullFor {
		// The first refusal since the window end. The silence counts from
		// here at the earliest: before it nothing need have been in flight
		// (an idle period, a quiet route), and the requests of a burst
		// that follows have only just been admitted.
		c.fullFor, c.fullAt = end, now
	}
	from := c.fullAt
	after := c.stallTime()
	if c.probe.active {
		// A probe measures latencies near its fastest window: a silence
		// of several of those voids its measurement, while a silence
		// shorter is the ordinary gap between slow answers of a probe
		// that relearns a slow dependency's RTT.
		after = max(after, int64(severe*c.probe.best))
	}
	if !c.started || now-from < after {
		// Look again when the silence is long enough, or when the next
		// window can have ended (a request that finishes closes this
		// one, and the next ends a window later), whichever comes
		// first: its first refusal starts a new silence.
		c.stallNext.Store(min(from+after, now+c.window))
		return end
	}
	// Look again after another stall time at the earliest: refusals come
	// fast during a stall, and each would otherwise count the samples.
	c.stallNext.Store(now + after)
	n := countSamples(c.shards)
	if n == c.stallMark || !c.enforced {
		// Already cut for this stall (no request finished since), or the
		// limit is not enforced (Little's law before its signal): wait
		// for samples.
		return end
	}
	if c.probe.active {
		// The stall began during a probe: its windows would measure the
		// stall, not its lowered limit, and could not even close until
		// the stuck requests answer. Abandon it (the limit stays where
		// it had lowered it) and cut as without a probe.
		c.probe.active = false
		c.nextProbe = now + c.probeDelay()
	}
	// The requests in flight have not finished for several no-load RTTs
	// while the limit refuses more: a dependency stalled or slowed many
	// times over. Observe will not hear of it until they finish, which
	// can take longer than the client waits: halve the limit now, once,
	// as the second slow window of a latency step would.
	c.stallMark, c.stallAt = n, now
	// The cut opens a congestion episode that is judged like a halving
	// (watchResponse): if the requests admitted from now on are no faster
	// than the stall, the slowness is a dependency's, not this limiter's
	// queue, and a probe relearns the no-load RTT instead of halving on.
	c.episode = episode{active: true, limit: c.cur, rtt: float64(now - end), halved: true, judge: now}
	c.cur = c.clamp(c.cur * stallCut)
	c.snap.stalls.Add(1)
	c.publish()
	return end
}

// stallTime is how long no request may finish before it is a stall: a
// window, and several no-load RTTs, and the last decided window's average
// RTT (once the samples show the slowness, silences that long are its
// ordinary gaps, not a new stall).
func (c *core) stallTime() int64 {
	return max(c.window, int64(severe*c.noLoad), int64(c.lastRTT))
}
