package evaluate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/thresholds"
)

// P99Levels says which p99 levels a service is compared with and why.
func TestP99Levels(t *testing.T) {
	learned := func(svc string) (thresholds.Recommendation, bool) {
		switch svc {
		case "steady":
			return thresholds.Recommendation{BaselineP99: 0.2, LatencyWarn: 0.21, LatencyCritical: 0.22}, true
		case "young":
			return thresholds.Recommendation{Inconclusive: true}, true
		}
		return thresholds.Recommendation{}, false
	}
	l := DefaultAlertLevels()
	l.Services = map[string]LevelOverride{"fixed": {LatencyWarn: 300 * time.Millisecond, LatencyCritical: 600 * time.Millisecond}, "off": {Disabled: true}}
	tests := []struct {
		svc        string
		warn, crit float64
		source     string
		ok         bool
	}{
		{"steady", 0.25, 0.3, "learned", true}, // floored 25% and 50% above the baseline
		{"young", 0, 0, "learned", false},
		{"unknown", 0, 0, "learned", false},
		{"fixed", 0.3, 0.6, "configured", true},
		{"off", 0, 0, "", false},
	}
	for _, tt := range tests {
		warn, crit, source, ok := l.P99Levels(tt.svc, learned)
		require.Equal(t, tt.ok, ok, tt.svc)
		require.InDelta(t, tt.warn, warn, 1e-9, tt.svc)
		require.InDelta(t, tt.crit, crit, 1e-9, tt.svc)
		require.Equal(t, tt.source, source, tt.svc)
	}
	l.LatencyWarn, l.LatencyCritical = time.Second, 2*time.Second
	warn, crit, source, ok := l.P99Levels("steady", learned)
	require.True(t, ok)
	require.Equal(t, [3]any{1.0, 2.0, "configured"}, [3]any{warn, crit, source}, "fixed levels for every service win over learned ones")
	var none *AlertLevels
	_, _, _, ok = none.P99Levels("steady", learned)
	require.False(t, ok, "alert levels disabled")
}
