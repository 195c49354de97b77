package governor

import (
	"sync/atomic"

	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/queue"
	"governor.dev/governor/sdk/ratelimit"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/shed"
)

// concurrency is a route's limiter; it is kept across Apply while the route's
// concurrency rules do not change.
type concurrency struct {
	cfg rules.Concurrency
	lim Limiter
	// hinted is lim's shard-hinted Observe when it has one (the limiters
	// of sdk/limit): Release passes the permit's shard instead of making
	// the limiter draw a random one.
	hinted limit.HintedObserver
	// gradient is lim when it is the default algorithm, called directly
	// (Limit inlines to an atomic load) rather than through the interface.
	gradient *limit.Gradient
	// refusals is lim's RefusalObserver when it has one: told of every
	// request refused for the limit, so it sees a stall before any
	// request finishes.
	refusals limit.RefusalObserver
	// snap is lim's Snapshot when it has one: its last window's average
	// latency is what a request with a stated deadline must have left.
	snap interface{ Snapshot() limit.Snapshot }
}

func newConcurrency(cfg rules.Concurrency, lim Limiter) *concurrency {
	c := &concurrency{cfg: cfg, lim: lim}
	c.hinted, _ = lim.(limit.HintedObserver)
	c.gradient, _ = lim.(*limit.Gradient)
	c.refusals, _ = lim.(limit.RefusalObserver)
	c.snap, _ = lim.(interface{ Snapshot() limit.Snapshot })
	return c
}

// limit returns the limiter's current limit.
func (c *concurrency) limit() int {
	if g := c.gradient; g != nil {
		return g.Limit()
	}
	return c.lim.Limit()
}

// observe records a released request in the limiter; hint is its shard.
// Release calls the default algorithm directly and this for the others.
func (c *concurrency) observe(hint uint32, now, rtt int64, inflight int, dropped bool) {
	switch {
	case c.hinted != nil:
		c.hinted.ObserveShard(hint, now, rtt, inflight, dropped)
	default:
		c.lim.Observe(now, rtt, inflight, dropped)
	}
}

// refused tells the limiter that a request was refused for the limit at now.
func (c *concurrency) refused(now int64) {
	if c.refusals != nil {
		c.refusals.Refused(now)
	}
}

// recentLatency returns the average latency of the limiter's last decided
// window, in ns (0 when unknown).
func (c *concurrency) recentLatency() int64 {
	if c.snap == nil {
		return 0
	}
	return int64(c.snap.Snapshot().SampleRTT)
}

// ceilSnap caches the class ceilings of one route for one limit. It is kept
// on the route's cell, so that the admissions of a route being replaced,
// which share the cell's shards, mark the snapshot in force (see mark).
type ceilSnap struct {
	owner *route
	limit int
	peak  int // the critical concurrency to make room for (Reserve.Room)
	ceil  shed.Ceilings
	// skew is shardsSkewed when some shard may hold more than its share of
	// the lowest class's ceiling, shardsLevel when none does, and
	// shardsChecking while an admission reads the shards to find out.
	// While the shards are level, a class below critical that stays within
	// its own shard's share cannot take the route over its ceiling, and is
	// admitted without summing the shards. A snapshot starts skewed: the
	// counts it finds were taken under other ceilings.
	skew atomic.Uint32
	// levels: the lowest ceiling gives every shard a share of at least 4,
	// large enough for the fast path's estimate of the in-flight count.
	// Below that every lower-class admission sums the shards anyway, and
	// skew is neither kept nor read.
	levels bool
}

// The values of ceilSnap.skew.
const (
	shardsLevel uint32 = iota
	shardsSkewed
	shardsChecking
)

// share returns shard i's share of ceiling c on a route of 1<<log2n shards.
func share(c int, i uint32, log2n uint) int64 {
	n := int64(c >> log2n)
	if i < uint32(c)&(1<<log2n-1) {
		n++
	}
	return n
}

