package pages

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/pid"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/model"
)

// engineEvidenceJSON is evidence as engine/recommend's Proposer stores it:
// the Evidence with the band's verdict, its reason and the hour reference.
func engineEvidenceJSON(t testing.TB, at time.Time, autoApply bool) []byte {
	t.Helper()
	p99, rate, errs := 0.42, 180.0, 0.015
	ev := &recommend.Evidence{
		At: at, Setpoint: 0.7, LoadScore: 0.86,
		Terms: []loadscore.Contribution{
			{Term: loadscore.Latency, Input: signals.KnownValue(0.42), Target: 0.25, Normalized: 1, Weight: 0.3, EffectiveWeight: 0.5, Contribution: 0.5, Known: true},
			{Term: loadscore.CPU, Input: signals.KnownValue(0.72), Target: 1, Normalized: 0.72, Weight: 0.3, EffectiveWeight: 0.5, Contribution: 0.36, Known: true},
			{Term: loadscore.Memory, Input: signals.Unknown(signals.Missing, "no series"), Normalized: math.NaN(), Weight: 0.4, Reason: "no series"},
		},
		Signals: map[signals.Signal]*float64{signals.LatencyP99: &p99, signals.RequestRate: &rate, signals.ErrorRatio: &errs, signals.CPU: nil},
		PID:     pid.State{Time: at, Mode: pid.Auto, Setpoint: 0.7, Measurement: 0.86, Error: -0.16, P: -32, I: 200, D: -8, Unlimited: 160, Output: 160},
		Detector: recommend.Detector{Inconclusive: true, Reason: "3 of 10 healthy intervals", HealthyIntervals: 3, Intervals: 12,
			BaselineP99: 0.12, LatencyWarn: 0.3, LatencyCritical: 0.6, PeakThroughput: 210},
		Ceiling: recommend.Ceiling{From: 200, To: 160, Instances: 2, Routes: map[string]float64{"api": 160},
			PerInstance: map[string]float64{"api": 80}},
		Concurrency:    map[string][2]int{"api": {40, 32}},
		ExpectedEffect: "lower the ceiling from 200.0 to 160.0 req/s over 2 instances (api 80.0/s each); about 11.1% of the current 180.0 req/s would be refused",
		ExpectedScore:  0.76, ExpectedShedRatio: 0.111, Confidence: 0.64, KnownScores: 7,
	}
	raw, err := json.Marshal(struct {
		*recommend.Evidence
		AutoApply bool    `json:"auto_apply"`
		Policy    string  `json:"policy"`
		Reference float64 `json:"hour_reference"`
	}{ev, autoApply, "a change of 20.0% within the hour exceeds the band of 10.0%", 200})
	require.NoError(t, err)
	return raw
}

var evAt = time.Date(2026, 3, 1, 8, 50, 0, 0, time.UTC)

func TestEngineEvidenceDecodesWhatTheEngineStores(t *testing.T) {
	e, ok := parseEngineEvidence(engineEvidenceJSON(t, evAt, false))
	require.True(t, ok)
	require.Equal(t, evAt, e.At)
	require.Equal(t, 0.86, e.LoadScore)
	require.Equal(t, "auto", e.PID.Mode)
	require.Equal(t, -32.0, e.PID.P)
	require.Equal(t, 200.0, e.PID.I)
	require.Equal(t, 160.0, e.Ceiling.To)
	require.Equal(t, [2]int{40, 32}, e.Concurrency["api"])
	require.Equal(t, 0.42, *e.Terms[0].Input.Value)
	require.Nil(t, e.Terms[2].Input.Value, "unknown input")
	require.Equal(t, 0.5, e.Terms[0].EffectiveWeight)
	require.Equal(t, 0.42, *e.Signals[model.SignalLatencyP99])
	require.False(t, *e.AutoApply)
	require.Equal(t, 200.0, e.HourReference)
	require.True(t, e.Detector.Inconclusive)

	for _, raw := range []string{``, `{}`, `{"load_score":[0.5,0.7]}`, `not json`, `{"at":"2026-01-01T00:00:00Z"}`} {
		_, ok := parseEngineEvidence(json.RawMessage(raw))
		require.False(t, ok, raw)
	}
}

