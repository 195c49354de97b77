package signalsource_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
	"governor.dev/governor/ui/signalsource"
)

// routedSource answers each range query with the series of the first
// route whose key the query contains; a query no route matches gets an
// empty matrix, and fail makes every query fail.
type routedSource struct {
	mu      sync.Mutex
	routes  []route
	queries []string
	ranges  []signals.Range
	fail    error
}

type route struct {
	contains string
	series   []signals.Series
}

func (f *routedSource) Query(context.Context, string, time.Time) (*signals.Result, error) {
	return nil, errors.New("not used")
}

func (f *routedSource) QueryRange(_ context.Context, q string, r signals.Range) (*signals.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	f.ranges = append(f.ranges, r)
	if f.fail != nil {
		return nil, f.fail
	}
	for _, rt := range f.routes {
		if strings.Contains(q, rt.contains) {
			return &signals.Result{Type: signals.TypeMatrix, Series: rt.series}, nil
		}
	}
	return &signals.Result{Type: signals.TypeMatrix}, nil
}

// requireValidPromQL parses every query sent.
func (f *routedSource) requireValidPromQL(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	p := parser.NewParser(parser.Options{})
	for _, q := range f.queries {
		_, err := p.ParseExpr(q)
		require.NoError(t, err, q)
	}
}

func (f *routedSource) query(contains string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.queries {
		if strings.Contains(q, contains) {
			return q
		}
	}
	return ""
}

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func pts(vs ...float64) []signals.Point {
	out := make([]signals.Point, len(vs))
	for i, v := range vs {
		out[i] = signals.Point{T: t0.Add(time.Duration(i-len(vs)+1) * time.Minute), V: v}
	}
	return out
}

func TestServiceChartsByClassAndBreakers(t *testing.T) {
	clk := clock.NewFake(t0)
	src := &routedSource{routes: []route{
		{`outcome="admitted"`, []signals.Series{
			{Labels: signals.Labels{"class": "batch"}, Points: pts(5, 6)},
			{Labels: signals.Labels{"class": "critical"}, Points: pts(100, 110)},
			{Labels: signals.Labels{"class": "vip"}, Points: pts(1, 1)},
		}},
		{`outcome=~"` + signals.ShedOutcomes + `"`, []signals.Series{
			{Labels: signals.Labels{"class": "browse"}, Points: pts(0, 12.5)},
		}},
		{`governor_sdk_breaker_state`, []signals.Series{
			{Labels: signals.Labels{"downstream": "payments"}, Points: pts(0, 2, 1)},
			{Labels: signals.Labels{"downstream": "inventory"}, Points: pts(0, 0, 0)},
		}},
	}}
	s, err := signalsource.New(signalsource.Options{Source: src, Clock: clk, Points: 61})
	require.NoError(t, err)
	charts, err := s.ServiceCharts(context.Background(), "checkout", time.Hour)
	require.NoError(t, err)
	require.Len(t, charts, 3)

	adm := charts[0]
	require.Equal(t, "Admitted by class", adm.Title)
	require.Equal(t, "req/s", adm.Unit)
	names := func(c model.SeriesChart) []string {
		var out []string
		for _, s := range c.Series {
			out = append(out, s.Name)
		}
		return out
	}
	require.Equal(t, []string{"critical", "core", "browse", "batch", "vip"}, names(adm), "the SDK's classes in priority order, then any other")
	require.Equal(t, 110.0, adm.Series[0].Points[1].Value)
	require.Empty(t, adm.Series[1].Points, "a class without samples keeps its legend entry, empty")
	require.Equal(t, t0, adm.Series[0].Points[1].At)

	shed := charts[1]
	require.Equal(t, []string{"critical", "core", "browse", "batch"}, names(shed))
	require.Equal(t, 12.5, shed.Series[2].Points[1].Value)

	brk := charts[2]
	require.Equal(t, "Breaker states", brk.Title)
	require.Equal(t, []string{"closed", "half-open", "open"}, brk.Levels)
	require.Equal(t, []string{"inventory", "payments"}, names(brk), "downstreams by name")
	require.Equal(t, 2.0, brk.Series[1].Points[1].Value)
	require.Equal(t, 0.0, brk.Min)
	require.Equal(t, 2.0, brk.Max)

	// The queries select the service and the outcomes, group by class or
	// downstream, and the rate window covers the step.
	q := src.query(`outcome="admitted"`)
	require.Equal(t, `sum by (class) (rate(governor_sdk_requests_total{service="checkout",outcome="admitted"}[1m]))`, q)
	require.Equal(t, `max by (downstream) (governor_sdk_breaker_state{service="checkout"})`, src.query("breaker_state"))
	require.Equal(t, time.Minute, src.ranges[0].Step)
	require.Equal(t, t0, src.ranges[0].End)
	require.Equal(t, t0.Add(-time.Hour), src.ranges[0].Start)

	_, err = s.ServiceCharts(context.Background(), "checkout", 7*24*time.Hour)
	require.NoError(t, err)
	require.Contains(t, src.query(`outcome="admitted"}[2h48m]`), `rate(governor_sdk_requests_total{service="checkout",outcome="admitted"}[2h48m])`,
		"a step longer than the window becomes the rate window: no sample is skipped")
	src.requireValidPromQL(t)
}

