package signalsource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/signalsource"
)

// warningSource answers every range query with one point of the service
// and the given warnings, except the queries containing failOn, which fail
// with failErr.
type warningSource struct {
	warnings []string
	failOn   string
	failErr  error
}

func (w warningSource) Query(context.Context, string, time.Time) (*signals.Result, error) {
	return nil, signals.ErrQuery
}

func (w warningSource) QueryRange(_ context.Context, q string, r signals.Range) (*signals.Result, error) {
	if w.failOn != "" && strings.Contains(q, w.failOn) {
		return nil, w.failErr
	}
	return &signals.Result{Type: signals.TypeMatrix, Warnings: w.warnings, Series: []signals.Series{
		{Labels: signals.Labels{"service": "checkout", "class": "critical", "downstream": "db"}, Points: []signals.Point{{T: r.End, V: 0.5}}},
	}}, nil
}

const storeDown = "failed to receive any data from Addr: store-eu-1:10901: context deadline exceeded"

// TestChartsCarryPartialDataWarnings: a federated store's partial response
// reaches every chart drawn from it, and infos or PromQL annotations (no
// data missing) do not.
func TestChartsCarryPartialDataWarnings(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	s, err := signalsource.New(signalsource.Options{Source: warningSource{warnings: []string{
		"PromQL info: metric might not be a counter", signals.InfoPrefix + "2 native histogram samples dropped", storeDown,
	}}, Clock: clk})
	require.NoError(t, err)
	charts, err := s.Charts(context.Background(), "checkout", time.Hour)
	require.NoError(t, err)
	for _, c := range charts {
		require.Equal(t, storeDown, c.Partial, c.Title)
		require.Empty(t, c.Failed, c.Title)
		require.NotEmpty(t, c.Points, c.Title)
	}
	sc, err := s.ServiceCharts(context.Background(), "checkout", time.Hour)
	require.NoError(t, err)
	for _, c := range sc {
		require.Equal(t, storeDown, c.Partial, c.Title)
		require.Empty(t, c.Failed, c.Title)
	}

	s, err = signalsource.New(signalsource.Options{Source: warningSource{warnings: []string{"PromQL warning: mixed histograms", signals.InfoPrefix + "x"}}, Clock: clk})
	require.NoError(t, err)
	charts, err = s.Charts(context.Background(), "checkout", time.Hour)
	require.NoError(t, err)
	for _, c := range charts {
		require.Empty(t, c.Partial, "%s: annotations and infos are no missing data", c.Title)
	}
}

// TestChartsCarryManyPartialWarningsInShort: several partial warnings are
// all counted, and a very long one is cut, so a chart's notice stays short.
func TestChartsCarryManyPartialWarningsInShort(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	long := strings.Repeat("x", 1000)
	s, err := signalsource.New(signalsource.Options{Source: warningSource{warnings: []string{storeDown, storeDown, "store-us-2 unavailable", long}}, Clock: clk})
	require.NoError(t, err)
	charts, err := s.Window(context.Background(), "checkout", clk.Now().Add(-time.Hour), clk.Now(), "load_score")
	require.NoError(t, err)
	require.Len(t, charts, 1)
	p := charts[0].Partial
	require.True(t, strings.HasPrefix(p, storeDown+"; store-us-2 unavailable; "), p)
	require.Less(t, len(p), 600, p)
	require.Equal(t, 1, strings.Count(p, storeDown), "repeated warnings are shown once")
}

// TestFailedQueryIsToldApartFromNoData: a query that fails marks its chart
// Failed with the reason, the others are drawn; an empty answer is no data,
// not a failure.
func TestFailedQueryIsToldApartFromNoData(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	s, err := signalsource.New(signalsource.Options{Source: warningSource{failOn: "governor_engine_load_score", failErr: signals.ErrUnavailable}, Clock: clk})
	require.NoError(t, err)
	charts, err := s.Window(context.Background(), "checkout", clk.Now().Add(-time.Hour), clk.Now(), "load_score", "request_rate")
	require.NoError(t, err)
	require.Equal(t, "the metrics source did not answer: it is unavailable", charts[0].Failed)
	require.Empty(t, charts[0].Points)
	require.Empty(t, charts[1].Failed)
	require.NotEmpty(t, charts[1].Points)

	s, err = signalsource.New(signalsource.Options{Source: warningSource{failOn: "breaker_state", failErr: signals.ErrQuery}, Clock: clk})
	require.NoError(t, err)
	sc, err := s.ServiceCharts(context.Background(), "checkout", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "Breaker states", sc[2].Title)
	require.Equal(t, "the metrics source did not answer: it refused the query", sc[2].Failed)
	require.Empty(t, sc[0].Failed)
}
