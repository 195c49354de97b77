package signals

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

// BucketQuantile is the query
// histogram_quantile(Q, sum by (By..., le) (rate(Metric[Window]))) over
// every series of a classic histogram's buckets: the Q-quantile per
// combination of the By labels.
type BucketQuantile struct {
	Q float64
	// Metric names the bucket series (a name ending in _bucket).
	Metric string
	// By are the output labels, le excluded.
	By     []string
	Window time.Duration
}

// DownstreamP99 is the p99 latency of every service's calls to each of its
// downstreams over the last minute.
var DownstreamP99 = BucketQuantile{Q: 0.99, Metric: "governor_sdk_downstream_duration_seconds_bucket",
	By: []string{"service", "downstream"}, Window: time.Minute}

// String is the query in PromQL.
func (q BucketQuantile) String() string {
	by := append(append(make([]string, 0, len(q.By)+1), q.By...), model.BucketLabel)
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s) (rate(%s[%s])))",
		strconv.FormatFloat(q.Q, 'g', -1, 64), strings.Join(by, ", "), q.Metric, model.Duration(q.Window))
}

// Eval answers the query at time at. From a SeriesSource it reads the
// bucket series' samples and computes the rates (see counterRate), their
// sums and the quantiles (PromQL's BucketQuantile) itself, in the engine's
// order, so the values are the engine's to the bit; the query goes to the
// source's PromQL engine when a series holds native histogram samples.
// Any other source is sent the query.
func (q BucketQuantile) Eval(ctx context.Context, src Source, at time.Time) (*Result, error) {
	if series, ok := src.(SeriesSource); ok {
		res, err := q.evalSeries(ctx, series, at)
		if !errors.Is(err, ErrNotFloat) {
			return res, err
		}
	}
	return src.Query(ctx, q.String(), at)
}

// quantileSum is one sample of the sum by (By..., le): the rates of the
// bucket series with those labels.
type quantileSum struct {
	hist int // index of its histogram
	le   string
	sum  sum
}

// quantileHist is one output sample: the buckets of the sums with its By
// labels.
type quantileHist struct {
	labels  Labels
	buckets promql.Buckets
}

func (q BucketQuantile) evalSeries(ctx context.Context, src SeriesSource, at time.Time) (*Result, error) {
	ts := at.UnixMilli()
	start := ts - q.Window.Milliseconds()
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, q.Metric)}
	var (
		vals  = make([]string, len(q.By))
		key   []byte
		sumOf = map[string]int{} // By values and le: index in sums
		hist  = map[string]int{} // By values: index in hists
		sums  []quantileSum
		hists []quantileHist
	)
	err := src.SelectFloats(ctx, start, ts, ms, func(ls labels.Labels, pts []promql.FPoint) {
		v, ok := counterRate(pts, start, ts, q.Window.Seconds())
		if !ok {
			return
		}
		// The sum's groups, as PromQL's "by" makes them: a label absent or
		// empty groups as empty; groups in the order they first appear.
		key = key[:0]
		for i, n := range q.By {
			vals[i] = ls.Get(n)
			key = append(append(key, vals[i]...), 0xff)
		}
		byLen := len(key)
		le := ls.Get(model.BucketLabel)
		key = append(key, le...)
		if i, ok := sumOf[string(key)]; ok {
			sums[i].sum.add(v)
			return
		}
		h, ok := hist[string(key[:byLen])]
		if !ok {
			l := make(Labels, len(q.By))
			for i, n := range q.By {
				if vals[i] != "" {
					l[n] = vals[i]
				}
			}
			h = len(hists)
			hist[string(key[:byLen])] = h
			hists = append(hists, quantileHist{labels: l})
		}
		sumOf[string(key)] = len(sums)
		sums = append(sums, quantileSum{hist: h, le: le})
		sums[len(sums)-1].sum.add(v)
	})
	if err != nil {
		return nil, err
	}
	// histogram_quantile: each sum joins the buckets of its By labels, in
	// the sum's order; one without a valid le is left out.
	bad := 0
	for _, s := range sums {
		le, err := strconv.ParseFloat(s.le, 64)
		if err != nil || math.IsNaN(le) {
			bad++
			continue
		}
		h := &hists[s.hist]
		h.buckets = append(h.buckets, promql.Bucket{UpperBound: le, Count: s.sum.value()})
	}
	res := &Result{Type: TypeVector, Samples: make([]Sample, 0, len(hists))}
	t := time.UnixMilli(ts)
	forced := 0
	for _, h := range hists {
		if len(h.buckets) == 0 {
			continue
		}
		v, monotonic, _, _, _, _ := promql.BucketQuantile(q.Q, h.buckets)
		if monotonic {
			forced++
		}
		res.Samples = append(res.Samples, Sample{Labels: h.labels, Point: Point{T: t, V: v}})
	}
	if bad > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf(InfoPrefix+"%d bucket samples without a valid le label ignored", bad))
	}
	if forced > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf(InfoPrefix+"input to histogram_quantile needed to be fixed for monotonicity in %d groups", forced))
	}
	return res, nil
}
