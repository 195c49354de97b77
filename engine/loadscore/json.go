package loadscore

import (
	"encoding/json"
	"math"
)

// num returns nil for NaN and infinities, which JSON cannot carry.
func num(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// MarshalJSON renders unknown numbers as null.
func (c Contribution) MarshalJSON() ([]byte, error) {
	type plain Contribution
	return json.Marshal(struct {
		plain
		Normalized *float64 `json:"normalized"`
	}{plain(c), num(c.Normalized)})
}

// MarshalJSON renders an unknown score as null.
func (r Raw) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Score       *float64       `json:"score"`
		Known       bool           `json:"known"`
		KnownWeight float64        `json:"knownWeight"`
		Terms       []Contribution `json:"terms"`
		Reason      string         `json:"reason,omitempty"`
	}{num(r.Score), r.Known, r.KnownWeight, r.Terms, r.Reason})
}

// MarshalJSON renders a score without history as null.
func (s Score) MarshalJSON() ([]byte, error) {
	type plain Score
	return json.Marshal(struct {
		plain
		Value *float64 `json:"value"`
	}{plain(s), num(s.Value)})
}
