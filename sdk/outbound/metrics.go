package outbound

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/balancer"
)

// Call outcomes (governor_sdk_downstream_calls_total).
const (
	OutcomeSuccess           = "success"
	OutcomeError             = "error"
	OutcomeBreakerOpen       = "breaker_open"
	OutcomeBulkheadFull      = "bulkhead_full"
	OutcomeShadowWouldReject = "shadow_would_reject"
)

// Retry outcomes (governor_sdk_retries_total).
const (
	RetryAttempted       = "attempted"
	RetryBudgetExhausted = "budget_exhausted"
	// RetrySuppressedOverloaded: a retry not made because the response
	// said "overloaded; don't retry" (Downstream.SuppressedRetry).
	RetrySuppressedOverloaded = "suppressed_overloaded"
	// RetrySuppressedInboundRetry: a retry not made because the call
	// served a request that was itself a retry.
	RetrySuppressedInboundRetry = "suppressed_inbound_retry"
)

var outcomes = [...]string{OutcomeSuccess, OutcomeError, OutcomeBreakerOpen, OutcomeBulkheadFull, OutcomeShadowWouldReject}

// Indexes into outcomes.
const (
	iSuccess = iota
	iError
	iBreakerOpen
	iBulkheadFull
	iShadow
)

// durationBounds are the upper bounds of the call latency histogram (the
// same as the inbound request histogram's); the last bucket is +Inf.
var durationBounds = [...]time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// statShards stripes a downstream's counters so concurrent calls rarely
// write the same cache line; a power of two.
const statShards = 8

type statShard struct {
	calls         [len(outcomes)]atomic.Uint64
	buckets       [len(durationBounds) + 1]atomic.Uint64
	sum           atomic.Int64 // nanoseconds
	retried       atomic.Uint64
	budgetRefused atomic.Uint64
	suppressed    [2]atomic.Uint64 // inbound retry, overloaded
	_             [256 - 8*(len(outcomes)+len(durationBounds)+6)]byte
}

// stats are one downstream's counters. They outlive rebuilds of the
// downstream (counters never go back) and are summed at scrape time, so the
// call path writes one striped atomic per count and allocates nothing.
type stats struct {
	shards [statShards]statShard
}

func (s *stats) shard() *statShard { return &s.shards[rand.Uint32()&(statShards-1)] }

func (s *stats) call(outcome int) { s.shard().calls[outcome].Add(1) }

// finish counts a finished call and its latency in one shard.
func (s *stats) finish(outcome int, rtt int64) {
	sh := s.shard()
	sh.calls[outcome].Add(1)
	i := 0
	for i < len(durationBounds) && rtt > int64(durationBounds[i]) {
		i++
	}
	sh.buckets[i].Add(1)
	sh.sum.Add(rtt)
}

// count counts a call's outcome without a latency (Call.EndUnmeasured).
func (s *stats) count(outcome int) { s.shard().calls[outcome].Add(1) }

// snapshot sums the shards.
type snapshot struct {
	calls                  [len(outcomes)]uint64
	buckets                [len(durationBounds) + 1]uint64
	sum                    int64
	retried, budgetRefused uint64
	suppressed             [2]uint64
}

func (s *stats) snapshot() snapshot {
	var out snapshot
	for i := range s.shards {
		sh := &s.shards[i]
		for j := range out.calls {
			out.calls[j] += sh.calls[j].Load()
		}
		for j := range out.buckets {
			out.buckets[j] += sh.buckets[j].Load()
		}
		out.sum += sh.sum.Load()
		out.retried += sh.retried.Load()
		out.budgetRefused += sh.budgetRefused.Load()
		out.suppressed[0] += sh.suppressed[0].Load()
		out.suppressed[1] += sh.suppressed[1].Load()
	}
	return out
}

// balCounts are a balancer's counters: panic picks and skipped ejections.
type balCounts struct{ panicPicks, skipped uint64 }

// plus returns c with b's counts added.
func (c balCounts) plus(b *balancer.Balancer) balCounts {
	return balCounts{c.panicPicks + b.PanicPicks(), c.skipped + b.SkippedEjections()}
}

// collector exports every downstream's series (docs/metrics.md) at scrape
// time: each downstream in force has all of its series from the moment it is
// applied, and a dropped one disappears.
type collector struct {
	s                                     *Set
	calls, duration, retries, state, used *prometheus.Desc
	inflight, limit, endpoints            *prometheus.Desc
	panicking, panicPicks, skipped        *prometheus.Desc
	bounds                                []float64
}

