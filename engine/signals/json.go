package signals

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
)

// MarshalJSON renders a value as {"value": v, "status": "known"}; an
// unknown value has "value": null (JSON has no NaN) and its detail.
func (v Value) MarshalJSON() ([]byte, error) {
	out := struct {
		Value  *float64 `json:"value"`
		Status string   `json:"status"`
		Detail string   `json:"detail,omitempty"`
	}{Status: v.Status.String(), Detail: v.Detail}
	if v.Known() && !math.IsNaN(v.V) && !math.IsInf(v.V, 0) {
		f := v.V
		out.Value = &f
	}
	return json.Marshal(out)
}

// MarshalJSON renders a snapshot with its entries as a list in key order,
// its errors as text and its partial-data warnings by signal.
func (s *Snapshot) MarshalJSON() ([]byte, error) {
	entries := make([]*Entry, 0, len(s.Entries))
	for _, k := range s.Keys() {
		entries = append(entries, s.Entries[k])
	}
	errs := make(map[Signal]string, len(s.Errors))
	for _, sig := range slices.Sorted(maps.Keys(s.Errors)) {
		errs[sig] = s.Errors[sig].Error()
	}
	return json.Marshal(struct {
		At       any               `json:"at"`
		Scope    string            `json:"scope"`
		Entries  []*Entry          `json:"entries"`
		Warnings []string          `json:"warnings,omitempty"`
		Errors   map[Signal]string `json:"errors,omitempty"`
		Partial  map[Signal]string `json:"partial,omitempty"`
	}{s.At, s.Scope.String(), entries, s.Warnings, errs, s.Partial})
}
