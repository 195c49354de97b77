package signalsource_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
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
	require.Equal(t, "the metrics source did not answer", charts[0].Failed)
	require.Empty(t, charts[0].Points)
	require.Empty(t, charts[1].Failed)
	require.NotEmpty(t, charts[1].Points)

	s, err = signalsource.New(signalsource.Options{Source: warningSource{failOn: "breaker_state", failErr: signals.ErrQuery}, Clock: clk})
	require.NoError(t, err)
	sc, err := s.ServiceCharts(context.Background(), "checkout", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "Breaker states", sc[2].Title)
	require.Equal(t, "the metrics source refused the query", sc[2].Failed)
	require.Empty(t, sc[0].Failed)
}

// degradedSource answers like instantSource, but the p99 query fails and
// the request-rate query answers with a federated store's partial-data
// warning.
type degradedSource struct{ instantSource }

func (s degradedSource) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	if strings.Contains(q, "histogram_quantile(0.99") {
		return nil, signals.ErrUnavailable
	}
	res, err := s.instantSource.Query(ctx, q, at)
	if err == nil && strings.HasPrefix(q, "sum by (service) (rate(governor_sdk_requests_total") {
		res.Warnings = []string{"PromQL info: metric might not be a counter", storeDown}
	}
	return res, err
}

// TestEnrichNamesPartialAndFailedSignals: a signal whose query answered
// with a partial-data warning, and one whose query failed, are named with
// their reasons in the error Services returns (a *model.SignalError, which
// the overview words apart from "metrics unavailable"), while the signals
// that did come back are still filled in.
func TestEnrichNamesPartialAndFailedSignals(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	base := &model.StaticFleet{}
	base.Set([]model.ServiceStatus{{Name: "checkout"}}, nil)
	rd, err := signals.NewReader(degradedSource{}, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	en, err := signalsource.Enrich(base, rd, clk)
	require.NoError(t, err)
	svcs, err := en.Services(context.Background())
	require.Len(t, svcs, 1)
	require.Nil(t, svcs[0].P99, "a failed signal stays unknown")
	require.Nil(t, svcs[0].RequestRate, "a partial signal stays unknown")
	require.Equal(t, 0.1, svcs[0].ShedByClass["sheddable"], "what came back is still shown")

	var se *model.SignalError
	require.ErrorAs(t, err, &se)
	require.NoError(t, se.Err, "the read itself answered")
	got := map[string]model.SignalProblem{}
	for _, p := range se.Signals {
		got[p.Signal] = p
	}
	require.Equal(t, model.SignalProblem{Signal: "request_rate", Reason: storeDown}, got["request_rate"])
	require.Equal(t, model.SignalProblem{Signal: "latency_p99", Failed: true, Reason: "the metrics source did not answer"}, got["latency_p99"])
	for _, p := range se.Signals {
		require.NotContains(t, p.Reason, "PromQL info", "an info is no partial data")
	}

	// The base fleet's own failure is kept apart, for "metrics unavailable".
	errLedger := errors.New("enginesource: delivery ledger: connection refused")
	base.Set([]model.ServiceStatus{{Name: "checkout"}}, errLedger)
	_, err = en.Services(context.Background())
	require.ErrorIs(t, err, errLedger)
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, se.Err, errLedger)
	require.NotEmpty(t, se.Signals)
}

// failingSource fails every query with err.
type failingSource struct{ err error }

func (f failingSource) Query(context.Context, string, time.Time) (*signals.Result, error) {
	return nil, f.err
}

func (f failingSource) QueryRange(context.Context, string, signals.Range) (*signals.Result, error) {
	return nil, f.err
}

// TestChartAndOverviewWordAFailedQueryAlike: the service page's chart and
// the overview's problem say the same words for the same failure, and
// neither shows the backend's details.
func TestChartAndOverviewWordAFailedQueryAlike(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"deadline", context.DeadlineExceeded, "the metrics source took too long"},
		{"deadline and unavailable", errors.Join(signals.ErrUnavailable, context.DeadlineExceeded), "the metrics source took too long"},
		{"unavailable", fmt.Errorf("%w: dial tcp 10.0.0.1:9090: connection refused", signals.ErrUnavailable), "the metrics source did not answer"},
		{"refused", fmt.Errorf("%w: bad_data: parse error at char 7", signals.ErrQuery), "the metrics source refused the query"},
		{"other", errors.New("prometheus: 10.0.0.1:9090: tls handshake"), "the metrics query failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
			s, err := signalsource.New(signalsource.Options{Source: failingSource{tt.err}, Clock: clk})
			require.NoError(t, err)
			charts, _ := s.Window(context.Background(), "checkout", clk.Now().Add(-time.Hour), clk.Now(), model.SignalRequestRate)
			require.Equal(t, tt.want, charts[0].Failed, "chart")

			// One signal fails, the rest answer, so the read itself does.
			base := &model.StaticFleet{}
			base.Set([]model.ServiceStatus{{Name: "checkout"}}, nil)
			rd, err := signals.NewReader(failP99{instantSource{}, tt.err}, signals.ReaderOptions{MaxAge: -1})
			require.NoError(t, err)
			en, err := signalsource.Enrich(base, rd, clk)
			require.NoError(t, err)
			_, err = en.Services(context.Background())
			var se *model.SignalError
			require.ErrorAs(t, err, &se)
			var got []model.SignalProblem
			for _, p := range se.Signals {
				if p.Signal == "latency_p99" {
					got = append(got, p)
				}
			}
			require.Equal(t, []model.SignalProblem{{Signal: "latency_p99", Failed: true, Reason: tt.want}}, got, "overview")
		})
	}
}

// failP99 answers like instantSource but fails the p99 query with err.
type failP99 struct {
	instantSource
	err error
}

func (s failP99) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	if strings.Contains(q, "histogram_quantile(0.99") {
		return nil, s.err
	}
	return s.instantSource.Query(ctx, q, at)
}
