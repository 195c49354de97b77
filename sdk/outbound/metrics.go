package outbound

import (
	"github.com/prometheus/client_golang/prometheus"
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
)

var outcomes = [...]string{OutcomeSuccess, OutcomeError, OutcomeBreakerOpen, OutcomeBulkheadFull, OutcomeShadowWouldReject}

// durationBuckets are the bounds of the call latency histogram, in seconds
// (the same as the inbound request histogram).
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_sdk_downstream_calls_total",
			Help: "Outbound calls by downstream and outcome.",
		}, []string{"downstream", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "governor_sdk_downstream_duration_seconds",
			Help:    "Latency of outbound calls.",
			Buckets: durationBuckets,
		}, []string{"downstream"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_sdk_retries_total",
			Help: "Retries by downstream and outcome: attempted or budget_exhausted.",
		}, []string{"downstream", "outcome"}),
	}
}

// series are one downstream's children, looked up once when it is applied so
// the call path allocates nothing.
type series struct {
	calls         [len(outcomes)]prometheus.Counter
	duration      prometheus.Observer
	retried       prometheus.Counter
	budgetRefused prometheus.Counter
}

func (m *metrics) series(name string) series {
	var s series
	for i, o := range outcomes {
		s.calls[i] = m.calls.WithLabelValues(name, o)
	}
	s.duration = m.duration.WithLabelValues(name)
	s.retried = m.retries.WithLabelValues(name, RetryAttempted)
	s.budgetRefused = m.retries.WithLabelValues(name, RetryBudgetExhausted)
	return s
}

func (m *metrics) forget(name string) {
	for _, o := range outcomes {
		m.calls.DeleteLabelValues(name, o)
	}
	m.duration.DeleteLabelValues(name)
	m.retries.DeleteLabelValues(name, RetryAttempted)
	m.retries.DeleteLabelValues(name, RetryBudgetExhausted)
}

const (
	iSuccess = iota
	iError
	iBreakerOpen
	iBulkheadFull
	iShadow
)

// collector reports the gauges that are read at scrape time: breaker state
// and retry budget use.
type collector struct {
	s            *Set
	state, ratio *prometheus.Desc
}

func newCollector(s *Set) *collector {
	return &collector{
		s: s,
		state: prometheus.NewDesc("governor_sdk_breaker_state",
			"Breaker state by downstream: 0 closed, 1 half-open, 2 open.", []string{"downstream"}, nil),
		ratio: prometheus.NewDesc("governor_sdk_retry_budget_ratio",
			"Retries / requests in the retry budget window, by downstream.", []string{"downstream"}, nil),
	}
}

// Describe sends the gauges' descriptors.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.ratio
}

// Collect reads every downstream's breaker and budget.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.clk.Nanotime()
	for name, d := range *c.s.m.Load() {
		if d.brk != nil {
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(d.brk.State(now)), name)
		}
		if d.retrier != nil {
			ch <- prometheus.MustNewConstMetric(c.ratio, prometheus.GaugeValue, d.retrier.Budget().Ratio(now), name)
		}
	}
}