// mark records that shard i holds n requests after an admission: when that
// is more than the shard's share of the lowest ceiling in force, the
// snapshot in force is skewed. An admission that finds it level, or being
// checked (the check may have read this shard before the request), sets it
// skewed; one that finds it skewed already writes nothing, so a route whose
// shards stay skewed costs its admissions no shared write.
func (rt *route) mark(i uint32, n int64) {
	s := rt.cell.snap.Load()
	if s == nil || !s.levels || n <= share(s.ceil[shed.NumClasses-1], i, rt.log2n) {
		return
	}
	if s.skew.Load() != shardsSkewed {
		s.skew.Store(shardsSkewed)
	}
}

// routeInflight returns the route's in-flight count summed over its shards.
// When s is skewed and no other admission is checking it, it also checks
// it: claim it (skewed to checking), read every shard, and set it level if
// no shard is over its share of the lowest ceiling and it is still being
// checked. An admission that pushes a shard over its share meanwhile sets
// it skewed, and the last step then fails.
func (rt *route) routeInflight(s *ceilSnap) int64 {
	claimed := s.levels && s.skew.CompareAndSwap(shardsSkewed, shardsChecking)
	low := s.ceil[shed.NumClasses-1]
	var n int64
	over := false
	for i := range rt.shards {
		v := rt.shards[i].inflight.Load()
		n += v
		if claimed && !over && v > share(low, uint32(i), rt.log2n) {
			over = true
		}
	}
	if claimed {
		to := shardsLevel
		if over {
			to = shardsSkewed
		}
		s.skew.CompareAndSwap(shardsChecking, to) // fails when an admission skewed it meanwhile
	}
	return n
}

// keyLimit is one per-key rate limit of a route.
type keyLimit struct {
	cfg    rules.KeyRateLimit
	ip     bool
	header string // canonical header name when !ip
	// caller: header is the route's caller header, so a Request.Caller
	// that is set is the key.
	caller bool
	k      *ratelimit.Keyed
}

// key returns the key req is limited by, "" when req has none.
func (kl *keyLimit) key(req *Request) string {
	if kl.ip {
		return req.ClientIP
	}
	if kl.caller && req.Caller != "" {
		return req.Caller // set wins over the header, as for exemptions
	}
	return req.header(kl.header)
}

// route is the enforcement state of one route for one ruleset. Unchanged
// routes keep their *route across Apply; changed ones get a new one that
// inherits the learned parts (cell, limiter, buckets) whose rules are equal.
type route struct {
	cfg    rules.Route
	name   string
	shadow bool
	cell   *cell
	shards []cellShard // cell.shards, one load nearer for the hot path

	bucket *ratelimit.Bucket
	keyed  []keyLimit

	conc       *concurrency
	reserve    *shed.Reserve // the critical class's measured concurrency and room
	log2n      uint          // log2 of len(cell.shards)
	reserved   float64
	consistent bool
	rotate     int64 // ns

	queue *queue.Queue // cell.queue when the rules give the route a queue

	warm                 bool
	warmFrom             float64
	warmStart, warmEnd   int64
	exempts              bool // any exemption configured
	exemptPaths, callers []string
	callerHeader         string // canonical; DefaultCallerHeader unless the exemption names another

	// rejections are preallocated per reason and class (RetryAfter 1s).
	rejections [ReasonOverload + 1][shed.NumClasses]*Rejection
	// deadlineFactor is rules.Concurrency.DeadlineFactor with its default.
	deadlineFactor float64
}

// scale returns the warm-up factor at time now: 1 after the ramp.
func (rt *route) scale(now int64) float64 {
	if !rt.warm || now >= rt.warmEnd {
		return 1
	}
	f := rt.warmFrom + (1-rt.warmFrom)*float64(now-rt.warmStart)/float64(rt.warmEnd-rt.warmStart)
	return min(max(f, rt.warmFrom), 1)
}

// effectiveLimit returns the concurrency limit after the warm-up ramp.
func (rt *route) effectiveLimit(now int64) int {
	l := rt.conc.limit()
	if s := rt.scale(now); s < 1 {
		l = max(1, int(float64(l)*s))
	}
	return l
}

