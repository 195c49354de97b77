package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzDecode: any input either decodes to a scenario whose rate functions
// are finite and non-negative and bounded by the largest valid rate, or
// fails with ErrInvalid. It never panics.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(minimal))
	files, _ := filepath.Glob("../scenarios/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(strings.Replace(minimal, `"base":100}`,
		`"base":1,"segments":[{"from":"1s","to":"2s","shape":"constant","rate":5,"rate_end":1e300}]}`, 1)))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		for _, at := range []time.Duration{0, s.Length() / 2, s.Length() - 1} {
			r := s.RateAt(at, 100)
			if !(r >= 0) || r > s.MaxRate(100)+1e-6 {
				t.Fatalf("RateAt(%s) = %v outside [0, MaxRate %v]", at, r, s.MaxRate(100))
			}
			if c := s.IdealCapacity(at, 100); !(c >= 0) {
				t.Fatalf("IdealCapacity(%s) = %v", at, c)
			}
		}
		// Thinning draws MaxRate x duration candidates: it must stay
		// within what the validated fields allow (rate + amplitude).
		if m := s.MaxRate(1); m > 2*maxRate {
			t.Fatalf("MaxRate %v above twice the largest valid rate", m)
		}
		if e := s.LastDisturbanceEnd(); e < 0 || e > s.Length() {
			t.Fatalf("LastDisturbanceEnd %s outside the run", e)
		}
	})
}
