package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestMalformedServiceNamesAreRefusedByPath: a per-service key that is no
// valid service name (the rules store's rule) used to be accepted and never
// applied; it is refused, named by its path.
func TestMalformedServiceNamesAreRefusedByPath(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"bands:\n  services:\n    'check out': {manual: true}\n", `bands.services["check out"]: "check out" may contain only`},
		{"bands:\n  services:\n    '-checkout': {manual: true}\n", `bands.services["-checkout"]:`},
		{"bands:\n  services:\n    '': {manual: true}\n", `bands.services[""]: is required`},
		{"alert_levels:\n  services:\n    'checkout ': {disabled: true}\n", `alert_levels.services["checkout "]:`},
		{"alert_levels:\n  services:\n    " + strings.Repeat("a", 300) + ": {disabled: true}\n", `alert_levels.services["aaaa`},
	}
	for _, tt := range tests {
		_, err := decodeValidate(tt.doc)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one containing %s", tt.doc, err, tt.want)
		}
	}
	// A well-formed name the configuration cannot know to be wrong is
	// accepted, and the sub-field errors name the service the same way.
	if _, err := decodeValidate("bands:\n  services:\n    chekout: {manual: true}\n    api.v2: {floor: 1}\n"); err != nil {
		t.Fatalf("well-formed names: %v", err)
	}
	_, err := decodeValidate("bands:\n  services:\n    api.v2: {floor: 2, ceiling: 1}\n")
	if err == nil || !strings.Contains(err.Error(), `bands.services["api.v2"].floor:`) {
		t.Fatalf("error %v, want one naming bands.services[\"api.v2\"].floor", err)
	}
}

// TestServiceBandInheritsUnsetFieldsFromTheDefault: a service band that

func TestServiceBandInheritsUnsetFieldsFromTheDefault(t *testing.T) {
	c, err := decodeValidate("bands:\n  services:\n    checkout: {floor: 5}\n    search: {max_change_per_hour: 0}\n  default: {max_change_per_hour: 0.3}\n")
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Bands.Services["checkout"]; b != (Band{MaxChangePerHour: 0.3, Floor: 5}) {
		t.Errorf("checkout band %+v, want the default's max_change_per_hour 0.3 and floor 5", b)
	}
	if b := c.Bands.Services["search"]; b != (Band{}) {
		t.Errorf("search band %+v, want max_change_per_hour 0 as written", b)
	}
}

// TestServiceKeysListEveryPerServiceEntry: every per-service entry is
// listed with its field, ordered by field.
func TestServiceKeysListEveryPerServiceEntry(t *testing.T) {
	c, err := decodeValidate("bands:\n  services:\n    checkout: {manual: true}\nalert_levels:\n  services:\n    checkout: {disabled: true}\n    search: {disabled: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []ServiceKey{{"checkout", `alert_levels.services["checkout"]`}, {"search", `alert_levels.services["search"]`},
		{"checkout", `bands.services["checkout"]`}}
	if got := c.ServiceKeys(); !slices.Equal(got, want) {
		t.Fatalf("service keys %v, want %v", got, want)
	}
}