// ceilings returns the class ceilings for the limiter's current limit,
// recomputing them only when the limit has changed.
func (rt *route) ceilings(now int64) *ceilSnap {
	var l int
	if g := rt.conc.gradient; g != nil {
		l = g.Limit() // inlined: the hot path's own copy of concurrency.limit
	} else {
		l = rt.conc.lim.Limit()
	}
	peak := rt.reserve.Room(now)
	s := rt.cell.snap.Load()
	if s != nil && s.owner == rt && s.limit == l && s.peak == peak {
		return s
	}
	s = &ceilSnap{owner: rt, limit: l, peak: peak, ceil: shed.Plan(l, rt.reserved, peak)}
	s.levels = s.ceil[shed.NumClasses-1]>>rt.log2n >= 4
	s.skew.Store(shardsSkewed)
	rt.cell.snap.Store(s)
	return s
}

// acquire takes an in-flight slot for class c (user cohort k) under the
// concurrency limit scaled by scale. The class's ceiling is split over all
// shards (the shares add up to it exactly); the request tries shard hint
// first and every other shard before giving up, so the top ceiling's class
// (critical) is refused only when every shard is at its share, that is when
// the route as a whole is at the ceiling. A class below the top ceiling also
// gives its slot back when the route's count, summed over the shards, is
// then above its ceiling: the classes above may hold some shards over its
// share, and those slots count against it as much as its own. It sums the
// shards only when some shard may be over its share of the lowest ceiling
// (ceilSnap.skew): otherwise no shard holds a higher class's slots beyond
// this class's share. It returns the shard and the in-flight count
// including this request (estimated from its shard when the shares are large
// enough for that to be accurate and the shards were not summed).
func (rt *route) acquire(hint uint32, c int, k uint32, scale float64, now int64) (uint32, int, bool) {
	s := rt.ceilings(now)
	ceil := &s.ceil
	if scale < 1 {
		w := shed.Plan(max(1, int(float64(s.limit)*scale)), rt.reserved, s.peak)
		ceil = &w
	}
	ceiling := ceil[c]
	if rt.consistent {
		ceiling = ceil.ForCohort(c, k)
	}
	shards := rt.shards
	mask := uint32(len(shards) - 1)
	base, extra := ceiling>>rt.log2n, uint32(ceiling)&mask
	for j := uint32(0); j <= mask; j++ {
		i := (hint + j) & mask
		thr := int64(base)
		if i < extra {
			thr++
		}
		in := &shards[i].inflight
		for {
			v := in.Load()
			if v >= thr {
				break
			}
			if !in.CompareAndSwap(v, v+1) {
				continue
			}
			rt.mark(i, v+1)
			if ceiling < ceil[0] {
				// Checked after taking the slot, so that concurrent
				// admissions see each other: the route never holds more
				// than the ceiling for long, at the cost of refusing
				// both of two that race for its last slot. While the
				// shards are level (no shard over its share of the
				// lowest ceiling), this slot, within its own shard's
				// share, cannot take the route over the ceiling.
				if s.levels && scale == 1 && !rt.consistent && s.skew.Load() == shardsLevel {
					return i, int(v+1) << rt.log2n, true
				}
				n := rt.routeInflight(s)
				if n > int64(ceiling) {
					in.Add(-1)
					return 0, 0, false
				}
				return i, int(n), true
			}
			if base >= 4 {
				return i, int(v+1) << rt.log2n, true
			}
			return i, int(rt.cell.inflight()), true
		}
	}
	return 0, 0, false
}

// exempt reports whether the request bypasses the route.
func (rt *route) exempt(req *Request) bool {
	for _, p := range rt.exemptPaths {
		if req.Path == p {
			return true
		}
	}
	if len(rt.callers) > 0 {
		caller := req.Caller
		if caller == "" {
			caller = req.header(rt.callerHeader)
		}
		if caller != "" {
			for _, c := range rt.callers {
				if caller == c {
					return true
				}
			}
		}
	}
	return false
}

// admitted returns how many requests of the critical class and of the
// classes below it the route name has admitted so far (the metric counts,
// summed over the shards): the counts shed.Reserve reads once per window.
func (c *cell) admitted() (critical, lower uint64) {
	for i := range c.shards {
		critical += c.shards[i].counts[outAdmitted][0].Load()
		for k := 1; k < shed.NumClasses; k++ {
			lower += c.shards[i].counts[outAdmitted][k].Load()
		}
	}
	return critical, lower
}
