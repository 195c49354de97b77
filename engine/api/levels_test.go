package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/rules/versioning/sqlite"
)

// The service detail shows the alert levels in force per signal: each
// level's origin (learned, configured floor, override), the baseline the
// learned ones come from and its sample count; null numbers where there
// are none.
func TestServiceAlertLevels(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := evaluate.DefaultAlertLevels()
	learned := func(svc string) (thresholds.Recommendation, bool) {
		if svc == "checkout" {
			return thresholds.Recommendation{HealthyIntervals: 420, BaselineP99: 0.16, LatencyWarn: 0.21, LatencyCritical: 0.22,
				BaselineErrorRatio: 0.012, ErrorWarn: 0.02, ErrorCritical: 0.03}, true
		}
		return thresholds.Recommendation{Inconclusive: true, HealthyIntervals: 7}, true
	}
	levels := func(svc string) []evaluate.SignalLevels { return l.InForce(svc, learned, 100) }
	srv := httptest.NewServer(Handler(Options{Evaluations: fakeEval{}, Versions: st, AlertLevels: levels}))
	defer srv.Close()
	get := func(path string) map[string]json.RawMessage {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]json.RawMessage
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&v) != nil {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return v
	}
	got := string(get(Prefix + "/services/checkout")["alert_levels"])
	want := `[{"signal":"latency_p99","in_force":true,"warn":0.21,"critical":0.24,"source":"learned","warn_from":"learned","critical_from":"learned","learned":true,"baseline":0.16,"samples":420,"needed":100},` +
		`{"signal":"error_ratio","in_force":true,"warn":0.02,"critical":0.05,"source":"learned","warn_from":"learned","critical_from":"floor","learned":true,"baseline":0.012,"samples":420,"needed":100}]`
	if got != want {
		t.Fatalf("checkout alert_levels\n got %s\nwant %s", got, want)
	}
	// A service still learning: no p99 levels yet, the error-ratio floors.
	var lv []AlertLevel
	var list struct {
		Services []struct {
			Service     string       `json:"service"`
			AlertLevels []AlertLevel `json:"alert_levels"`
		} `json:"services"`
	}
	if err := json.Unmarshal(get(Prefix + "/services")["services"], &list.Services); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Services {
		if s.Service == "checkout" {
			lv = s.AlertLevels
		}
	}
	if len(lv) != 2 {
		t.Fatalf("listed alert levels %+v", lv)
	}
	l.LatencyWarn = 0
	young := AlertLevelsOf(l.InForce("young", learned, 100))
	if p := young[0]; p.InForce || p.Warn != nil || p.Baseline != nil || p.Samples != 7 || p.Needed != 100 || p.WarnFrom != "" {
		t.Fatalf("young p99 %+v", p)
	}
	if e := young[1]; !e.InForce || *e.Warn != 0.01 || e.WarnFrom != "floor" || e.Baseline != nil {
		t.Fatalf("young error ratio %+v", e)
	}
	// Without the option, or for a service not compared, the field is absent.
	l.Services = map[string]evaluate.LevelOverride{"checkout": {Disabled: true}}
	if raw, ok := get(Prefix + "/services/checkout")["alert_levels"]; ok {
		t.Fatalf("disabled service: alert_levels %s", raw)
	}
}
