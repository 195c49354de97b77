package limit

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"governor.dev/governor/sdk/clock"
)

// Tuning constants shared by the adaptive algorithms.
const (
	closing       = math.MaxInt64   // windowEnd while a window is being closed
	busyShare     = 0.8             // in-flight >= 80% of the limit counts as using it
	idleShare     = 0.5             // average in-flight below half the limit is idle
	burstRoom     = 3               // a used window grows the limit only if its average in-flight is within 3 sqrt(limit) of it
	dropThreshold = 0.01            // drops above 1% of a window cut the limit
	smoothing     = 0.5             // share of the way to the target taken per window
	maxWindowAge  = 10              // windows without enough samples are discarded after 10 lengths
	probeStep     = 0.75            // each probe window lowers the limit by 25%
	probeMaxSteps = 16              // while the latency falls the server is still saturated: no throughput is lost
	probeFalling  = 0.95            // the latency still falls if it dropped more than 5%
	probeJitter   = 0.25            // probe intervals vary by ±25%
	firstProbe    = 3 * time.Second // the first probe comes early
	staleBaseline = 0.8             // a window 20% faster than the no-load RTT triggers a probe
	calmWindows   = 20              // windows of additive growth after a window with drops
	calmFrom      = 0.9             // ... above this share of the limit that dropped
	unresponsive  = 0.8             // halving the limit must bring the latency below 80% of where it was
	probeSettle   = 1.5             // a probe step is measured from 1.5 RTT after it
	releaseRamp   = 2               // a released limit doubles per window up to twice the peak demand
	peakDecay     = 0.9             // the recent peak in-flight forgets 10% per window
	severe        = 4               // a window this many times the no-load RTT, after a slow one, halves the limit
	persists      = 0.8             // ... if it is not much faster than that one (a pause's tail is)
	largeCut      = 0.9             // a cut to 90% or less is followed by one round trip without cuts
	stallCut      = 0.5             // a stall (no request finishes while the limit refuses) halves the limit
	lateMargin    = 0.8             // the tolerated latency stays below 80% of the latency at which answers came late
	lateFloor     = 0.1             // ... but never below 1.1 x the no-load RTT
	queuedShare   = 0.5             // a raise is a queue if the RTT rose by half its share and the completion rate did not
)

// algorithm is what distinguishes the adaptive limiters; core calls it once
// per decided window, from the goroutine that closed the window.
type algorithm interface {
	// engaged reports whether the learned limit is enforced after w.
	engaged(c *core, w *window) bool
	// update returns the next learned limit (before clamping).
	update(c *core, w *window) float64
}

// core is the machinery shared by the adaptive limiters: sharded sampling,
// window closing, the no-load RTT estimate and its probes, publication.
type core struct {
	// Read on every Observe, written once per window.
	limit     atomic.Int64
	windowEnd atomic.Int64
	_         [cacheLine - 16]byte
	// Read by Refused while a window is overdue.
	stallNext atomic.Int64

	shards []shard
	mask   uint32
	p      params
	window int64
	minN   int64
	alg    algorithm

	// Owned by the goroutine that holds the closing token (windowEnd == closing).
	started   bool
	winStart  int64
	cur       float64 // the learned limit
	noLoad    float64 // no-load RTT estimate, ns (0: unknown)
	enforced  bool
	ceiling   float64 // the published limit
	peak      float64 // recent peak in-flight, decaying by peakDecay per window
	nextProbe int64
	probe     probeState
	rng       *rand.Rand
	taken     int64   // samples taken out of the shards, decided or discarded
	calm      int     // windows of additive growth left after drops
	dropAt    float64 // the limit at the last drops
	congested bool    // the last decided window had load and was slower than the tolerance
	lastRTT   float64 // the average RTT of the last decided window
	settle    int64   // requests admitted before this saw the limit before the last large cut
	episode   episode
	stallMark int64   // samples in the shards at the last stall cut (-1: none since the last window)
	stallAt   int64   // when the last stall cut was made
	fullFor   int64   // the window end fullAt belongs to
	fullAt    int64   // the first refusal since fullFor: the limit was full then
	grownAt   int64   // when the limit was last raised
	drainEnd  int64   // until then the requests of a slow period that ended are still draining
	raise     raise   // the last raise, while the limit is the one it set
	lateRTT   float64 // the lowest average RTT of a window with drops since the no-load RTT last fell a lot (0: none)
	lateBase  float64 // the no-load RTT when lateRTT was recorded
	win       window  // the window being decided

	snap snapshotState
}

