package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/app"
	"governor.dev/governor/engine/backtest"
	"governor.dev/governor/engine/config"
)

// rulesFile writes a valid ruleset of service checkout and returns its path.
func rulesFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.json")
	body := `{"service":"checkout","routes":[{"name":"api","match":{"path_prefix":"/"},"rate_limit":{"rate":60}}]}`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBacktestUsageErrorsNameTheFlag: a bad command line exits 2 before any
// query, naming the flag (never "<nil>").
func TestBacktestUsageErrorsNameTheFlag(t *testing.T) {
	rules := rulesFile(t)
	with := func(extra ...string) []string {
		return append([]string{"backtest", "-service", "checkout", "-prometheus", "http://127.0.0.1:9", "-rules", rules}, extra...)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"argument after the flags", with("-from", "2h", "extra"), `unexpected arguments ["extra"]`},
		{"no -from", with(), "-from is required"},
		{"negative step", with("-from", "2h", "-step", "-1s"), "-step -1s"},
		{"from after to", with("-from", "1h", "-to", "2h"), "is not before -to"},
		{"negative duration is after now", with("-from", "-2h"), "-from"},
		{"ruleset of another service", []string{"backtest", "-service", "catalog", "-prometheus", "http://127.0.0.1:9", "-rules", rules, "-from", "2h"},
			`ruleset is for service "checkout", not "catalog"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tt.args, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) || strings.Contains(stderr.String(), "<nil>") {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// TestBacktestRecommendsAsTheLiveEngine: every recommend setting of the
// configuration reaches the replay's recommender, as it reaches the live
// engine's.
func TestBacktestRecommendsAsTheLiveEngine(t *testing.T) {
	cfg := config.Default()
	r := &cfg.Recommend
	r.Setpoint, r.Kp, r.MinScores, r.BaselineSamples = 0.6, 2, 4, 10
	r.Deadband, r.MaxStepPerSecond, r.Binding = 0.11, 0.007, 0.55
	r.SlowCallMin, r.SlowCallMax, r.SlowCallDeadband, r.SlowCallFactor = time.Millisecond, time.Second, 0.3, 4
	r.HealthyErrorRatio, r.WarnSpreads, r.CriticalSpreads = 0.02, 5, 9
	got := backtestOptions(cfg, "checkout").Recommend
	if want := app.RecommendOptions(cfg.Recommend); !reflect.DeepEqual(got, want) {
		t.Errorf("backtest recommender\n%+v\nlive engine's\n%+v", got, want)
	}
}

// TestBacktestReportsFailedQueries: a query Prometheus refuses at every step
// is reported with the summary (on stderr with -json, whose stdout holds
// only proposals), not hidden behind a replay that looks complete.
func TestBacktestReportsFailedQueries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Form.Get("query"), "process_cpu_seconds_total") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"cpu query refused"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	}))
	defer srv.Close()
	rules := rulesFile(t)
	for _, asJSON := range []bool{false, true} {
		args := []string{"backtest", "-service", "checkout", "-prometheus", srv.URL, "-rules", rules,
			"-from", "2026-01-01T00:00:00Z", "-to", "2026-01-01T00:01:00Z", "-step", "20s"}
		if asJSON {
			args = append(args, "-json")
		}
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), args, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		for _, want := range []string{"4 steps, 0 known load scores", "queries failed at 4 of 4 steps", "cpu query refused"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("json=%v: exit %d, output %q lacks %q", asJSON, code, out, want)
			}
		}
		if asJSON && stdout.Len() != 0 {
			t.Errorf("-json: stdout %q holds more than proposals", stdout.String())
		}
	}
}

// emptyPrometheus answers every query with no series.
func emptyPrometheus(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBacktestLayersTheEnvironmentOverTheConfigFile: GOVERNOR_INTERVAL
// sets the default step of a replay, over the file's interval as for the
// live engine; it used to be ignored (the file's or the default interval
// applied).
func TestBacktestLayersTheEnvironmentOverTheConfigFile(t *testing.T) {
	prom := emptyPrometheus(t)
	file := filepath.Join(t.TempDir(), "engine.yaml")
	if err := os.WriteFile(file, []byte("interval: 20s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOVERNOR_CONFIG", "")
	t.Setenv("GOVERNOR_INTERVAL", "30s")
	for _, extra := range [][]string{nil, {"-config", file}} {
		args := append([]string{"backtest", "-service", "checkout", "-prometheus", prom, "-rules", rulesFile(t),
			"-from", "2026-01-01T00:00:00Z", "-to", "2026-01-01T00:01:00Z"}, extra...)
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), args, &stdout, &stderr)
		if code != 0 || !strings.Contains(stdout.String(), "\n3 steps,") || !strings.Contains(stdout.String(), "every 30s") { // 0s, 30s, 60s
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 3 steps of GOVERNOR_INTERVAL 30s", extra, code, stdout.String(), stderr.String())
		}
		// The source holds nothing for checkout: the replay says so rather
		// than read as a calm one, and names what it replayed with.
		cfgName := "defaults"
		if extra != nil {
			cfgName = file
		}
		for _, want := range []string{`warning: no data for service "checkout" between 2026-01-01T00:00:00Z and 2026-01-01T00:01:00Z`,
			"replayed checkout from 2026-01-01T00:00:00Z to 2026-01-01T00:01:00Z every 30s against " + prom + "; configuration: " + cfgName} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%q: stdout %q lacks %q", extra, stdout.String(), want)
			}
		}
	}
}

// TestBacktestLoadsTheConfigurationAsTheLiveEngine: for one file and one
// environment, the replay gets the options the live engine would build
// (defaults of GOVERNOR_DEV, the file, then GOVERNOR_* variables), whether
// -config or GOVERNOR_CONFIG names the file.
func TestBacktestLoadsTheConfigurationAsTheLiveEngine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "engine.yaml")
	body := "interval: 20s\nrecommend:\n  setpoint: 0.6\n  kp: 2\nload_score:\n  half_life: 45s\nbands:\n  services:\n    checkout: {manual: true}\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GOVERNOR_DEV": "true", "GOVERNOR_SETPOINT": "0.4", "GOVERNOR_INTERVAL": "30s", "GOVERNOR_PROMETHEUS_URL": "http://prom:9090"}
	getenv := func(k string) string { return env[k] }
	live, _, err := config.Load([]string{"-config", file}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got, err := backtestConfig(file, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got.Recommend.Setpoint != 0.4 || got.Recommend.Kp != 2 || got.Interval != 30*time.Second || got.Score.HalfLife != 45*time.Second ||
		got.Score.Weights == nil || got.Metrics.PrometheusURL != "http://prom:9090" {
		t.Errorf("backtest configuration %+v lacks a layer", got)
	}
	if a, b := backtestOptions(got, "checkout"), backtestOptions(live, "checkout"); !reflect.DeepEqual(a, b) {
		t.Errorf("backtest options\n%+v\nlive engine's\n%+v", a, b)
	}
	env["GOVERNOR_CONFIG"] = file
	if byEnv, err := backtestConfig("", getenv); err != nil || !reflect.DeepEqual(backtestOptions(byEnv, "checkout"), backtestOptions(live, "checkout")) {
		t.Errorf("file named by GOVERNOR_CONFIG: %v, options %+v", err, byEnv)
	}
	env["GOVERNOR_SETPOINT"] = "high"
	if _, err := backtestConfig(file, getenv); err == nil || !strings.Contains(err.Error(), "GOVERNOR_SETPOINT") {
		t.Errorf("bad GOVERNOR_SETPOINT: %v, want an error naming it", err)
	}
}

// TestBacktestRefusesTooManySteps: a range and step giving more than
// backtest.MaxSteps evaluations exit 2 naming -step and the limit before
// any query (it used to run for hours); the context here is already
// cancelled, so a replay that started would fail with it instead.
func TestBacktestRefusesTooManySteps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	args := []string{"backtest", "-service", "checkout", "-prometheus", "http://127.0.0.1:9", "-rules", rulesFile(t),
		"-from", "2026-01-01T00:00:00Z", "-to", "2026-01-31T00:00:00Z", "-step", "1ms"}
	var stdout, stderr bytes.Buffer
	code := dispatch(ctx, args, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "-step 1ms") || !strings.Contains(stderr.String(), "more than the 100000 allowed") {
		t.Fatalf("exit %d, stderr %q; want 2 naming -step and the limit", code, stderr.String())
	}
}

// TestBacktestWarnsOfStepsOnPartialData: steps whose answers may lack data
// proposed nothing; the summary says how many and where the first was, so a
// quiet replay over a flaky federated store does not pass for a clean one.
func TestBacktestWarnsOfStepsOnPartialData(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sum := backtest.Summary{Steps: 30, StepsWithData: 30, PartialSteps: 4,
		FirstPartial: "2026-01-01T00:10:00Z: failed to receive any data from store-2"}
	got := strings.Join(backtestWarnings(sum, "checkout", t1, t1.Add(time.Hour)), "\n")
	for _, want := range []string{"may lack data at 4 of 30 steps", "proposed nothing", "store-2"} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q lack %q", got, want)
		}
	}
	if w := backtestWarnings(backtest.Summary{Steps: 30, StepsWithData: 30}, "checkout", t1, t1.Add(time.Hour)); len(w) != 0 {
		t.Errorf("a clean replay warns %q", w)
	}
}