func TestBuildEvidence(t *testing.T) {
	e, ok := parseEngineEvidence(engineEvidenceJSON(t, evAt, false))
	require.True(t, ok)
	p := &Pages{}
	v := p.buildEvidence(e, nil, nil)

	require.Equal(t, "64 %", v.Confidence)
	require.Equal(t, []string{
		"60 % of the load score's weight was known (latency, cpu); unknown: memory",
		"7 consecutive known load scores before it",
		"the healthy baselines are still inconclusive (confidence × 0.8)",
	}, v.ConfidenceBasis)
	require.Equal(t, "no", v.Verdict)
	require.Contains(t, v.Policy, "exceeds the band")
	require.Equal(t, "200.0 req/s", v.HourReference)

	// The controller's terms with their signs, and how they add up.
	require.NotNil(t, v.PID)
	require.Equal(t, []pidTerm{
		{"P", "proportional: the gain times the error now", "−32.0 req/s", "lowers the ceiling"},
		{"I", "integral: the accumulated error, which holds the ceiling", "+200.0 req/s", "raises the ceiling"},
		{"D", "derivative: the score's rate of change", "−8.0 req/s", "lowers the ceiling"},
	}, v.PID.Terms)
	require.Equal(t, "160.0 req/s", v.PID.Unlimited)
	require.Equal(t, "200.0 req/s", v.PID.From)
	require.Equal(t, "160.0 req/s", v.PID.To)
	require.Equal(t, "−40.0 req/s (−20.0 %)", v.PID.Change)
	require.Empty(t, v.PID.Offered, "the ceiling is the controller's output")
	require.Equal(t, "−0.160", v.PID.Error)

	require.Equal(t, "0.860", v.TermSum)
	require.Equal(t, termRow{Name: "latency", Input: "420 ms", Target: "250 ms", Normalized: "1.00", Weight: "0.30", Contribution: "0.500", Known: true}, v.Terms[0])
	require.Equal(t, "no data", v.Terms[2].Input)
	require.False(t, v.Terms[2].Known)

	require.Equal(t, "inconclusive", v.Detector.State)
	require.Equal(t, "3 of 12 intervals healthy", v.Detector.Healthy)
	require.Equal(t, "120 ms", v.Detector.BaselineP99)
	require.Equal(t, "—", v.Detector.SlowCall)
	require.Equal(t, []ceilingRow{{Route: "api", ServiceWide: "160.0 req/s", PerInstance: "80.0 req/s", Concurrency: "40 → 32"}}, v.Ceiling)
	require.Equal(t, "200.0 req/s → 160.0 req/s over 2 instances", v.CeilingSum)

	// Without a metrics source, the charts are the evidence's own readings:
	// one visible point each.
	require.Len(t, v.Charts, 4)
	require.Contains(t, v.ChartsFrom, "no metrics source that draws past windows is configured")
	for _, c := range v.Charts {
		require.Contains(t, string(c.SVG), ` dot"`, c.Title)
	}
	require.Equal(t, "Load score", v.Charts[0].Title)
	require.Contains(t, string(v.Charts[0].SVG), "<title>setpoint 0.70</title>")
	require.Contains(t, string(v.Charts[0].SVG), "<title>2026-03-01 08:50:00 UTC: 0.86</title>")
	require.Equal(t, "0.86", v.Charts[0].AtProposal)
	require.Equal(t, "p99 latency", v.Charts[2].Title)
	require.Contains(t, string(v.Charts[2].SVG), "<title>target 250 ms</title>", "p99 against the latency target")
	require.Equal(t, "420 ms", v.Charts[2].AtProposal)
	require.Equal(t, "1.50 %", v.Charts[3].AtProposal)
}