type snapshotState struct {
	learned, noLoad, sample atomic.Int64
	windows, probes, stalls atomic.Int64
	probing, engaged        atomic.Bool
	maxTP                   atomic.Uint64
}

// init prepares c in place (the limiters embed their core by value, so
// that Observe through the Limiter interface has no extra indirection).
func (c *core) init(p params, o options, alg algorithm, clk clock.Clock) {
	c.shards = newShards(o.shards)
	c.mask = uint32(len(c.shards) - 1)
	c.p = p
	c.window = o.window
	c.minN = int64(o.minSamples)
	c.alg = alg
	c.cur = float64(p.initial)
	c.noLoad = float64(o.noLoad)
	c.enforced = true
	c.stallMark, c.stallAt, c.grownAt, c.drainEnd = -1, math.MinInt64, math.MinInt64, math.MinInt64
	c.fullFor = math.MinInt64
	if o.seeded {
		c.rng = newRand(o.seed)
	}
	c.windowEnd.Store(math.MinInt64)
	if clk != nil {
		c.begin(clk.Nanotime())
		c.windowEnd.Store(c.winStart + c.window)
	}
	c.publish()
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func (c *core) begin(now int64) {
	if c.rng == nil {
		c.rng = newRand(uint64(now))
	}
	c.started = true
	c.winStart = now
	c.nextProbe = now + c.firstProbeDelay()
}

// Limit returns the current limit.
func (c *core) Limit() int { return int(c.limit.Load()) }

// Observe records one finished request. It is lock-free and allocation-free:
// one atomic add, plus a compare-and-swap on a new in-flight maximum and an
// add on a drop.
func (c *core) Observe(now, rtt int64, inflight int, dropped bool) {
	c.ObserveShard(rand.Uint32(), now, rtt, inflight, dropped)
}

// ObserveShard is Observe recording into the sample shard hint&mask, for a
// caller that has already picked a shard for the request (HintedObserver):
// it saves drawing a random number per request. Concurrent callers should
// pass hints that differ, as their own shard choices do.
func (c *core) ObserveShard(hint uint32, now, rtt int64, inflight int, dropped bool) {
	s := &c.shards[hint&c.mask]
	v := s.packed.Add(countOne | rttUnits(rtt))
	for n := int64(inflight); ; {
		m := s.maxInflight.Load()
		if n <= m || s.maxInflight.CompareAndSwap(m, n) {
			break
		}
	}
	if dropped {
		s.drops.Add(1)
	}
	if now >= c.windowEnd.Load() || v >= countGuard || v&rttMask >= rttGuard {
		c.tryClose(now)
	}
}

func (c *core) tryClose(now int64) {
	end := c.windowEnd.Load()
	if end == closing || !c.windowEnd.CompareAndSwap(end, closing) {
		return
	}
	// Hand the token back even if an overload signal panics.
	next := now + c.window
	defer func() { c.windowEnd.Store(next) }()
	next = c.close(now)
}

// close runs with the closing token and returns the next window end.
func (c *core) close(now int64) int64 {
	if !c.started {
		c.begin(now)
		return now + c.window
	}
	if countSamples(c.shards) < c.minN {
		// Too few samples to decide: extend the window. Past maxWindowAge
		// keep extending only if the limit is in use (the limit itself
		// holds the throughput down, as behind a very slow dependency);
		// otherwise the traffic is just low: discard.
		if now-c.winStart < maxWindowAge*c.window || c.inUse() {
			return now + c.window
		}
		var w window
		take(c.shards, &w) // stale and too few: discard, keep the limit
		c.taken += w.count
		c.stallMark = -1
		c.winStart = now
		return now + c.window
	}
	// The summary lives in the core: handed to the algorithm through an
	// interface, a local would escape and allocate once per window.
	w := &c.win
	*w = window{start: c.winStart, end: now}
	take(c.shards, w)
	c.taken += w.count
	c.stallMark = -1
	w.finish(c.busyAt())
	c.winStart = now
	c.decide(w)
	return now + c.window
}

// inUse reports whether the in-flight maximum of the open window reached the
// busy share of the limit.
func (c *core) inUse() bool {
	var m int64
	for i := range c.shards {
		m = max(m, c.shards[i].maxInflight.Load())
	}
	return m >= c.busyAt()
}

func (c *core) busyAt() int64 { return max(int64(math.Ceil(c.cur*busyShare)), 1) }

func (c *core) decide(w *window) {
	c.peak = max(float64(w.maxInflight), c.peak*peakDecay)
	c.lowerBaseline(w)
	c.noteLate(w)
	c.enforced = c.alg.engaged(c, w)
	if c.probe.active || c.cur != c.raise.to || c.noLoad != c.raise.noLoad {
		// A probe, a cut or a new no-load RTT since the raise: the
		// windows that follow no longer show what it did.
		c.raise = raise{}
	}
	if c.probe.active {
		c.probeWindow(w)
	} else {
		next, held := c.alg.update(c, w), false
		// Only a window with load counts as congested: a window without
		// load says nothing about the limit (at low load the mean RTT is
		// often above the tolerance: a queue of one or two on a busy
		// core, the tail of a pause), and it must not make a pause that
		// follows look like a second slow window.
		congested := w.avgRTT > c.tolerated() && !w.idle(c.cur)
		switch {
		case next < c.cur && w.end < c.drainEnd && w.dropRatio() < dropThreshold:
			// A slow period just ended (the no-load RTT fell a lot) and
			// its requests are still draining: their latency says
			// nothing about the limit (it falls whatever the limit is).
			next = c.cur
		case next < c.cur && ((w.start+w.end)/2 < c.settle || (w.start+w.end)/2-int64(w.avgRTT) < c.stallAt):
			// Most of this window's requests were admitted before the
			// last large cut: wait for those admitted under it before
			// cutting again (one cut per round trip), so that neither a
			// slow dependency nor the drops already in flight take the
			// limit down to Min. Likewise for the requests admitted
			// before a stall cut: they are the stall's, already
			// answered.
			next = c.cur
		case w.dropRatio() >= dropThreshold:
			c.calm, c.dropAt = calmWindows, c.cur
		case congested && !c.congested && next < c.cur:
			// One slow window (a GC pause, a stalled neighbour) is not
			// overload yet: cut when the next window is slow too. Nor
			// does it start a probe, which would measure the pause.
			next, held = c.cur, true
		case next > c.cur && (w.start+w.end)/2-int64(w.avgRTT) < c.grownAt:
			// Most of this window's requests were admitted before the
			// last raise took effect: they cannot show what it did.
			// Behind a dependency slower than a window, raising again
			// on their latency would raise once per window on stale
			// news and overshoot by the round trip.
			next = c.cur
		case c.raise.rtt >= float64(c.window) && c.raise.queued(w):
			// The last raise went into latency, not completions: the
			// extra requests wait in a queue (a dependency with a
			// fixed number of connections). Go back to the limit that
			// the completions measured justify, and grow from there
			// additively, as after drops. Only where the round trip
			// is longer than a window: there the latency shows a
			// raise's queue a round trip late, after the gradient
			// has raised on the stale news. Where a window holds many
			// round trips the gradient sees the queue in the next
			// window, and its tolerance is what keeps a saturated
			// core busy.
			next = min(next, c.raise.useful(w))
			c.calm, c.dropAt = calmWindows, next/calmFrom
		case c.calm > 0:
			// Congestion avoidance after drops: grow freely back to 90%
			// of the limit that dropped, then additively, so the limit
			// does not saw back into the timeouts at once.
			c.calm--
			next = min(next, max(c.cur+1, c.dropAt*calmFrom))
		}
		c.congested = congested
		if c.watchResponse(w, next) {
			next = c.cur // the latency is not this limiter's queue: do not cut for it
		}
		if next <= c.cur*largeCut {
			c.settle = w.end + int64(w.avgRTT*probeSettle)
		}
		if next > c.cur {
			c.grownAt = w.end
			c.raise = raise{from: c.cur, to: c.clamp(next), rate: w.rate(), rtt: w.avgRTT, noLoad: c.noLoad}
		}
		c.cur = c.clamp(next)
		if !held {
			c.maybeStartProbe(w)
		}
	}
	c.lastRTT = w.avgRTT
	c.snap.windows.Add(1)
	c.snap.sample.Store(int64(w.avgRTT))
	c.publish()
}

// raise is a raise of the limit and the window it was decided on.
type raise struct {
	from, to float64 // the limit before and after
	rate     float64 // completions per second of the window
	rtt      float64 // average RTT of the window, ns
	noLoad   float64 // the no-load RTT then
}

// queued reports whether w, a window of requests admitted after the raise
// (the raise hold makes sure of that), shows the raise as a queue: the
// limit was in use, the latency rose by at least half the raise's share (a
// raise by 20% made the RTT 10% slower or more) and the completion rate did
// not (it rose by less than 10%). Where the extra requests are served, the
// rate rises with the limit; where they wait for a fixed pool of
// connections, only the latency does.
func (r *raise) queued(w *window) bool {
	if r.to <= r.from || r.rtt <= 0 || r.rate <= 0 || !w.used {
		return false
	}
	share := queuedShare * (r.to/r.from - 1)
	return w.avgRTT >= r.rtt*(1+share) && w.rate() < r.rate*(1+share)
}

// useful returns the limit between the raise's from and to that the
// completions of w justify: from plus the share of the raise by which the
// completion rate rose.
func (r *raise) useful(w *window) float64 {
	gain := (w.rate()/r.rate - 1) / (r.to/r.from - 1)
	return r.from + (r.to-r.from)*min(max(gain, 0), 1)
}

func (c *core) clamp(v float64) float64 {
	if math.IsNaN(v) {
		return c.cur
	}
	return min(max(v, float64(c.p.min)), float64(c.p.max))
}

func (c *core) publish() {
	learned := max(int64(math.Round(c.cur)), 1)
	// A released limit (Little's law without its signal) is not Max at
	// once: it doubles per window up to twice the recent peak in-flight (or
	// twice the learned limit), so neither a release nor a sudden stall
	// downstream lets an unbounded backlog in before the signal engages.
	if c.enforced {
		c.ceiling = c.cur
	} else {
		loose := min(max(releaseRamp*c.peak, releaseRamp*c.cur), float64(c.p.max))
		c.ceiling = min(max(c.ceiling, c.cur)*releaseRamp, loose)
	}
	pub := max(int64(math.Round(c.ceiling)), 1)
	c.limit.Store(pub)
	c.snap.learned.Store(learned)
	c.snap.noLoad.Store(int64(c.noLoad))
	c.snap.probing.Store(c.probe.active)
	c.snap.engaged.Store(c.enforced)
}

// Snapshot returns the limiter's state after its last decided window.
func (c *core) Snapshot() Snapshot {
	return Snapshot{
		Limit:         int(c.limit.Load()),
		Learned:       int(c.snap.learned.Load()),
		NoLoadRTT:     time.Duration(c.snap.noLoad.Load()),
		SampleRTT:     time.Duration(c.snap.sample.Load()),
		Probing:       c.snap.probing.Load(),
		Engaged:       c.snap.engaged.Load(),
		Windows:       c.snap.windows.Load(),
		Probes:        c.snap.probes.Load(),
		Stalls:        c.snap.stalls.Load(),
		MaxThroughput: math.Float64frombits(c.snap.maxTP.Load()),
	}
}

// tolerated returns the highest average RTT that is not congestion: the
// no-load RTT plus the tolerance, but below the latency at which answers
// came late (noteLate). A dependency whose no-load RTT is a large part of
// the callers' deadline (1.2 s of 2 s) leaves no room for the tolerance's
// queue: at 1.5 x its RTT the answers miss their deadline, and the drops
// would cut the limit only once they are already being wasted.
func (c *core) tolerated() float64 {
	t := c.noLoad * (1 + c.p.tolerance)
	if c.lateRTT > 0 {
		t = min(t, max(c.lateRTT*lateMargin, c.noLoad*(1+min(lateFloor, c.p.tolerance))))
	}
	return t
}

// noteLate records the average RTT of a window with drops (answers late
// for their deadline, or failed from overload): the latency the callers
// cannot wait for. It is forgotten when the no-load RTT falls a lot (the
// slow period ended), since it was measured against the slow one.
func (c *core) noteLate(w *window) {
	if c.lateRTT > 0 && c.noLoad < c.lateBase*staleBaseline {
		c.lateRTT = 0
	}
	if w.dropRatio() < dropThreshold || w.avgRTT <= 0 || w.idle(c.cur) {
		return
	}
	if c.lateRTT == 0 || w.avgRTT < c.lateRTT {
		c.lateRTT, c.lateBase = w.avgRTT, c.noLoad
	}
}
