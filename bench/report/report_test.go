package report

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/bench/scenario"
)

func testScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Decode([]byte(`{"name":"t","duration":"4s","arrival":{"unit":"rps","base":2},
		"cost":{"cpu":{"dist":"constant","mean":"1ms"}},"client":{"deadline":"100ms"}}`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMeasure(t *testing.T) {
	s := testScenario(t)
	ms := time.Millisecond
	attempts := []Attempt{
		{Request: 0, Class: 0, Outcome: OK, Start: 0, Latency: 10 * ms},
		{Request: 1, Class: 3, Outcome: Rejected, Start: 100 * ms},
		{Request: 1, Class: 3, Try: 1, Outcome: OK, Start: 200 * ms, Latency: 20 * ms},
		{Request: 2, Class: 1, Outcome: Late, Start: 1500 * ms, Latency: 150 * ms},
		{Request: 3, Class: 2, Outcome: OK, Start: 2500 * ms, Latency: 30 * ms},
		{Request: 4, Class: 1, Outcome: OK, Start: 3500 * ms, Latency: 40 * ms},
	}
	r := Measure("x", s, 100, attempts)
	// 4 OK answers over 4 s; offered 5 first attempts, all under capacity.
	if r.GoodputRPS != 1 {
		t.Errorf("goodput = %v, want 1", r.GoodputRPS)
	}
	if math.Abs(r.GoodputRatio-0.8) > 1e-9 {
		t.Errorf("goodput ratio = %v, want 0.8", r.GoodputRatio)
	}
	if r.ShedRatio != 1.0/6 {
		t.Errorf("shed ratio = %v, want 1/6", r.ShedRatio)
	}
	if r.WastedRatio != 0.2 {
		t.Errorf("wasted ratio = %v, want 0.2", r.WastedRatio)
	}
	if r.P50ms != 30 || r.P99ms != 150 {
		t.Errorf("p50/p99 = %v/%v, want 30/150", r.P50ms, r.P99ms)
	}
	want := map[string]float64{"critical": 1, "core": 0.5, "browse": 1, "batch": 1}
	for k, v := range want {
		if r.ClassSuccess[k] != v {
			t.Errorf("class %s success = %v, want %v", k, r.ClassSuccess[k], v)
		}
	}
	if r.Detail.Amplification != 6.0/5 {
		t.Errorf("amplification = %v, want 1.2", r.Detail.Amplification)
	}
}

func TestRecovery(t *testing.T) {
	tests := []struct {
		name string
		good []float64
		from time.Duration
		want float64
	}{
		{"no disturbance", []float64{10, 10, 10, 10, 10, 10}, -1, 0},
		{"never left the band", []float64{10, 10, 10, 10, 10, 10}, 2 * time.Second, 0},
		{"dip then back", []float64{100, 100, 0, 0, 0, 50, 100, 100, 100, 100, 100, 100, 3}, 2 * time.Second, 5},
		{"never settles", []float64{100, 100, 0, 100, 0, 100, 0, 100, 50}, time.Second, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Recovery(tt.good, tt.from); got != tt.want {
				t.Fatalf("Recovery = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestJSONShape: the object cmd/overload prints has exactly the fields the
// issue specifies, no more.
func TestJSONShape(t *testing.T) {
	r := Run{Scenario: "s", Mode: "sim", CapacityRPS: 1, Results: []Result{Measure("x", testScenario(t), 100, nil)}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if got := keys(top); !slices.Equal(got, []string{"capacity_rps", "mode", "results", "scenario"}) {
		t.Fatalf("top-level keys %v", got)
	}
	var results []map[string]json.RawMessage
	json.Unmarshal(top["results"], &results)
	want := []string{"class_success", "goodput_ratio", "goodput_rps", "limiter", "p50_ms", "p99_ms", "recovery_s", "shed_ratio", "wasted_ratio"}
	if got := keys(results[0]); !slices.Equal(got, want) {
		t.Fatalf("result keys %v, want %v", got, want)
	}
	var cs map[string]json.RawMessage
	json.Unmarshal(results[0]["class_success"], &cs)
	if got := keys(cs); !slices.Equal(got, []string{"batch", "browse", "core", "critical"}) {
		t.Fatalf("class_success keys %v", got)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAgreement(t *testing.T) {
	mk := func(mode string, ratios map[string]float64) Run {
		r := Run{Mode: mode}
		for k, v := range ratios {
			r.Results = append(r.Results, Result{Limiter: k, GoodputRatio: v})
		}
		return r
	}
	sim := mk("sim", map[string]float64{"governor": 0.9, "aegis-bbr-reimpl": 0.2, "none": 0.1, "envoy-gradient-reimpl": 0.95})
	live := mk("live", map[string]float64{"governor": 0.5, "aegis-bbr": 0.8, "none": 0.12, "failsafe-adaptive": 0.7})
	so, lo, inv := Agreement(sim, live)
	if !slices.Equal(so, []string{"governor", "aegis-bbr", "none"}) || !slices.Equal(lo, []string{"aegis-bbr", "governor", "none"}) {
		t.Fatalf("orders sim %v live %v", so, lo)
	}
	if len(inv) != 1 || !strings.HasPrefix(inv[0], "aegis-bbr vs governor") {
		t.Fatalf("inversions %v, want aegis-bbr vs governor", inv)
	}
	var buf bytes.Buffer
	WriteResults(&buf, "# Results", Machine{CPU: "c", Cores: 2}, map[string]map[string]Run{"s": {"sim": sim, "live": live}}, []string{"s"})
	if out := buf.String(); !strings.Contains(out, "**disagree** on: aegis-bbr vs governor") || !strings.Contains(out, "# Results") {
		t.Fatalf("rendered results lack the verdict or the analysis:\n%s", out)
	}
}
