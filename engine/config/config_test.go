package config

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultsValidate(t *testing.T) {
	for name, c := range map[string]Config{"default": Default(), "dev": DevDefaults()} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestFileWithErrorsNamesEachOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "engine.yaml")
	err := os.WriteFile(path, []byte(`
listen: "no-port"
database: "mysql://x"
interval: 10ms
nats:
  url: "http://nats"
load_score:
  weights: {cpu: -1, gpu: 0.5}
recommend:
  setpoint: 1.5
  min_scores: 0
bands:
  services:
    checkout: {floor: 100, ceiling: 50, max_change_per_hour: 20}
guardrail:
  window: 10s
  step: 5s
  min_samples: 6
  alpha: 0.7
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Load([]string{"-config", path}, func(string) string { return "" }, io.Discard)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v, want ErrInvalid", err)
	}
	for _, field := range []string{"listen:", "database:", "interval:", "nats.url:", "load_score.weights.cpu:",
		"load_score.weights.gpu:", "recommend.setpoint:", "recommend.min_scores:", `bands.services["checkout"].floor:`,
		`bands.services["checkout"].max_change_per_hour:`, "guardrail.window:", "guardrail.alpha:"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s:\n%v", field, err)
		}
	}
}

func TestUnknownFieldRefused(t *testing.T) {
	_, err := Decode(strings.NewReader("intervall: 5s\n"), Default())
	if err == nil || !strings.Contains(err.Error(), "intervall") {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestPrecedence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "engine.yaml")
	if err := os.WriteFile(path, []byte("interval: 20s\nlisten: 127.0.0.1:1\nrecommend: {setpoint: 0.6}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GOVERNOR_CONFIG": path, "GOVERNOR_INTERVAL": "30s", "GOVERNOR_LISTEN": "127.0.0.1:2"}
	c, cmd, err := Load([]string{"-listen", "127.0.0.1:3", "-check-config"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cmd.CheckConfig || cmd.File != path {
		t.Fatalf("command %+v", cmd)
	}
	if c.Interval != 30*time.Second || c.Listen != "127.0.0.1:3" || c.Recommend.Setpoint != 0.6 {
		t.Fatalf("precedence: interval %s listen %s setpoint %v", c.Interval, c.Listen, c.Recommend.Setpoint)
	}
}

func TestDevFlagChangesDefaults(t *testing.T) {
	c, _, err := Load([]string{"-dev"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Dev || c.Interval != DevDefaults().Interval {
		t.Fatalf("dev config %+v", c)
	}
}

// TestDevFlagWinsOverTheEnvironment: -dev=false overrides GOVERNOR_DEV=true,
// as every flag overrides its variable; without the flag the variable holds.
func TestDevFlagWinsOverTheEnvironment(t *testing.T) {
	env := func(k string) string {
		if k == "GOVERNOR_DEV" {
			return "true"
		}
		return ""
	}
	c, _, err := Load([]string{"-dev=false", "-data-dir", t.TempDir()}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dev {
		t.Fatal("-dev=false with GOVERNOR_DEV=true ran the dev stack")
	}
	if c, _, err = Load(nil, env, io.Discard); err != nil || !c.Dev {
		t.Fatalf("GOVERNOR_DEV=true without the flag: dev %v, %v", c.Dev, err)
	}
}

func TestBadEnvNamed(t *testing.T) {
	_, _, err := Load(nil, func(k string) string {
		if k == "GOVERNOR_INTERVAL" {
			return "soon"
		}
		return ""
	}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "GOVERNOR_INTERVAL") {
		t.Fatalf("error %v", err)
	}
	// The only error: the bad value did not become an interval of zero.
	if strings.Contains(err.Error(), "interval: must be") {
		t.Fatalf("a bad GOVERNOR_INTERVAL also reported as a zero interval: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("interval: 5s\n")
	f.Add("bands:\n  services:\n    a: {floor: 1}\n")
	f.Add("guardrail: {window: -1s}\n")
	f.Add("load_score: {weights: {cpu: .nan}}\n")
	f.Add("bands: {default: {floor: 1}, services: {a: {ceiling: 2}, b: }}\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Decode(strings.NewReader(s), Default())
		if err != nil {
			return
		}
		_ = c.Validate() // must not panic
	})
}

// TestRecommendAndAlertLevelKeys: every tuning key is validated with an
// error naming it, and the defaults are the recommender's own.
func TestRecommendAndAlertLevelKeys(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		field string
	}{
		{"open deadband zero", "recommend: {open_deadband: 0}", "recommend.open_deadband:"},
		{"open deadband one", "recommend: {open_deadband: 1}", "recommend.open_deadband:"},
		{"evidence refresh negative", "recommend: {evidence_refresh: -1s}", "recommend.evidence_refresh:"},
		{"evidence refresh too long", "recommend: {evidence_refresh: 25h}", "recommend.evidence_refresh:"},
		{"rollback hold negative", "recommend: {rollback_hold: -1s}", "recommend.rollback_hold:"},
		{"transition retention too short", "nats: {transition_retention: 10m}", "nats.transition_retention:"},
		{"window shorter than two scrapes", "metrics: {scrape_interval: 15s, window: 20s}", "metrics.window:"},
		{"deadband", "recommend: {deadband: 0.5}", "recommend.deadband:"},
		{"step", "recommend: {max_step_per_second: 0}", "recommend.max_step_per_second:"},
		{"binding", "recommend: {binding: 1.5}", "recommend.binding:"},
		{"slow call min", "recommend: {slow_call_min: 1us}", "recommend.slow_call_min:"},
		{"slow call max", "recommend: {slow_call_max: 2h}", "recommend.slow_call_max:"},
		{"slow call deadband", "recommend: {slow_call_deadband: 1}", "recommend.slow_call_deadband:"},
		{"slow call factor", "recommend: {slow_call_factor: 0.5}", "recommend.slow_call_factor:"},
		{"healthy errors", "recommend: {healthy_error_ratio: 2}", "recommend.healthy_error_ratio:"},
		{"spreads", "recommend: {warn_spreads: 8, critical_spreads: 4}", "recommend.critical_spreads:"},
		{"max wait", "guardrail: {max_wait: -1s}", "guardrail.max_wait:"},
		{"max wait shorter than window", "guardrail: {window: 5m, max_wait: 2m}", "guardrail.max_wait: 2m0s is shorter than guardrail.window (5m0s)"},
		{"alerts file spaces", "alerts: {config_file: ' a.json'}", "alerts.config_file:"},
		{"silence retention", "alerts: {silence_retention: -1h}", "alerts.silence_retention:"},
		{"receiver dropping for", "alerts: {receiver_dropping_for: -1m}", "alerts.receiver_dropping_for:"},
		{"latency levels half set", "alert_levels: {latency_warn: 1s}", "alert_levels.latency_critical:"},
		{"latency levels order", "alert_levels: {latency_warn: 1s, latency_critical: 500ms}", "alert_levels.latency_critical:"},
		{"error levels", "alert_levels: {error_ratio_warn: 0.1, error_ratio_critical: 0.05}", "alert_levels.error_ratio_critical:"},
		{"error warn", "alert_levels: {error_ratio_warn: 0}", "alert_levels.error_ratio_warn:"},
		{"min rate", "alert_levels: {min_request_rate: -1}", "alert_levels.min_request_rate:"},
		{"margin", "alert_levels: {learned_margin: -0.1}", "alert_levels.learned_margin:"},
		{"service latency", "alert_levels: {services: {checkout: {latency_warn: 2s, latency_critical: 1s}}}", `alert_levels.services["checkout"].latency_critical:`},
		{"service errors", "alert_levels: {services: {checkout: {error_ratio_warn: 0.1}}}", `alert_levels.services["checkout"].error_ratio_critical:`},
		{"refresh", "alert_levels: {refresh: 10m}", "alert_levels.refresh:"},
		{"error levels source", "alert_levels: {error_ratio_levels: guessed}", `alert_levels.error_ratio_levels: must be "learned" or "configured", got "guessed"`},
		{"configured error levels need both", "alert_levels: {error_ratio_levels: configured, error_ratio_warn: 0, error_ratio_critical: 0}", "alert_levels.error_ratio_warn:"},
		{"learned error floors order", "alert_levels: {error_ratio_warn: 0.05, error_ratio_critical: 0.01}", "alert_levels.error_ratio_critical:"},
		{"state every", "state: {every: 0}", "state.every: must be 1..10000 cycles, got 0"},
		{"state max age", "interval: 10s\nstate: {every: 30, max_age: 5m}", "state.max_age: must be at least 1m and above every x interval (30 x 10s = 5m0s), got 5m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode(strings.NewReader(tt.yaml), Default())
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %v, want one naming %s", err, tt.field)
			}
		})
	}
	if got := Default().Recommend.EvidenceRefresh; got != time.Minute {
		t.Errorf("default recommend.evidence_refresh %s, want 1m", got)
	}
	for _, ok := range []string{"alert_levels: {error_ratio_warn: 0, error_ratio_critical: 0}", "state: {disabled: true, every: 0}",
		"alert_levels: {error_ratio_levels: configured}"} {
		c, err := Decode(strings.NewReader(ok), Default())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if d := Default(); d.AlertLevels.ErrorRatioLevels != ErrorLevelsLearned || d.State != (State{Every: 30, MaxAge: time.Hour}) {
		t.Errorf("defaults: error_ratio_levels %q, state %+v", d.AlertLevels.ErrorRatioLevels, d.State)
	}
	c, err := Decode(strings.NewReader("recommend: {open_deadband: 0.2, evidence_refresh: 5m}\nalert_levels: {latency_warn: 300ms, latency_critical: 1s}\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Recommend.OpenDeadband != 0.2 || c.Recommend.EvidenceRefresh != 5*time.Minute || c.AlertLevels.LatencyCritical != time.Second {
		t.Fatalf("decoded %+v %+v", c.Recommend, c.AlertLevels)
	}
}

// TestDefaultGuardrailStepOnTicks: the production guardrail step is a
// multiple of the evaluation interval, so every grid point the guardrail
// compares is a cycle's tick and needs no query of its own.
func TestDefaultGuardrailStepOnTicks(t *testing.T) {
	c := Default()
	if c.Guardrail.Step%c.Interval != 0 {
		t.Fatalf("guardrail.step %s is not a multiple of interval %s", c.Guardrail.Step, c.Interval)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Weights or gains that are all zero are refused by name: the engine would
// otherwise fail later without naming the field (weights), or run the
// default gains instead of the configured ones (gains).
func TestAllZeroWeightsAndGainsNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "engine.yaml")
	err := os.WriteFile(path, []byte(`
load_score:
  weights: {cpu: 0, latency: 0}
recommend:
  kp: 0
  ki: 0
  kd: 0
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Load([]string{"-config", path}, func(string) string { return "" }, io.Discard)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v, want ErrInvalid", err)
	}
	for _, want := range []string{"load_score.weights: no term has a positive weight", "recommend.kp: kp, ki and kd are all 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	c := Default()
	c.Score.Weights = map[string]float64{"cpu": 0, "latency": 0.2}
	c.Recommend.Kp, c.Recommend.Ki, c.Recommend.Kd = 0, 0.05, 0
	if err := c.Validate(); err != nil {
		t.Fatalf("one positive weight and one non-zero gain: %v", err)
	}
}

// TestAddressesThatWouldFailOnlyAtRunTimeAreRefused: a URL without a host
// (which for NATS quietly reached a server on localhost), a listen port out
// of range and settings after a stray "---" (a second YAML document, never
// read) used to pass -check-config; each is now named. Lists of NATS URLs,
// URLs with a path and a trailing empty document stay valid.
func TestAddressesThatWouldFailOnlyAtRunTimeAreRefused(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"metrics:\n  prometheus_url: http://\n", "metrics.prometheus_url"},
		{"metrics:\n  prometheus_url: HTTP://prom:9090\n", "metrics.prometheus_url"},
		{"nats:\n  url: nats://\n", "nats.url"},
		{"nats:\n  url: nats://a:4222,nats://\n", "nats.url"},
		{"metrics:\n  targets: ['http://']\n", "metrics.targets[0]"},
		{"listen: 127.0.0.1:99999\n", "listen"},
		{"interval: 10s\n---\ninterval: 1s\n", "line 2: a second YAML document"},
	}
	for _, tt := range tests {
		c, err := Decode(strings.NewReader(tt.doc), Default())
		if err == nil {
			err = c.Validate()
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one naming %s", tt.doc, err, tt.want)
		}
	}
	c, err := Decode(strings.NewReader("interval: 10s\n---\n"), Default())
	if err != nil || c.Interval != 10*time.Second {
		t.Fatalf("a trailing empty document: %v, interval %s", err, c.Interval)
	}
	c.NATS.URL = "nats://a:4222, tls://b:4222"
	c.Metrics.PrometheusURL = "https://prom.example:9090/prefix"
	c.Metrics.Targets = []string{"http://10.0.0.1:8080/metrics"}
	c.Listen = ":http-alt"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// decodeValidate decodes doc over the defaults and validates the result.