func TestEvidenceChartsFromTheWindow(t *testing.T) {
	e, _ := parseEngineEvidence(engineEvidenceJSON(t, evAt, true))
	win := []model.Chart{
		{Title: "Load score", Points: []model.Point{{At: evAt.Add(-2 * time.Minute), Value: 0.6}, {At: evAt.Add(-time.Minute), Value: 0.8}, {At: evAt, Value: 0.86}}},
		{Title: "Request rate", NoData: "no samples of the request_rate signal for checkout in this range"},
		{Title: "p99 latency", Points: []model.Point{{At: evAt.Add(-time.Minute), Value: 300}, {At: evAt, Value: 420}}},
		{Title: "Error ratio", NoData: "the metrics source did not answer: it is unavailable"},
	}
	v := (&Pages{}).buildEvidence(e, win, nil)
	require.Equal(t, "yes", v.Verdict)
	require.Empty(t, v.Band, "evidence without a band")

	raw := engineEvidenceJSON(t, evAt, false)
	raw = append(raw[:len(raw)-1], []byte(`,"band":{"manual":false,"max_change_per_hour":0.1,"floor":50,"ceiling":0},"band_source":"policy"}`)...)
	withBand, ok := parseEngineEvidence(raw)
	require.True(t, ok)
	require.Equal(t, "at most 10 % change per hour, floor 50.0 req/s (set in the service's policy)", (&Pages{}).buildEvidence(withBand, nil, nil).Band)
	require.Contains(t, v.ChartsFrom, "single points are the evidence's own readings")
	require.Contains(t, string(v.Charts[0].SVG), "<polyline")
	require.NotContains(t, string(v.Charts[0].SVG), ` dot"`)
	require.Contains(t, string(v.Charts[1].SVG), ` dot"`, "the evidence's reading where the window has none")
	require.Contains(t, string(v.Charts[1].SVG), "180 req/s")

	e.Signals = nil
	v = (&Pages{}).buildEvidence(e, win, nil)
	require.Contains(t, string(v.Charts[3].SVG), "No data: the metrics source did not answer: it is unavailable; the evidence has no reading of it")
}

func TestChangeRows(t *testing.T) {
	rows := changeRows([]versioning.Change{
		{Path: "routes[api].rate_limit.rate", Op: "changed", Old: json.RawMessage(`100`), New: json.RawMessage(`80`)},
		{Path: "routes[api].rate_limit.burst", Op: "changed", Old: json.RawMessage(`75`), New: json.RawMessage(`48.8`)},
		{Path: "routes[api].class", Op: "added", New: json.RawMessage(`"critical"`)},
		{Path: "downstreams[db].breaker", Op: "removed", Old: json.RawMessage(`{"slow_call": "1s"}`)},
	})
	require.Equal(t, []changeRow{
		{Path: "routes[api].rate_limit.rate", Op: "changed", Before: "100", After: "80", Delta: "−20 (−20.0 %)"},
		{Path: "routes[api].rate_limit.burst", Op: "changed", Before: "75", After: "48.8", Delta: "−26.2 (−34.9 %)"},
		{Path: "routes[api].class", Op: "added", After: "critical"},
		{Path: "downstreams[db].breaker", Op: "removed", Before: `{"slow_call":"1s"}`},
	}, rows)
	require.True(t, strings.HasPrefix(prettyJSON(json.RawMessage(`{"a":1}`)), "{\n  \"a\": 1"))
}

// FuzzEngineEvidence: whatever JSON a version carries, decoding and
// rendering its evidence neither panics nor leaves markup unescaped.
func FuzzEngineEvidence(f *testing.F) {
	f.Add(engineEvidenceJSON(f, evAt, true))
	f.Add([]byte(`{"at":"2026-01-01T00:00:00Z","expected_effect":"x","ceiling":{"from":1e-300,"to":1e300},"pid":{"p":1e308,"i":-1e308}}`))
	f.Add([]byte(`{"at":"2026-01-01T00:00:00Z","expected_effect":"<script>","terms":[{"term":"<b>","known":true,"weight":-1}],"signals":{"request_rate":-5}}`))
	f.Add([]byte(`{"load_score":[1,2]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, ok := parseEngineEvidence(raw)
		if !ok {
			return
		}
		v := (&Pages{}).buildEvidence(e, nil, nil)
		for _, c := range v.Charts {
			if strings.Contains(string(c.SVG), "<script") || strings.Contains(string(c.SVG), "<b>") {
				t.Fatalf("unescaped markup in %s", c.SVG)
			}
		}
	})
}
