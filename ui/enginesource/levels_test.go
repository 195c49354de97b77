package enginesource_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/ui/enginesource"
	"governor.dev/governor/ui/model"
)

// The service detail carries the evaluator's alert levels in force; unknown
// numbers (no level in force, a baseline still learning) are nil.
func TestServiceDetailAlertLevels(t *testing.T) {
	l := evaluate.DefaultAlertLevels()
	learned := func(svc string) (thresholds.Recommendation, bool) {
		if svc == "checkout" {
			return thresholds.Recommendation{HealthyIntervals: 420, BaselineP99: 0.16, LatencyWarn: 0.3, LatencyCritical: 0.4,
				BaselineErrorRatio: 0.02, ErrorWarn: 0.03, ErrorCritical: 0.04}, true
		}
		return thresholds.Recommendation{Inconclusive: true, HealthyIntervals: 5}, true
	}
	src, err := enginesource.New(enginesource.Options{Scores: &fakeScores{},
		AlertLevels: func(svc string) []evaluate.SignalLevels { return l.InForce(svc, learned, 100) }})
	require.NoError(t, err)
	d, err := src.ServiceDetail(context.Background(), "checkout")
	require.NoError(t, err)
	require.Len(t, d.Levels, 2)
	e := d.Levels[1]
	require.Equal(t, [4]string{"error_ratio", "learned", "learned", "floor"}, [4]string{e.Signal, e.Source, e.WarnFrom, e.CriticalFrom})
	require.InDelta(t, 0.03, *e.Warn, 1e-12)
	require.InDelta(t, 0.05, *e.Critical, 1e-12)
	require.InDelta(t, 0.02, *e.Baseline, 1e-12)
	require.Equal(t, [2]int{420, 100}, [2]int{e.Samples, e.Needed})

	d, err = src.ServiceDetail(context.Background(), "search")
	require.NoError(t, err)
	require.Equal(t, model.AlertLevel{Signal: "latency_p99", Source: "learned", Learned: true, Samples: 5, Needed: 100}, d.Levels[0])
	require.Nil(t, d.Levels[1].Baseline)
	require.Nil(t, enginesource.AlertLevels(nil))
}
