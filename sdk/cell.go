package governor

import (
	"math/rand/v2"
	"sync/atomic"

	"governor.dev/governor/sdk/queue"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/shed"
)

// Metric outcomes, the index of cellShard.counts.
const (
	outAdmitted = iota
	outShed
	outRateLimited
	outQueueTimeout
	outShadowShed
	outShadowRateLimit
	outExempt
	outDeadline
	outOverload
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"admitted", "shed", "rate_limited", "queue_timeout",
	"shadow_would_shed", "shadow_would_rate_limit", "exempt", "deadline", "overload"}

// cellShard is one shard of a route's live counts. Each request touches one
// shard only, chosen at random, so concurrent requests rarely share a cache
// line. The counts are indexed by outcome first, so that the in-flight word
// and the admitted counts of every class share the first cache line: an
// admission writes one line of its shard, its release one more (the
// duration bucket). The trailing pad keeps neighbouring shards' hot words
// apart.
type cellShard struct {
	inflight atomic.Int64
	counts   [numOutcomes][shed.NumClasses]atomic.Uint64
	errors   [shed.NumClasses]atomic.Uint64
	// capped counts the requests whose class the priority trust lowered,
	// by the class they were given (rules.Trust).
	capped   [shed.NumClasses]atomic.Uint64
	duration durationHist
	_        [64]byte
}

// cell is the state of a route name that outlives rule changes: in-flight
// counts, metric counters and the queue.
type cell struct {
	name       string
	shards     []cellShard
	queueDelay queueHist
	// queue is where the route's requests wait for a slot, when its rules
	// give it a queue (publish configures it). It is the cell's, not the
	// route's, so that every release, also of a permit admitted under
	// rules since replaced, serves the requests waiting under the rules in
	// force, and no waiter is left behind in a replaced queue.
	queue *queue.Queue
	// snap is the class ceilings of the route in force by this name that
	// has a concurrency limit (route.ceilings).
	snap atomic.Pointer[ceilSnap]
}

// newCell returns a cell for the route name whose queue takes slots under
// the route in force by that name.
func (g *Governor) newCell(name string) *cell {
	c := &cell{name: name, shards: make([]cellShard, g.shards)}
	c.queue, _ = queue.New(rules.Queue{}, g.clk, g.queueAcquire(c)) // the zero configuration is valid
	return c
}

// queueAcquire returns the function c's queue takes slots with: under the
// limit of the route in force for c, or, when no route in force has a
// limit on c any more (removed, renamed, its concurrency rule dropped),
// with none, so the requests still waiting start.
func (g *Governor) queueAcquire(c *cell) queue.AcquireFunc {
	return func(class int, k uint32) (uint32, bool) {
		h := rand.Uint32()
		rt := g.state.Load().byName[c.name]
		if rt == nil || rt.cell != c || rt.conc == nil {
			i := h & uint32(len(c.shards)-1)
			c.shards[i].inflight.Add(1)
			return i, true
		}
		now := g.nanotime()
		slot, _, ok := rt.acquire(h, class, k, rt.scale(now), now)
		return slot, ok
	}
}

func (c *cell) inflight() int64 {
	var n int64
	for i := range c.shards {
		n += c.shards[i].inflight.Load()
	}
	return n
}