func newCollector(s *Set) *collector {
	c := &collector{
		s: s,
		calls: prometheus.NewDesc("governor_sdk_downstream_calls_total",
			"Outbound calls by downstream and outcome.", []string{"downstream", "outcome"}, nil),
		duration: prometheus.NewDesc("governor_sdk_downstream_duration_seconds",
			"Latency of outbound calls.", []string{"downstream"}, nil),
		retries: prometheus.NewDesc("governor_sdk_retries_total",
			"Retries by downstream and outcome: attempted, budget_exhausted, suppressed_overloaded or suppressed_inbound_retry.", []string{"downstream", "outcome"}, nil),
		state: prometheus.NewDesc("governor_sdk_breaker_state",
			"Breaker state by downstream: 0 closed, 1 half-open (throttle: rejecting a share), 2 open.", []string{"downstream"}, nil),
		used: prometheus.NewDesc("governor_sdk_retry_budget_ratio",
			"Retries / requests in the retry budget window, by downstream.", []string{"downstream"}, nil),
		inflight: prometheus.NewDesc("governor_sdk_downstream_inflight",
			"Calls holding a bulkhead slot, by downstream.", []string{"downstream"}, nil),
		limit: prometheus.NewDesc("governor_sdk_downstream_limit",
			"Current bulkhead cap (adaptive or fixed), by downstream.", []string{"downstream"}, nil),
		endpoints: prometheus.NewDesc("governor_sdk_downstream_endpoints",
			"Balanced endpoints by downstream and state: active or ejected (consecutive failures or breaker open).", []string{"downstream", "state"}, nil),
		panicking: prometheus.NewDesc("governor_sdk_downstream_panic",
			"1 while the balancer is in panic mode (fewer endpoints with a closed breaker and no consecutive-failure ejection than its panic threshold: it balances over all of them), else 0.", []string{"downstream"}, nil),
		panicPicks: prometheus.NewDesc("governor_sdk_downstream_panic_picks_total",
			"Calls panic mode sent to an endpoint whose breaker did not admit them, by downstream.", []string{"downstream"}, nil),
		skipped: prometheus.NewDesc("governor_sdk_downstream_ejections_skipped_total",
			"Endpoint ejections (consecutive failures or an open breaker) refused by the balancer's max_ejection_percent, by downstream.", []string{"downstream"}, nil),
	}
	for _, b := range durationBounds {
		c.bounds = append(c.bounds, b.Seconds())
	}
	return c
}

// Describe sends the descriptors.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.calls, c.duration, c.retries, c.state, c.used, c.inflight, c.limit, c.endpoints, c.panicking, c.panicPicks, c.skipped} {
		ch <- d
	}
}

// Collect sums every downstream's shards and reads its breaker and budget.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.clk.Nanotime()
	for name, d := range *c.s.m.Load() {
		snap := d.stats.snapshot()
		for i, o := range outcomes {
			ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(snap.calls[i]), name, o)
		}
		buckets := make(map[float64]uint64, len(c.bounds))
		var cum uint64
		for i, b := range c.bounds {
			cum += snap.buckets[i]
			buckets[b] = cum
		}
		count := cum + snap.buckets[len(c.bounds)]
		ch <- prometheus.MustNewConstHistogram(c.duration, count, float64(snap.sum)/1e9, buckets, name)
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(snap.retried), name, RetryAttempted)
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(snap.budgetRefused), name, RetryBudgetExhausted)
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(snap.suppressed[0]), name, RetrySuppressedInboundRetry)
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(snap.suppressed[1]), name, RetrySuppressedOverloaded)
		if d.brk != nil {
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(d.brk.State(now)), name)
		}
		if d.retrier != nil {
			ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, d.retrier.Budget().Ratio(now), name)
		}
		if d.bh != nil {
			ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(d.bh.InFlight()), name)
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(d.bh.Limit()), name)
		}
		counts := d.balCounts.plus(d.bal)
		ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.CounterValue, float64(counts.skipped), name)
		if n := d.bal.Len(); n > 0 {
			ejected := len(d.bal.Ejected(now))
			ch <- prometheus.MustNewConstMetric(c.endpoints, prometheus.GaugeValue, float64(n-ejected), name, "active")
			ch <- prometheus.MustNewConstMetric(c.endpoints, prometheus.GaugeValue, float64(ejected), name, "ejected")
			panicking := 0.0
			if d.bal.Panicking(now) {
				panicking = 1
			}
			ch <- prometheus.MustNewConstMetric(c.panicking, prometheus.GaugeValue, panicking, name)
			ch <- prometheus.MustNewConstMetric(c.panicPicks, prometheus.CounterValue, float64(counts.panicPicks), name)
		}
	}
}
