package rule

import (
	"encoding/json"
	"math"
	"strconv"
)

// sampleValue is a sample value in JSON: a number when finite, else the
// string "NaN", "+Inf" or "-Inf", which a JSON number cannot hold (the
// Prometheus API writes its values as strings for the same reason). An
// expression such as errors / requests > 0.5 returns +Inf while requests
// is 0; its alert must still be persisted.
type sampleValue float64

func (v sampleValue) MarshalJSON() ([]byte, error) {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.AppendQuote(nil, strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return json.Marshal(f)
}

func (v *sampleValue) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		*v = sampleValue(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*v = sampleValue(f)
	return nil
}

// MarshalJSON writes Value as a number, or as "NaN", "+Inf" or "-Inf".
func (a Active) MarshalJSON() ([]byte, error) {
	type plain Active
	return json.Marshal(struct {
		plain
		Value sampleValue `json:"value"`
	}{plain(a), sampleValue(a.Value)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *Active) UnmarshalJSON(b []byte) error {
	type plain Active
	w := struct {
		*plain
		Value *sampleValue `json:"value"`
	}{plain: (*plain)(a), Value: (*sampleValue)(&a.Value)}
	return json.Unmarshal(b, &w)
}