func TestServiceChartsSayWhyThereIsNoData(t *testing.T) {
	src := &routedSource{}
	s, err := signalsource.New(signalsource.Options{Source: src, Clock: clock.NewFake(t0)})
	require.NoError(t, err)
	charts, err := s.ServiceCharts(context.Background(), "checkout", 15*time.Minute)
	require.NoError(t, err)
	require.Len(t, charts, 3)
	require.Empty(t, charts[0].Series)
	require.Equal(t, "no samples of governor_sdk_requests_total for checkout in this range", charts[0].NoData)
	require.Contains(t, charts[2].NoData, "no downstream breaker in checkout's metrics")

	src.fail = errors.Join(signals.ErrUnavailable, errors.New("dial tcp 10.0.0.1:9090: connection refused"))
	charts, err = s.ServiceCharts(context.Background(), "checkout", 15*time.Minute)
	require.Error(t, err, "every query failed")
	require.Len(t, charts, 3)
	require.Equal(t, "the metrics source did not answer", charts[1].NoData)
	require.NotContains(t, charts[1].NoData, "10.0.0.1", "no internals on the page")

	_, err = s.ServiceCharts(context.Background(), "", time.Hour)
	require.ErrorIs(t, err, signalsource.ErrInvalid)
	_, err = signalsource.New(signalsource.Options{Source: src, Window: -time.Second})
	require.ErrorContains(t, err, "Options.Window")
}

