package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

const valid = `{
  "rules": [
    {"name": "CheckoutErrors", "expr": "sum(rate(governor_sdk_request_errors_total{service=\"checkout\"}[5m])) > 1",
     "severity": "P1", "for": "2m", "keep_firing_for": "5m", "annotations": {"summary": "errors"}},
    {"name": "GovernorLoadHigh", "expr": "governor_engine_load_score > 0.9", "severity": "P2", "for": "15m"}
  ],
  "routes": [
    {"receiver": "pager", "severities": ["P0"], "continue": true},
    {"receiver": "checkout", "matchers": "{service=\"checkout\"}", "group_by": ["alertname"]},
    {"receiver": "default"}
  ],
  "timing": {"group_wait": "10s", "group_interval": "1m", "repeat": {"P0": "10m"},
             "business_hours": {"start_hour": 8, "end_hour": 18, "location": "Europe/Paris"}, "p2_digest": true},
  "inhibit_rules": [{"source": "severity=\"P0\"", "target": "severity=~\"P1|P2\"", "equal": ["service"]}],
  "receivers": [
    {"name": "pager", "pagerduty": {"routing_key": "abc", "url": "http://127.0.0.1:9/v2/enqueue"}},
    {"name": "checkout", "slack": {"url": "https://hooks.example.com/x"}},
    {"name": "default", "webhook": {"url": "https://hooks.example.com/y"}},
    {"name": "am", "alertmanager": {"url": "http://am:9093"}},
    {"name": "mail", "email": {"smarthost": "mail:25", "from": "a@example.com", "to": ["b@example.com"]}}
  ]
}`

func TestParseValid(t *testing.T) {
	c, err := Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	rs := c.RuleSet()
	var load, custom bool
	for _, r := range rs {
		if r.Name == "GovernorLoadHigh" {
			load = r.Severity == alerts.P2 && r.For == 15*time.Minute
		}
		if r.Name == "CheckoutErrors" {
			custom = r.KeepFiringFor == 5*time.Minute
		}
	}
	if !load || !custom {
		t.Fatalf("rule set: built-in not overridden (%v) or custom rule lost (%v)", load, custom)
	}
	tm := c.DispatchTiming().WithDefaults()
	if !tm.P2Digest || tm.GroupWait != 10*time.Second || tm.Repeat[alerts.P0] != 10*time.Minute || tm.Repeat[alerts.P1] != time.Hour {
		t.Fatalf("timing %+v", tm)
	}
	if !tm.BusinessHours.Contains(time.Date(2026, 3, 2, 7, 30, 0, 0, time.UTC)) { // 08:30 in Paris
		t.Fatal("business hours ignore the location")
	}
	ns, err := c.Notifiers(nil)
	if err != nil || len(ns) != 5 {
		t.Fatalf("notifiers %v %v", ns, err)
	}
	if !c.Routes[1].Matches(alerts.Labels{"service": "checkout"}) {
		t.Fatal("route matchers not parsed")
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"syntax with position", "{\n  \"receivers\": [,]\n}", "line 2, column 17"},
		{"unknown field", `{"receivers": [], "bogus": 1}`, `unknown field "bogus"`},
		{"bad promql with position", `{"rules": [{"name": "x", "expr": "rate(x[5m]", "severity": "P1"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "expr: position 10 (1:11)"},
		{"bad matcher with position", `{"routes": [{"receiver": "w", "matchers": "{a=\"b\" c}"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "position 7"},
		{"receiver url not http", `{"receivers": [{"name": "w", "webhook": {"url": "file:///tmp/x"}}]}`, `scheme "file": want http or https`},
		{"two integrations", `{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}, "slack": {"url": "http://h/"}}]}`, "exactly one"},
		{"undefined receiver", `{"routes": [{"receiver": "nope"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, `receiver "nope" is not defined`},
		{"duplicate receiver", `{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}, {"name": "w", "webhook": {"url": "http://h/"}}]}`, "used twice"},
		{"bad duration", `{"timing": {"group_wait": "soon"}, "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "duration"},
		{"bad repeat tier", `{"timing": {"repeat": {"P9": "1m"}}, "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "P9"},
		{"bad severity", `{"rules": [{"name": "x", "expr": "up", "severity": "high"}], "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "severity"},
		{"bad business hours", `{"timing": {"business_hours": {"start_hour": 18, "end_hour": 8}}, "receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`, "business_hours"},
		{"no receivers", `{}`, "receivers: at least one"},
		{"trailing data", `{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]} {}`, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse() = %v, want an invalid-input error containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte(`{"receivers": [{"name": "w", "webhook": {"url": "http://h/"}}]}`))
	f.Add([]byte(`{"routes": [{"receiver": "w", "matchers": "{a=~\"(\"}"}]}`))
	f.Add([]byte(`{"timing": {"repeat": {"P0": "-1m"}}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !errors.Is(err, alerts.ErrInvalid) {
				t.Fatalf("error without the sentinel: %v", err)
			}
			return
		}
		if _, err := c.Notifiers(nil); err != nil {
			t.Fatalf("valid config does not build its receivers: %v", err)
		}
	})
}
