package engineclient_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	engineapi "governor.dev/governor/engine/api"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/ui/engineclient"
	"governor.dev/governor/ui/model"
)

// The client reads the alert levels in force, their origin and the
// baseline behind them from the real engine API handler over the
// evaluator's levels.
func TestAlertLevelsAgainstEngineAPI(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := evaluate.DefaultAlertLevels()
	learned := func(svc string) (thresholds.Recommendation, bool) {
		if svc == "search" {
			return thresholds.Recommendation{Inconclusive: true, HealthyIntervals: 12}, true
		}
		return thresholds.Recommendation{HealthyIntervals: 420, BaselineP99: 0.16, LatencyWarn: 0.3, LatencyCritical: 0.4,
			BaselineErrorRatio: 0.002, ErrorWarn: 0.004, ErrorCritical: 0.006}, true
	}
	ev := &evals{tick: t0, scores: []loadscore.Score{{Key: signals.Key{Service: "checkout"}, At: t0, Value: 0.5, Known: true},
		{Key: signals.Key{Service: "search"}, At: t0, Value: 0.4, Known: true}}}
	srv := httptest.NewServer(engineapi.Handler(engineapi.Options{Evaluations: ev, Versions: st,
		AlertLevels: func(svc string) []evaluate.SignalLevels { return l.InForce(svc, learned, 100) }}))
	t.Cleanup(srv.Close)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL})
	require.NoError(t, err)

	d, err := c.ServiceDetail(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, []model.AlertLevel{
		{Signal: "latency_p99", InForce: true, Warn: ptr(0.3), Critical: ptr(0.4), Source: "learned", WarnFrom: "learned", CriticalFrom: "learned",
			Learned: true, Baseline: ptr(0.16), Samples: 420, Needed: 100},
		{Signal: "error_ratio", InForce: true, Warn: ptr(0.01), Critical: ptr(0.05), Source: "configured", WarnFrom: "floor", CriticalFrom: "floor",
			Learned: true, Baseline: ptr(0.002), Samples: 420, Needed: 100},
	}, d.Levels)

	d, err = c.ServiceDetail(ctx, "search")
	require.NoError(t, err)
	require.Len(t, d.Levels, 2)
	require.Equal(t, model.AlertLevel{Signal: "latency_p99", Source: "learned", Learned: true, Samples: 12, Needed: 100}, d.Levels[0],
		"still learning: no p99 levels, no baseline")
}

func ptr(v float64) *float64 { return &v }
