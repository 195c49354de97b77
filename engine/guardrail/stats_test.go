package guardrail

import (
	"math"
	"testing"
)

func TestStudentSF(t *testing.T) {
	// Reference values from statistical tables.
	tests := []struct {
		t, df, want float64
	}{
		{0, 5, 0.5},
		{2.015, 5, 0.05},
		{1.812, 10, 0.05},
		{2.764, 10, 0.01},
		{1.645, 1e6, 0.05},
		{-1.812, 10, 0.95},
	}
	for _, tt := range tests {
		if got := studentSF(tt.t, tt.df); math.Abs(got-tt.want) > 1e-3 {
			t.Errorf("studentSF(%v, %v) = %v, want %v", tt.t, tt.df, got, tt.want)
		}
	}
}

func TestWelchGreater(t *testing.T) {
	tests := []struct {
		name   string
		a, b   []float64
		lo, hi float64
	}{
		{"clearly higher", []float64{1, 1.1, 0.9, 1, 1.05, 0.95}, []float64{2, 2.1, 1.9, 2, 2.05, 1.95}, 0, 1e-6},
		{"same", []float64{1, 1.1, 0.9, 1, 1.05, 0.95}, []float64{1, 1.1, 0.9, 1, 1.05, 0.95}, 0.49, 0.51},
		{"lower", []float64{2, 2.1, 1.9, 2}, []float64{1, 1.1, 0.9, 1}, 0.999, 1},
		{"constant higher", []float64{1, 1, 1}, []float64{2, 2, 2}, 0, 0},
		{"constant equal", []float64{1, 1, 1}, []float64{1, 1, 1}, 1, 1},
	}
	for _, tt := range tests {
		p := welchGreater(summarize(tt.a), summarize(tt.b))
		if p < tt.lo || p > tt.hi {
			t.Errorf("%s: p = %v, want in [%v, %v]", tt.name, p, tt.lo, tt.hi)
		}
	}
}

func TestSummarizeSkipsNonFinite(t *testing.T) {
	s := summarize([]float64{1, math.NaN(), 3, math.Inf(1)})
	if s.N != 2 || s.Mean != 2 || math.Abs(s.SD-math.Sqrt2) > 1e-12 {
		t.Fatalf("summary %+v", s)
	}
}
