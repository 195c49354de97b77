package signalsource_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
	"governor.dev/governor/ui/signalsource"
)

type fakeSource struct {
	mu      sync.Mutex
	queries []string
	ranges  []signals.Range
	fail    bool
}

func (f *fakeSource) Query(context.Context, string, time.Time) (*signals.Result, error) {
	return nil, errors.New("not used")
}

func (f *fakeSource) QueryRange(_ context.Context, q string, r signals.Range) (*signals.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	f.ranges = append(f.ranges, r)
	if f.fail {
		return nil, errors.New("prometheus: connection refused")
	}
	return &signals.Result{Series: []signals.Series{
		{Labels: signals.Labels{"service": "checkout"}, Points: []signals.Point{{T: r.Start, V: 0.25}, {T: r.End, V: 0.5}}},
		{Labels: signals.Labels{"service": "other"}, Points: []signals.Point{{T: r.Start, V: 9}}},
	}}, nil
}

func TestCharts(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	src := &fakeSource{}
	s, err := signalsource.New(signalsource.Options{Source: src, Clock: clk, Points: 61})
	require.NoError(t, err)
	charts, err := s.Charts(context.Background(), "checkout", time.Hour)
	require.NoError(t, err)
	require.Len(t, charts, 7)
	require.Equal(t, "p99 latency", charts[3].Title)
	require.Equal(t, "ms", charts[3].Unit)
	require.Equal(t, 250.0, charts[3].Points[0].Value, "seconds shown as milliseconds")
	require.Len(t, charts[3].Points, 2, "other services' series are left out")
	require.Equal(t, 50.0, charts[1].Points[1].Value, "ratios shown as percent")
	require.Equal(t, 100.0, charts[1].Max)
	require.Equal(t, time.Minute, src.ranges[0].Step)
	require.Equal(t, clk.Now(), src.ranges[0].End)
	require.True(t, strings.Contains(src.queries[0], `service="checkout"`), src.queries[0])

	src.fail = true
	charts, err = s.Charts(context.Background(), "checkout", 15*time.Minute)
	require.Error(t, err)
	require.Len(t, charts, 7)
	require.Empty(t, charts[0].Points)
	_, err = signalsource.New(signalsource.Options{})
	require.Error(t, err)
}

// instantSource answers every instant query with one sample per service,
// the value depending on the query's metric.
type instantSource struct{ fail bool }

func (s instantSource) Query(_ context.Context, q string, at time.Time) (*signals.Result, error) {
	if s.fail {
		return nil, errors.New("prometheus: connection refused")
	}
	v := 0.0
	labels := signals.Labels{"service": "checkout"}
	switch {
	case strings.Contains(q, "histogram_quantile(0.99, sum by (service, le) (rate(governor_sdk_request_duration"):
		v = 0.25
	case strings.HasPrefix(q, "sum by (service) (rate(governor_sdk_requests_total"):
		v = 120
	case strings.Contains(q, "class"):
		labels = signals.Labels{"service": "checkout", "class": "sheddable"}
		v = 0.1
	}
	return &signals.Result{Type: signals.TypeVector, Samples: []signals.Sample{{Labels: labels, Point: signals.Point{T: at, V: v}}}}, nil
}

func (instantSource) QueryRange(context.Context, string, signals.Range) (*signals.Result, error) {
	return nil, errors.New("not used")
}

func TestEnrich(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	base := &model.StaticFleet{}
	base.Set([]model.ServiceStatus{{Name: "checkout"}, {Name: "quiet"}}, nil)
	rd, err := signals.NewReader(instantSource{}, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	en, err := signalsource.Enrich(base, rd, clk)
	require.NoError(t, err)
	svcs, err := en.Services(context.Background())
	require.NoError(t, err)
	require.Equal(t, 120.0, *svcs[0].RequestRate)
	require.Equal(t, 0.25, *svcs[0].P99)
	require.Equal(t, 0.1, svcs[0].ShedByClass["sheddable"])
	require.Nil(t, svcs[1].RequestRate, "a service the metrics do not know stays unknown")

	rdDown, err := signals.NewReader(instantSource{fail: true}, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	en, err = signalsource.Enrich(base, rdDown, clk)
	require.NoError(t, err)
	svcs, err = en.Services(context.Background())
	require.Error(t, err)
	require.Len(t, svcs, 2, "the services still come back")
}

// TestEnrichFillsInWhenTheBaseFleetFails: when the base fleet fails but
// still returns services (the engine's scores when only the delivery
// ledger failed), their request rate, error ratio and p99 are still filled
// in, and the base's error is returned; with the metrics failing too, both
// errors are, on one line for the overview's banner.
func TestEnrichFillsInWhenTheBaseFleetFails(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	errLedger := errors.New("enginesource: delivery ledger: connection refused")
	base := &model.StaticFleet{}
	base.Set([]model.ServiceStatus{{Name: "checkout"}}, errLedger)
	rd, err := signals.NewReader(instantSource{}, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	en, err := signalsource.Enrich(base, rd, clk)
	require.NoError(t, err)
	svcs, err := en.Services(context.Background())
	require.ErrorIs(t, err, errLedger)
	require.Len(t, svcs, 1)
	require.NotNil(t, svcs[0].RequestRate)
	require.Equal(t, 120.0, *svcs[0].RequestRate)
	require.NotNil(t, svcs[0].ErrorRatio)
	require.Equal(t, 0.25, *svcs[0].P99)

	rdDown, err := signals.NewReader(instantSource{fail: true}, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	en, err = signalsource.Enrich(base, rdDown, clk)
	require.NoError(t, err)
	svcs, err = en.Services(context.Background())
	require.ErrorIs(t, err, errLedger)
	first, _, _ := strings.Cut(err.Error(), "\n")
	require.Contains(t, first, "delivery ledger", "the banner shows the first line")
	require.Contains(t, first, "metrics")
	require.Len(t, svcs, 1)
}