func decodeValidate(doc string) (Config, error) {
	c, err := Decode(strings.NewReader(doc), Default())
	if err == nil {
		err = c.Validate()
	}
	return c, err
}

// TestLeaderMaxClockSkewIsSetFromTheFile: leader.max_clock_skew could not
// be set; it now defaults to the elector's 10s and is refused by name
// outside 100ms..10m.
func TestLeaderMaxClockSkewIsSetFromTheFile(t *testing.T) {
	if got := Default().Leader.MaxClockSkew; got != 10*time.Second {
		t.Fatalf("default leader.max_clock_skew %s, want 10s (the elector's own)", got)
	}
	c, err := decodeValidate("leader:\n  max_clock_skew: 2s\n")
	if err != nil || c.Leader.MaxClockSkew != 2*time.Second {
		t.Fatalf("leader.max_clock_skew: 2s: got %s, %v", c.Leader.MaxClockSkew, err)
	}
	for _, v := range []string{"0s", "-1s", "10ms", "2h"} {
		_, err := decodeValidate("leader: {max_clock_skew: " + v + "}\n")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "leader.max_clock_skew: must be between 100ms and 10m") {
			t.Errorf("max_clock_skew %s: error %v, want one naming leader.max_clock_skew", v, err)
		}
	}
}

