package signals

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

// ErrNotFloat is returned by a SeriesSource when a selected series holds
// native histogram samples in the range: the Reader then asks PromQL.
var ErrNotFloat = errors.New("signals: series holds native histogram samples")

// SeriesSource is a PromQLSource that also hands out the stored float
// samples of the series a selector matches, as the embedded store does. From
// one the Reader evaluates the default queries of the forms
// sum by (...) (rate(metric{...}[window])) (the shared rate queries) and
// sum or max by (...) ([timestamp(]metric{...}[)]) (in-flight, limit and
// freshness) itself: the same samples, the same extrapolation and the same
// summation as the PromQL engine, without its per-series labels, buffers and
// grouping hashes. The engine is still asked every other query, every
// overridden template, and a query whose series hold native histograms.
type SeriesSource interface {
	PromQLSource
	// SelectFloats calls fn for every series ms match with its float
	// samples in (mint, maxt] (Unix milliseconds), stale markers dropped, in
	// the order the PromQL engine selects them, as a range selector sees
	// them. pts is only valid during the call. It fails with ErrNotFloat
	// when a selected series has a native histogram sample in the range.
	SelectFloats(ctx context.Context, mint, maxt int64, ms []*labels.Matcher, fn func(ls labels.Labels, pts []promql.FPoint)) error
	// SelectLatest calls fn for every series ms match with the sample an
	// instant selector at ts (Unix milliseconds) takes: the newest at or
	// before ts within the source's lookback delta, none when that one is a
	// stale marker. It fails with ErrNotFloat when that sample is a native
	// histogram.
	SelectLatest(ctx context.Context, ts int64, ms []*labels.Matcher, fn func(ls labels.Labels, t int64, v float64)) error
}

// rateQuery is a shared query of the form
// sum by (<scope>, extra...) (rate(metric{<services>}[window])).
type rateQuery struct {
	metric string
	extra  []string
}

// sharedRates are the shared queries a SeriesSource answers, each written
// exactly as its template in sharedTemplates.
var sharedRates = map[sharedQuery]rateQuery{
	sharedRequests: {metric: "governor_sdk_requests_total", extra: []string{"class", "outcome"}},
	sharedErrors:   {metric: "governor_sdk_request_errors_total"},
	sharedLatency:  {metric: "governor_sdk_request_duration_seconds_bucket", extra: []string{"le"}},
	sharedQueue:    {metric: "governor_sdk_queue_delay_seconds_bucket", extra: []string{"le"}},
}

// matchers are the label matchers of metric{<selector(services)>}.
func matchers(metric string, services []string) ([]*labels.Matcher, error) {
	ms := make([]*labels.Matcher, 0, 2)
	switch len(services) {
	case 0:
	case 1:
		ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, "service", services[0]))
	default:
		quoted := make([]string, len(services))
		for i, s := range services {
			quoted[i] = regexp.QuoteMeta(s)
		}
		m, err := labels.NewMatcher(labels.MatchRegexp, "service", strings.Join(quoted, "|"))
		if err != nil {
			return nil, fmt.Errorf("%w: service matcher: %v", ErrQuery, err)
		}
		ms = append(ms, m)
	}
	return append(ms, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, metric)), nil
}

// grouping collects the output samples of an aggregation by the scope's
// labels and extra ones, as PromQL's "by" does: a label absent or empty
// groups as empty and is left out of the sample's labels; groups come in
// the order they first appear.
type grouping struct {
	names  []string
	vals   []string
	key    []byte
	index  map[string]int
	groups []rateGroup
}

func newGrouping(scope Scope, extra []string) *grouping {
	names := append([]string{"service"}, extra...)
	if scope == PerInstance {
		names = append([]string{"service", "instance"}, extra...)
	}
	return &grouping{names: names, vals: make([]string, len(names)), index: map[string]int{}}
}

// of returns the group of a series, and whether it is new.
func (g *grouping) of(ls labels.Labels) (*rateGroup, bool) {
	g.key = g.key[:0]
	for i, n := range g.names {
		g.vals[i] = ls.Get(n)
		g.key = append(append(g.key, g.vals[i]...), 0xff)
	}
	if i, ok := g.index[string(g.key)]; ok {
		return &g.groups[i], false
	}
	l := make(Labels, len(g.names))
	for i, n := range g.names {
		if g.vals[i] != "" {
			l[n] = g.vals[i]
		}
	}
	g.index[string(g.key)] = len(g.groups)
	g.groups = append(g.groups, rateGroup{labels: l})
	return &g.groups[len(g.groups)-1], true
}

// result is the vector of the groups' values at ts.
func (g *grouping) result(ts int64) *Result {
	res := &Result{Type: TypeVector, Samples: make([]Sample, len(g.groups))}
	t := time.UnixMilli(ts)
	for i, gr := range g.groups {
		res.Samples[i] = Sample{Labels: gr.labels, Point: Point{T: t, V: gr.sum.value()}}
	}
	return res
}

// rateGroup is one output sample of an aggregation in the making.
type rateGroup struct {
	labels Labels
	sum    sum
}

