package governor

import (
	"sync/atomic"

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
	duration durationHist
	_        [64]byte
}

// cell is the state of a route name that outlives rule changes: in-flight
// counts and metric counters.
type cell struct {
	name       string
	shards     []cellShard
	queueDelay queueHist
}

func newCell(name string, shards int) *cell {
	return &cell{name: name, shards: make([]cellShard, shards)}
}

func (c *cell) inflight() int64 {
	var n int64
	for i := range c.shards {
		n += c.shards[i].inflight.Load()
	}
	return n
}