// TestDuplicateKeysAreRefused: a key given twice, at any depth, is an
// error, not the last one silently winning.
func TestDuplicateKeysAreRefused(t *testing.T) {
	for _, doc := range []string{
		"interval: 10s\ninterval: 20s\n",
		"bands:\n  services:\n    checkout: {floor: 1}\n    checkout: {floor: 2}\n",
		"guardrail:\n  window: 1m\n  window: 2m\n",
	} {
		_, err := Decode(strings.NewReader(doc), Default())
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "already defined") {
			t.Errorf("%q: error %v, want a duplicate key refused", doc, err)
		}
	}
}

// TestUnknownNestedKeysAreRefusedByName: a misspelt key deep in a section
// is refused with its name.
func TestUnknownNestedKeysAreRefusedByName(t *testing.T) {
	for doc, key := range map[string]string{
		"guardrail: {windw: 1m}\n":                       "windw",
		"bands: {services: {checkout: {flor: 1}}}\n":     "flor",
		"leader: {max_skew: 1s}\n":                       "max_skew",
		"alert_levels: {services: {a: {latency: 1s}}}\n": "latency",
		"state: {max_agee: 1h}\n":                        "max_agee",
	} {
		_, err := Decode(strings.NewReader(doc), Default())
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "field "+key+" not found") {
			t.Errorf("%q: error %v, want the key %s named", doc, err, key)
		}
	}
}

