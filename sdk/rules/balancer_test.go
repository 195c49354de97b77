package rules

import (
	"errors"
	"strings"
	"testing"
)

// TestBalancerEjectionFieldsAreValidated: the ejection fields of a
// balancer are decoded, and bad values are refused with the field's path.
func TestBalancerEjectionFieldsAreValidated(t *testing.T) {
	const down = `{"service":"a","downstreams":[{"name":"d",%s}]}`
	tests := []struct {
		name, body, field, problem string
	}{
		{"valid consecutive failures", `"balancer":{"consecutive_failures":5,"base_ejection_time":"10s","max_ejection_time":"1m","max_ejection_percent":50}`, "", ""},
		{"valid cap for breaker ejections", `"breaker":{},"balancer":{"max_ejection_percent":100}`, "", ""},
		{"valid panic threshold with consecutive failures", `"balancer":{"consecutive_failures":3,"panic_threshold":0.2}`, "", ""},
		{"max time equal to the default base", `"balancer":{"consecutive_failures":3,"max_ejection_time":"30s"}`, "", ""},
		{"negative consecutive failures", `"balancer":{"consecutive_failures":-1}`,
			"downstreams[0].balancer.consecutive_failures", "must not be negative"},
		{"huge consecutive failures", `"balancer":{"consecutive_failures":2000000}`,
			"downstreams[0].balancer.consecutive_failures", "must be at most"},
		{"negative base time", `"balancer":{"consecutive_failures":3,"base_ejection_time":"-1s"}`,
			"downstreams[0].balancer.base_ejection_time", "must not be negative"},
		{"negative max time", `"balancer":{"consecutive_failures":3,"max_ejection_time":"-1s"}`,
			"downstreams[0].balancer.max_ejection_time", "must not be negative"},
		{"base above max", `"balancer":{"consecutive_failures":3,"base_ejection_time":"2m","max_ejection_time":"1m"}`,
			"downstreams[0].balancer.max_ejection_time", "must not be below base_ejection_time"},
		{"max below the default base", `"balancer":{"consecutive_failures":3,"max_ejection_time":"10s"}`,
			"downstreams[0].balancer.max_ejection_time", "must not be below base_ejection_time (default 30s)"},
		{"base above the default max", `"balancer":{"consecutive_failures":3,"base_ejection_time":"10m"}`,
			"downstreams[0].balancer.base_ejection_time", "must not exceed max_ejection_time (default 5m0s)"},
		{"base time without consecutive failures", `"breaker":{},"balancer":{"base_ejection_time":"10s"}`,
			"downstreams[0].balancer.base_ejection_time", "has effect only with consecutive_failures"},
		{"max time without consecutive failures", `"breaker":{},"balancer":{"max_ejection_time":"10m"}`,
			"downstreams[0].balancer.max_ejection_time", "has effect only with consecutive_failures"},
		{"zero percent", `"balancer":{"consecutive_failures":3,"max_ejection_percent":0}`,
			"downstreams[0].balancer.max_ejection_percent", "must be between 1 and 100, got 0"},
		{"percent above 100", `"balancer":{"consecutive_failures":3,"max_ejection_percent":101}`,
			"downstreams[0].balancer.max_ejection_percent", "must be between 1 and 100, got 101"},
		{"fractional percent", `"balancer":{"consecutive_failures":3,"max_ejection_percent":12.5}`,
			"downstreams.balancer.max_ejection_percent", "whole number"},
		{"percent with nothing to eject", `"balancer":{"max_ejection_percent":20}`,
			"downstreams[0].balancer.max_ejection_percent", "has effect only with consecutive_failures or a breaker of kind breaker"},
		{"percent with a throttle", `"breaker":{"kind":"throttle"},"balancer":{"max_ejection_percent":20}`,
			"downstreams[0].balancer.max_ejection_percent", "has effect only with consecutive_failures or a breaker of kind breaker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(down, "%s", tt.body, 1)
			r, err := Decode([]byte(data))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Decode(%s): %v", data, err)
				}
				c, _ := r.Canonical()
				back, err := Decode(c)
				if err != nil {
					t.Fatalf("canonical %s does not decode: %v", c, err)
				}
				if c2, _ := back.Canonical(); string(c2) != string(c) {
					t.Fatalf("canonical not stable: %s, %s", c, c2)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode(%s) = %v, want a *ValidationError", data, err)
			}
			if len(ve.Errors) != 1 {
				t.Fatalf("want exactly one error, got %v", ve.Errors)
			}
			if fe := ve.Errors[0]; fe.Field != tt.field || !strings.Contains(fe.Problem, tt.problem) {
				t.Fatalf("error %q, want field %q with %q", fe, tt.field, tt.problem)
			}
		})
	}
}

// TestEjectionFieldsKeepExistingChecksums: rulesets written before the
// ejection fields existed keep their canonical encoding and checksum, so
// no published version reads as changed.
func TestEjectionFieldsKeepExistingChecksums(t *testing.T) {
	tests := []struct{ json, canonical, sum string }{
		{`{"service":"checkout","downstreams":[{"name":"payments","breaker":{"min_calls":20},"balancer":{"decay":"5s","slow_start":"1m","panic_threshold":0.3}},{"name":"search","balancer":{}}]}`,
			`{"service":"checkout","downstreams":[{"name":"payments","breaker":{"min_calls":20},"balancer":{"decay":"5s","slow_start":"1m0s","panic_threshold":0.3}},{"name":"search","balancer":{}}]}`,
			"sha256:fba181a00451441c37d84b80868618e9c0f7fcd4bf21f9a3f4c1a062b7b4d061"},
		{validJSON, "", "sha256:44e2513b666825438c539ca35568e10f941fd69872641ea91d7b95c7723f165b"},
	}
	for _, tt := range tests {
		r, err := Decode([]byte(tt.json))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := r.Canonical()
		if tt.canonical != "" && string(c) != tt.canonical {
			t.Errorf("canonical\n%s\nwant\n%s", c, tt.canonical)
		}
		if sum, _ := r.Checksum(); sum != tt.sum {
			t.Errorf("checksum %s, want %s", sum, tt.sum)
		}
	}
}
