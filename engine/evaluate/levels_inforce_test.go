package evaluate

import (
	"math"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/thresholds"
)

// TestLevelsInForce: per signal, the levels in force, where each comes
// from (learned, the configured floor, configured, the service's own), and
// the baseline behind learned ones with its sample count; the same
// numbers the alerting compares with (P99Levels, ErrorLevels).
func TestLevelsInForce(t *testing.T) {
	learned := func(svc string) (thresholds.Recommendation, bool) {
		switch svc {
		case "steady": // learned error warn above the 1% floor, critical below the 5% one
			return thresholds.Recommendation{HealthyIntervals: 420, BaselineP99: 0.2, LatencyWarn: 0.21, LatencyCritical: 0.22,
				BaselineErrorRatio: 0.012, ErrorWarn: 0.02, ErrorCritical: 0.03}, true
		case "young":
			return thresholds.Recommendation{Inconclusive: true, HealthyIntervals: 42}, true
		}
		return thresholds.Recommendation{}, false
	}
	l := DefaultAlertLevels()
	l.Services = map[string]LevelOverride{"own": {ErrorWarn: 0.001, ErrorCritical: 0.002, LatencyWarn: time.Second, LatencyCritical: 2 * time.Second},
		"off": {Disabled: true}}
	type want struct {
		inForce        bool
		warn, crit     float64
		source         string
		wFrom, cFrom   string
		learned, concl bool
		baseline       float64
		samples        int
	}
	tests := []struct {
		svc      string
		p99, err want
	}{
		{"steady",
			want{true, 0.25, 0.3, "learned", FromLearned, FromLearned, true, true, 0.2, 420},
			want{true, 0.02, 0.05, "learned", FromLearned, FromFloor, true, true, 0.012, 420}},
		{"young",
			want{false, 0, 0, "learned", "", "", true, false, 0, 42},
			want{true, 0.01, 0.05, "configured", FromFloor, FromFloor, true, false, 0, 42}},
		{"never seen",
			want{false, 0, 0, "learned", "", "", true, false, 0, 0},
			want{true, 0.01, 0.05, "configured", FromFloor, FromFloor, true, false, 0, 0}},
		{"own",
			want{true, 1, 2, "configured", FromOverride, FromOverride, false, false, 0, 0},
			want{true, 0.001, 0.002, "configured", FromOverride, FromOverride, false, false, 0, 0}},
	}
	check := func(t *testing.T, svc string, got SignalLevels, w want) {
		t.Helper()
		if got.InForce != w.inForce || math.Abs(got.Warn-w.warn) > 1e-12 || math.Abs(got.Critical-w.crit) > 1e-12 || got.Source != w.source ||
			got.WarnFrom != w.wFrom || got.CriticalFrom != w.cFrom || got.Learned != w.learned || got.Conclusive != w.concl ||
			math.Abs(got.Baseline-w.baseline) > 1e-12 || got.Samples != w.samples {
			t.Fatalf("%s %s: got %+v, want %+v", svc, got.Signal, got, w)
		}
		if got.Learned && got.Needed != 100 {
			t.Fatalf("%s %s: needed %d, want 100", svc, got.Signal, got.Needed)
		}
	}
	for _, tt := range tests {
		t.Run(tt.svc, func(t *testing.T) {
			got := l.InForce(tt.svc, learned, 100)
			if len(got) != 2 || got[0].Signal != events.SignalLatencyP99 || got[1].Signal != events.SignalErrorRatio {
				t.Fatalf("got %+v", got)
			}
			check(t, tt.svc, got[0], tt.p99)
			check(t, tt.svc, got[1], tt.err)
			// The alerting compares with the same levels.
			w, c, src, ok := l.P99Levels(tt.svc, learned)
			if ok != got[0].InForce || w != got[0].Warn || c != got[0].Critical || src != got[0].Source {
				t.Fatalf("P99Levels %v %v %q %v, InForce %+v", w, c, src, ok, got[0])
			}
			w, c, src, ok = l.ErrorLevels(tt.svc, learned)
			if ok != got[1].InForce || w != got[1].Warn || c != got[1].Critical || src != got[1].Source {
				t.Fatalf("ErrorLevels %v %v %q %v, InForce %+v", w, c, src, ok, got[1])
			}
		})
	}
	if got := l.InForce("off", learned, 100); got != nil {
		t.Fatalf("disabled service: %+v", got)
	}
	var none *AlertLevels
	if got := none.InForce("steady", learned, 100); got != nil {
		t.Fatalf("alert levels off: %+v", got)
	}
	// Learning off: the configured error-ratio levels, no baseline.
	l.ErrorLearned = false
	got := l.InForce("steady", learned, 100)[1]
	check(t, "steady", got, want{true, 0.01, 0.05, "configured", FromConfigured, FromConfigured, false, false, 0, 0})
	// Fixed p99 levels for every service.
	l.LatencyWarn, l.LatencyCritical = 300*time.Millisecond, 600*time.Millisecond
	got = l.InForce("steady", learned, 100)[0]
	check(t, "steady", got, want{true, 0.3, 0.6, "configured", FromConfigured, FromConfigured, false, false, 0, 0})
}