// eval answers the query at time at from src as the PromQL engine would:
// one sample per group that a series with a rate falls in, the Kahan sum of
// its series' rates.
func (q rateQuery) eval(ctx context.Context, src SeriesSource, services []string, scope Scope, window time.Duration, at time.Time) (*Result, error) {
	ms, err := matchers(q.metric, services)
	if err != nil {
		return nil, err
	}
	ts := at.UnixMilli()
	start := ts - window.Milliseconds()
	g := newGrouping(scope, q.extra)
	err = src.SelectFloats(ctx, start, ts, ms, func(ls labels.Labels, pts []promql.FPoint) {
		if v, ok := counterRate(pts, start, ts, window.Seconds()); ok {
			gr, _ := g.of(ls)
			gr.sum.add(v)
		}
	})
	if err != nil {
		return nil, err
	}
	return g.result(ts), nil
}

// gaugeQuery is a default template of the form
// sum by (<scope>) (metric{<services>}),
// max by (<scope>) (timestamp(metric{<services>})), or
// count by (<scope>) (metric{<services>}).
type gaugeQuery struct {
	metric string
	// newest: max of the samples' times in seconds instead of the sum of
	// their values.
	newest bool
	// count: the number of series instead of the sum of their values.
	count bool
}

// ownGauges are the signals whose default templates are gaugeQueries,
// each written exactly as its template in DefaultTemplates.
var ownGauges = map[Signal]gaugeQuery{
	InFlight:  {metric: "governor_sdk_inflight"},
	Limit:     {metric: "governor_sdk_limit"},
	Freshness: {metric: "governor_sdk_rules_version", newest: true},
	Reporting: {metric: "governor_sdk_rules_version", count: true},
}

// eval answers the query at time at from src as the PromQL engine would:
// one sample per group that a series with a current sample falls in, the
// Kahan sum of their values, or the greatest of their times (a NaN is
// replaced by any later value, as PromQL's max does).
func (q gaugeQuery) eval(ctx context.Context, src SeriesSource, services []string, scope Scope, at time.Time) (*Result, error) {
	ms, err := matchers(q.metric, services)
	if err != nil {
		return nil, err
	}
	ts := at.UnixMilli()
	g := newGrouping(scope, nil)
	err = src.SelectLatest(ctx, ts, ms, func(ls labels.Labels, t int64, v float64) {
		gr, first := g.of(ls)
		if q.count {
			gr.sum.add(1)
			return
		}
		if !q.newest {
			gr.sum.add(v)
			return
		}
		if f := float64(t) / 1000; first || gr.sum.v < f || math.IsNaN(gr.sum.v) {
			gr.sum.v = f
		}
	})
	if err != nil {
		return nil, err
	}
	return g.result(ts), nil
}

// counterRate is PromQL's rate() of one float series with the samples pts
// in (rangeStart, rangeEnd] over a range of rangeSeconds: the increase
// between the first and last sample, counter resets added back, extrapolated
// towards the range's ends (all the way when the gap is within 110% of the
// average sample spacing, half a spacing otherwise, and never to below a
// zero counter), per second of the range. Fewer than two samples have no
// rate. It follows promql's extrapolatedRate for floats without start
// timestamps, step by step, so the results are the same bits.
func counterRate(pts []promql.FPoint, rangeStart, rangeEnd int64, rangeSeconds float64) (float64, bool) {
	n := len(pts)
	if n < 2 {
		return 0, false
	}
	firstT, lastT := pts[0].T, pts[n-1].T
	result := pts[n-1].F - pts[0].F
	for i, cur := range pts[1:] {
		if prev := pts[i]; cur.F < prev.F {
			result += prev.F
		}
	}
	durationToStart := float64(firstT-rangeStart) / 1000
	durationToEnd := float64(rangeEnd-lastT) / 1000
	sampledInterval := float64(lastT-firstT) / 1000
	averageDurationBetweenSamples := sampledInterval / float64(n-1)
	extrapolationThreshold := averageDurationBetweenSamples * 1.1
	if durationToStart >= extrapolationThreshold {
		durationToStart = averageDurationBetweenSamples / 2
	}
	durationToZero := durationToStart
	if result > 0 && pts[0].F >= 0 {
		durationToZero = sampledInterval * (pts[0].F / result)
	}
	if durationToZero < durationToStart {
		durationToStart = durationToZero
	}
	if durationToEnd >= extrapolationThreshold {
		durationToEnd = averageDurationBetweenSamples / 2
	}
	factor := 1.0
	if sampledInterval != 0 {
		factor = (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	}
	factor /= rangeSeconds
	return result * factor, true
}

// SeriesMetrics lists the metrics whose samples the Reader and
// DownstreamP99 read from a SeriesSource, so that a store can keep them at
// hand.
func SeriesMetrics() []string {
	out := []string{DownstreamP99.Metric}
	for _, q := range sharedRates {
		out = append(out, q.metric)
	}
	for _, q := range ownGauges {
		out = append(out, q.metric)
	}
	slices.Sort(out)
	return slices.Compact(out) // freshness and reporting read the same gauge
}
