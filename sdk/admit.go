package governor

import (
	"context"
	"math/rand/v2"
	"time"

	"governor.dev/governor/sdk/queue"
	"governor.dev/governor/sdk/shed"
)

// Admit decides whether req may start. On success it returns a Permit that
// must be released exactly once when the work ends (Permit.Release). On
// refusal it returns a *Rejection (errors.Is it against ErrShed,
// ErrRateLimited or ErrQueueTimeout) and an empty Permit, whose Release does
// nothing. A request that matches no route is admitted ungoverned.
//
// Admit blocks only when the route has a queue and the limit is full; then it
// waits at most the queue's allowed time, and returns early (ErrQueueTimeout)
// when ctx is done or the stated Deadline passes.
// A request whose ctx is already done is never started, nor one whose
// stated Deadline has passed or cannot be met (ErrDeadline; see
// Request.Deadline). The stages run in
// the order of the package documentation; a request refused by a later stage
// has still used its tokens from the earlier ones. The admitted path
// allocates nothing.
func (g *Governor) Admit(ctx context.Context, req Request) (Permit, error) {
	st := g.state.Load()
	rt := st.match.find(req.Path, req.Method)
	if rt == nil {
		return Permit{}, nil
	}
	h := rand.Uint32()
	s := &rt.shards[h&uint32(len(rt.shards)-1)]
	prio := req.Priority
	if prio == "" {
		prio = req.header(st.priorityHeader)
	}
	class, capped := st.classifier.ClassifyFrom(prio, req.Peer)
	if capped {
		s.capped[class].Add(1)
	}
	if rt.exempts && rt.exempt(&req) {
		s.counts[outExempt][class].Add(1)
		return Permit{}, nil
	}
	now := g.nanotime()
	var lvl uint32
	if t := g.throttle; t != nil && rt.conc != nil {
		if c := g.ownClock; c != nil && h>>12&(refreshEvery-1) == 0 {
			// The coarse clock falls behind while goroutines queue for
			// the CPU (a spike's onset: by 0.7s at GOMAXPROCS=1), which
			// is when the throttle's windows must end on time.
			now = c.Refresh()
		}
		// Read (and roll) the throttle before the refusals below: when
		// every request arrives past its deadline, its windows must still
		// end.
		lvl = t.check(now)
	}
	if ctx.Err() != nil {
		return Permit{}, g.reject(rt, s, class, ReasonQueueTimeout, 0)
	}
	if !req.Deadline.IsZero() {
		left := int64(req.Deadline.Sub(g.clk.Now()))
		if t := g.throttle; t != nil && rt.conc != nil {
			t.note(left, h)
		}
		if !g.meets(rt, class, left) {
			return Permit{}, g.reject(rt, s, class, ReasonDeadline, 0)
		}
	}
	// wouldShed and wouldLimit count a request on a shadow route once
	// under each would-be refusal, however many stages would refuse it.
	wouldShed := false
	if lvl != 0 && sheds(lvl, class, h>>16) {
		if !rt.shadow {
			return Permit{}, g.reject(rt, s, class, ReasonOverload, 0)
		}
		wouldShed = true
	}
	scale := rt.scale(now)

	wouldLimit := false
	if rt.bucket != nil {
		ok, wait := rt.bucket.Allow(now, h, scale)
		if !ok {
			// A goroutine descheduled after reading the clock arrives with
			// a stale time that the bucket has moved past; judge it again
			// on a fresh reading before refusing.
			if fresh := g.nanotime(); fresh > now {
				now = fresh
				ok, wait = rt.bucket.Allow(now, h, scale)
			}
		}
		if !ok {
			if !rt.shadow {
				return Permit{}, g.reject(rt, s, class, ReasonRateLimited, wait)
			}
			wouldLimit = true
		}
	}
	for i := range rt.keyed {
		kl := &rt.keyed[i]
		key := kl.key(&req)
		if key == "" {
			continue
		}
		ok, wait := kl.k.Allow(key, now, scale)
		if !ok {
			if fresh := g.nanotime(); fresh > now {
				now = fresh
				ok, wait = kl.k.Allow(key, now, scale)
			}
		}
		if !ok {
			if !rt.shadow {
				rt.refundRate(&req, h, i, now)
				return Permit{}, g.reject(rt, s, class, ReasonRateLimited, wait)
			}
			wouldLimit = true
		}
	}
	if wouldLimit {
		s.counts[outShadowRateLimit][class].Add(1)
	}

	if rt.conc == nil {
		s.inflight.Add(1)
		s.counts[outAdmitted][class].Add(1)
		return Permit{rt: rt, start: now, shard: uint16(h & uint32(len(rt.shards)-1)), class: uint8(class), inflight: 1}, nil
	}
	var cohort uint32 = shed.Cohorts - 1
	if rt.consistent {
		user := req.User
		if user == "" {
			user = req.header(st.userHeader)
		}
		cohort = shed.Cohort(user, (g.wallBase+now)/rt.rotate)
	}
	slot, inflight, ok := rt.acquire(h, class, cohort, scale, now)
	if !ok {
		if !rt.shadow {
			rt.conc.refused(now)
		}
		switch {
		case rt.shadow:
			wouldShed = true
			slot = h & uint32(len(rt.shards)-1)
			inflight = int(rt.shards[slot].inflight.Add(1))
			rt.mark(slot, int64(inflight))
		case rt.queue != nil:
			var waited time.Duration
			var err error
			slot, waited, err = rt.queue.WaitUntil(ctx, class, cohort, req.Deadline)
			if err != queue.ErrFull {
				rt.cell.queueDelay.observe(waited)
			}
			switch err {
			case nil:
				inflight = int(rt.cell.inflight())
				now += int64(waited)
			case queue.ErrFull:
				return Permit{}, g.reject(rt, s, class, ReasonShed, 0)
			default:
				return Permit{}, g.reject(rt, s, class, ReasonQueueTimeout, 0)
			}
		default:
			return Permit{}, g.reject(rt, s, class, ReasonShed, 0)
		}
	}
	if wouldShed {
		s.counts[outShadowShed][class].Add(1)
	}
	if class == 0 {
		rt.reserve.Admitted(now) // before the count: an admission that closes the Reserve's window belongs to the next one
	}
	rt.shards[slot].counts[outAdmitted][class].Add(1)
	return Permit{rt: rt, start: now, shard: uint16(slot), class: uint8(class), inflight: int32(inflight)}, nil
}

