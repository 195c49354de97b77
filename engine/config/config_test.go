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
		"load_score.weights.gpu:", "recommend.setpoint:", "recommend.min_scores:", "bands.services.checkout.floor:",
		"bands.services.checkout.max_change_per_hour:", "guardrail.window:", "guardrail.alpha:"} {
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
}

func FuzzDecode(f *testing.F) {
	f.Add("interval: 5s\n")
	f.Add("bands:\n  services:\n    a: {floor: 1}\n")
	f.Add("guardrail: {window: -1s}\n")
	f.Add("load_score: {weights: {cpu: .nan}}\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Decode(strings.NewReader(s), Default())
		if err != nil {
			return
		}
		_ = c.Validate() // must not panic
	})
}