func TestWindow(t *testing.T) {
	src := &routedSource{routes: []route{
		{"governor_engine_load_score", []signals.Series{{Labels: signals.Labels{"service": "checkout"}, Points: pts(0.6, 0.9)}}},
		{"histogram_quantile(0.99", []signals.Series{
			{Labels: signals.Labels{"service": "checkout"}, Points: pts(0.2, 0.3)},
			{Labels: signals.Labels{"service": "other"}, Points: pts(9, 9)},
		}},
	}}
	s, err := signalsource.New(signalsource.Options{Source: src, Clock: clock.NewFake(t0), Points: 31})
	require.NoError(t, err)
	start, end := t0.Add(-time.Hour), t0.Add(-30*time.Minute)
	charts, err := s.Window(context.Background(), "checkout", start, end,
		model.SignalLoadScore, model.SignalLatencyP99, model.SignalRequestRate, model.SignalErrorRatio)
	require.NoError(t, err)
	require.Len(t, charts, 4)
	require.Equal(t, "Load score", charts[0].Title)
	require.Equal(t, 0.9, charts[0].Points[1].Value)
	require.Equal(t, 1.0, charts[0].Max)
	require.Equal(t, `max by (service) (governor_engine_load_score{service="checkout"})`, src.query("load_score"))
	require.Equal(t, "p99 latency", charts[1].Title)
	require.Equal(t, []model.Point{{At: t0.Add(-time.Minute), Value: 200}, {At: t0, Value: 300}}, charts[1].Points, "ms, this service only")
	require.Equal(t, "Request rate", charts[2].Title)
	require.Empty(t, charts[2].Points)
	require.Equal(t, "no samples of the request_rate signal for checkout in this range", charts[2].NoData)
	require.Equal(t, "Error ratio", charts[3].Title)
	require.Equal(t, start, src.ranges[0].Start)
	require.Equal(t, end, src.ranges[0].End)
	require.Equal(t, time.Minute, src.ranges[0].Step)
	src.requireValidPromQL(t)

	src.routes = nil
	charts, err = s.Window(context.Background(), "checkout", start, end, model.SignalLoadScore)
	require.NoError(t, err)
	require.Contains(t, charts[0].NoData, "does not scrape the engine")

	n := len(src.queries)
	_, err = s.Window(context.Background(), "checkout", start, end, model.SignalLoadScore, "cpu_temperature")
	require.ErrorIs(t, err, signalsource.ErrInvalid)
	require.ErrorContains(t, err, `names[1]: unknown signal "cpu_temperature"`)
	_, err = s.Window(context.Background(), "checkout", end, start, model.SignalLoadScore)
	require.ErrorContains(t, err, "before its start")
	require.Len(t, src.queries, n, "nothing is queried for bad arguments")

	src.fail = errors.Join(signals.ErrQuery, errors.New("parse error"))
	charts, err = s.Window(context.Background(), "checkout", start, end, model.SignalLoadScore, model.SignalRequestRate)
	require.Error(t, err)
	require.Equal(t, "the metrics source refused the query", charts[1].NoData)
}

// TestChartsLeaveOutNonFiniteSamples: PromQL answers NaN for a ratio over
// no traffic (0/0) and for a quantile of an empty histogram, exactly when a
// service stops serving. Such samples are no data, left out (the chart
// breaks there), never points: a NaN coordinate cut the SVG line short and
// showed "NaN %" on hover.
func TestChartsLeaveOutNonFiniteSamples(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	src := &routedSource{routes: []route{
		{"histogram_quantile(0.99", []signals.Series{{Labels: signals.Labels{"service": "checkout"}, Points: pts(0.2, nan, inf, 0.3)}}},
		{`outcome="admitted"`, []signals.Series{
			{Labels: signals.Labels{"class": "critical"}, Points: pts(10, nan, 12)},
			{Labels: signals.Labels{"class": "batch"}, Points: pts(nan, nan)},
		}},
	}}
	s, err := signalsource.New(signalsource.Options{Source: src, Clock: clock.NewFake(t0), Points: 31})
	require.NoError(t, err)
	charts, err := s.Window(context.Background(), "checkout", t0.Add(-5*time.Minute), t0, model.SignalLatencyP99)
	require.NoError(t, err)
	require.Equal(t, []model.Point{{At: t0.Add(-3 * time.Minute), Value: 200}, {At: t0, Value: 300}}, charts[0].Points)

	sc, err := s.ServiceCharts(context.Background(), "checkout", 5*time.Minute)
	require.NoError(t, err)
	adm := sc[0]
	require.Equal(t, "critical", adm.Series[0].Name)
	require.Equal(t, []model.Point{{At: t0.Add(-2 * time.Minute), Value: 10}, {At: t0, Value: 12}}, adm.Series[0].Points)
	require.Equal(t, "batch", adm.Series[3].Name)
	require.Empty(t, adm.Series[3].Points, "a class with only NaN samples has no data")
}