// meets reports whether a request of class with left ns to its deadline may
// start on rt: its deadline has not passed and, on a route with a concurrency limit in
// enforce mode, the time left is at least the route's recent average latency
// times its deadline factor, or nothing is in flight on the route. The
// critical class (0) is refused only when expired: an average says little
// about one request, and critical work is tried while it can still finish.
// A route in shadow mode refuses nothing for deadlines.
func (g *Governor) meets(rt *route, class int, left int64) bool {
	if rt.shadow {
		return true // a dry run refuses nothing
	}
	if left <= 0 {
		return false
	}
	if rt.conc == nil || class == 0 {
		return true
	}
	if float64(left) >= rt.deadlineFactor*float64(rt.conc.recentLatency()) {
		return true
	}
	// Refusing on a latency measured before keeps that latency from being
	// measured again: a route with nothing in flight admits the request,
	// so a latency that has come down is seen.
	return rt.cell.inflight() == 0
}

// reject counts a refusal and returns its error. wait is the time until the
// refusing bucket has a token (0 when unknown: Retry-After 1s).
func (g *Governor) reject(rt *route, s *cellShard, class int, reason Reason, wait int64) error {
	var out int
	switch reason {
	case ReasonShed:
		out = outShed
	case ReasonRateLimited:
		out = outRateLimited
	case ReasonDeadline:
		out = outDeadline
	case ReasonOverload:
		out = outOverload
	default:
		out = outQueueTimeout
	}
	s.counts[out][class].Add(1)
	rej := rt.rejections[reason][class]
	if wait > int64(time.Second) {
		rej = &Rejection{Reason: reason, Route: rt.name, Class: rej.Class, RetryAfter: time.Duration(wait)}
	}
	if h := g.opts.Hooks.OnReject; h != nil {
		h(rej)
	}
	return rej
}

// refundRate gives back the tokens that the route's bucket and its first n
// per-key limits took for a request that per-key limit n then refused, so
// that one client far over its own limit does not use up the rate shared
// with others. Only for enforcing routes, where every earlier stage that
// judged the request admitted it.
func (rt *route) refundRate(req *Request, h uint32, n int, now int64) {
	if rt.bucket != nil {
		rt.bucket.Refund(now, h)
	}
	for i := range rt.keyed[:n] {
		kl := &rt.keyed[i]
		if key := kl.key(req); key != "" {
			kl.k.Refund(key, now)
		}
	}
}
