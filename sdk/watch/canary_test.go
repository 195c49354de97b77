package watch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"governor.dev/governor/sdk/rules"
)

func TestSelectorPercentIsStableAndProportional(t *testing.T) {
	const n = 10000
	for _, pct := range []float64{1, 10, 50} {
		sel := Selector{Percent: pct}
		in := 0
		for i := range n {
			id := fmt.Sprintf("pod-%d", i)
			a := sel.Selects("checkout", id, nil)
			if a != sel.Selects("checkout", id, nil) {
				t.Fatalf("selection of %s is not stable", id)
			}
			if a && !(Selector{Percent: pct * 2}).Selects("checkout", id, nil) {
				t.Fatalf("%s selected at %v%% but not at %v%%", id, pct, pct*2)
			}
			if a {
				in++
			}
		}
		got := float64(in) / n * 100
		if math.Abs(got-pct) > pct*0.3+0.5 {
			t.Fatalf("percent %v selected %.2f%%", pct, got)
		}
	}
}

func TestSelectorValidate(t *testing.T) {
	tests := []struct {
		name string
		sel  Selector
		ok   bool
	}{
		{"percent", Selector{Percent: 10}, true},
		{"labels", Selector{Labels: map[string]string{"zone": "a"}}, true},
		{"both", Selector{Percent: 50, Labels: map[string]string{"zone": "a"}}, true},
		{"empty", Selector{}, false},
		{"negative", Selector{Percent: -1}, false},
		{"above 100", Selector{Percent: 101}, false},
		{"NaN", Selector{Percent: math.NaN()}, false},
		{"empty label name", Selector{Labels: map[string]string{"": "a"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.sel.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestSelectorLabelsAndPercent(t *testing.T) {
	sel := Selector{Percent: 100, Labels: map[string]string{"zone": "a"}}
	if !sel.Selects("s", "i", map[string]string{"zone": "a", "pod": "p"}) {
		t.Fatal("matching labels not selected")
	}
	if sel.Selects("s", "i", map[string]string{"zone": "b"}) || sel.Selects("s", "i", nil) {
		t.Fatal("non-matching labels selected")
	}
}

// TestDecodeCanaryErrorsWrapErrMalformed: as documented on ErrMalformed,
// every refused canary record wraps it; an envelope error also keeps the
// *rules.ValidationError that names the field (a NACK's reason reads it).
func TestDecodeCanaryErrorsWrapErrMalformed(t *testing.T) {
	good := canaryBytes(t, 2, Selector{Percent: 10})
	for name, data := range map[string][]byte{
		"bad checksum":     bytes.Replace(good, []byte(`"sha256:`), []byte(`"sha256:00`), 1),
		"bad selector":     bytes.Replace(good, []byte(`"percent":10`), []byte(`"percent":200`), 1),
		"not an object":    []byte(`[]`),
		"missing envelope": []byte(`{"selector":{"percent":10}}`),
	} {
		_, err := DecodeCanary(data)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v does not wrap ErrMalformed", name, err)
		}
	}
	_, err := DecodeCanary(bytes.Replace(good, []byte(`"sha256:`), []byte(`"sha256:00`), 1))
	var ve *rules.ValidationError
	if !errors.As(err, &ve) || ve.Errors[0].Field != "checksum" {
		t.Fatalf("err %v, want the envelope's *rules.ValidationError naming the checksum", err)
	}
}