// TestBareNumbersAreNotDurations: "interval: 10" is refused, not read as
// 10ns.
func TestBareNumbersAreNotDurations(t *testing.T) {
	_, err := Decode(strings.NewReader("interval: 10\n"), Default())
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("interval: 10 (nanoseconds?): error %v, want it refused", err)
	}
}

// sets only a floor keeps the default's max_change_per_hour; it used to

// get 0, and every change of that service then waited for a person.

// TestIntervalTooLongForTheLevelAlertsIsRefused: a level still crossed is

// reported at the first cycle a refresh after the last report, so reports

// come up to interval + refresh apart; the built-in level alert resolves

// 5m after the last report and fires after 5m, so a longer gap would make

// the alert resolve while the reading stays above, and never page.

func TestIntervalTooLongForTheLevelAlertsIsRefused(t *testing.T) {
	_, err := decodeValidate("interval: 5m\nstate: {max_age: 24h}\n")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "interval: 5m0s plus alert_levels.refresh 1m0s") {
		t.Fatalf("error %v, want interval named", err)
	}
	for _, ok := range []string{"interval: 3m\nstate: {max_age: 24h}\n", "interval: 10m\nstate: {max_age: 24h}\nalert_levels: {disabled: true}\n"} {
		if _, err := decodeValidate(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestGuardrailSettleShorterThanTheMetricsWindowIsRefused: the first points
// after activation are rates over metrics.window; a settle shorter than it
// would count the old version's traffic as the new one's.
func TestGuardrailSettleShorterThanTheMetricsWindowIsRefused(t *testing.T) {
	c, err := Decode(strings.NewReader("metrics:\n  window: 2m\nguardrail:\n  settle: 1m\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	const want = "guardrail.settle: 1m0s is shorter than metrics.window (2m0s)"
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
	c, err = Decode(strings.NewReader("metrics:\n  window: 2m\nguardrail:\n  settle: 2m\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("settle equal to the window: %v", err)
	}
	// 0 is the guardrail's default settle, 30s.
	c, err = Decode(strings.NewReader("guardrail:\n  settle: 0s\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	const want0 = "guardrail.settle: 0 (the guardrail's default 30s) is shorter than metrics.window (1m0s)"
	if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want0) {
		t.Fatalf("error %v, want one containing %q", err, want0)
	}
	c, err = Decode(strings.NewReader("metrics:\n  window: 30s\nguardrail:\n  settle: 0s\n"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("settle 0 (30s) with a 30s window: %v", err)
	}
}

// TestEmbeddedMaxSeriesIsReadAndChecked: 0 keeps the store's default,
// negative removes the limit, a limit too small for the engine's own
// signals is refused by name.
func TestEmbeddedMaxSeriesIsReadAndChecked(t *testing.T) {
	tests := []struct {
		yaml string
		want int
		err  string
	}{
		{"", 0, ""},
		{"metrics:\n  embedded_max_series: 200000\n", 200000, ""},
		{"metrics:\n  embedded_max_series: -1\n", -1, ""},
		{"metrics:\n  embedded_max_series: 10\n", 0, "metrics.embedded_max_series: must be at least 1000 (0: 4000000; negative: no limit), got 10"},
	}
	for _, tt := range tests {
		c, err := Decode(strings.NewReader(tt.yaml), Default())
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		if tt.err != "" {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("%q: error %v, want one containing %q", tt.yaml, err, tt.err)
			}
			continue
		}
		if err != nil || c.Metrics.EmbeddedMaxSeries != tt.want {
			t.Fatalf("%q: embedded_max_series %d (%v), want %d", tt.yaml, c.Metrics.EmbeddedMaxSeries, err, tt.want)
		}
	}
}

// The guardrail's after-the-fact judging and cumulative check are set from
// the configuration; negative values turn them off and are valid.
func TestGuardrailRecoverAndDriftKeys(t *testing.T) {
	c, err := Decode(strings.NewReader("guardrail: {recover: 6h, drift: 30m}"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.Guardrail.Recover != 6*time.Hour || c.Guardrail.Drift != 30*time.Minute {
		t.Fatalf("recover %s drift %s (%v), want 6h and 30m", c.Guardrail.Recover, c.Guardrail.Drift, err)
	}
	c, err = Decode(strings.NewReader("guardrail: {recover: -1s, drift: -1s}"), Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("negative recover and drift (off): %v", err)
	}
}
