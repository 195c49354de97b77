package config

import (
	"errors"
	"strings"
	"testing"
)

// TestThresholdsThatCanNeverTriggerAreRefused: a level or tolerance at or
// above the most its measure can reach is never exceeded, so it would
// never alert or roll back; each is refused naming its field.
func TestThresholdsThatCanNeverTriggerAreRefused(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"error critical at the maximum", "alert_levels: {error_ratio_warn: 0.1, error_ratio_critical: 1}",
			"alert_levels.error_ratio_critical: must be above error_ratio_warn (0.1) and below 1"},
		{"configured error critical at the maximum", "alert_levels: {error_ratio_levels: configured, error_ratio_warn: 0.5, error_ratio_critical: 1}",
			"alert_levels.error_ratio_critical: must be above error_ratio_warn (0.5) and below 1"},
		{"service error critical at the maximum", "alert_levels: {services: {checkout: {error_ratio_warn: 0.2, error_ratio_critical: 1}}}",
			`alert_levels.services["checkout"].error_ratio_critical: must be above error_ratio_warn (0.2) and below 1`},
		{"error tolerance at the maximum", "guardrail: {error_tolerance: 1}",
			"guardrail.error_tolerance: must be in (0, 1)"},
		{"error tolerance above the maximum", "guardrail: {error_tolerance: 5}",
			"guardrail.error_tolerance: must be in (0, 1)"},
		{"goodput tolerance at the maximum", "guardrail: {goodput_tolerance: 1}",
			"guardrail.goodput_tolerance: must be in (0, 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode(strings.NewReader(tt.yaml), Default())
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	// Just below the maximum still triggers; latency has no maximum.
	for _, ok := range []string{"alert_levels: {error_ratio_warn: 0.5, error_ratio_critical: 0.99}",
		"guardrail: {error_tolerance: 0.99, goodput_tolerance: 0.99, latency_tolerance: 5}"} {
		c, err := Decode(strings.NewReader(ok), Default())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
