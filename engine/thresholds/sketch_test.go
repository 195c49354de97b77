package thresholds

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSketchQuantiles(t *testing.T) {
	opt := DefaultSketchOptions()
	opt.HalfLife = 0
	s, err := NewSketch(opt)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(0, 0)
	var vals []float64
	for i := range 20000 {
		v := math.Exp(rng.NormFloat64()*0.8 - 3) // lognormal latencies around 50 ms
		vals = append(vals, v)
		s.Add(t0.Add(time.Duration(i)*time.Second), v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		got, ok := s.Quantile(q)
		want := vals[int(q*float64(len(vals)-1))]
		if !ok || math.Abs(got-want)/want > 0.02 {
			t.Errorf("q%.3f: got %v, want %v within 2%% (1%% sketch accuracy plus rank rounding)", q, got, want)
		}
	}
	if s.Samples() != 20000 {
		t.Errorf("samples %d, want 20000", s.Samples())
	}
}

// TestSketchDecay: after many half-lives, the old distribution no longer
// shows in the median.
func TestSketchDecay(t *testing.T) {
	opt := DefaultSketchOptions()
	opt.HalfLife = time.Hour
	s, err := NewSketch(opt)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	for i := range 1000 {
		s.Add(t0.Add(time.Duration(i)*time.Second), 0.010)
	}
	// 24 hours later, a tenth as many samples at 100 ms.
	for i := range 100 {
		s.Add(t0.Add(24*time.Hour+time.Duration(i)*time.Second), 0.100)
	}
	if got, _ := s.Quantile(0.5); math.Abs(got-0.1) > 0.002 {
		t.Errorf("median %v, want about 0.1 once the old samples decayed", got)
	}
	// Many rescalings keep the arithmetic finite.
	for i := range 5000 {
		s.Add(t0.Add(48*time.Hour+time.Duration(i)*time.Hour), 0.05)
	}
	if got, ok := s.Quantile(0.5); !ok || math.IsNaN(got) || math.Abs(got-0.05) > 0.001 {
		t.Errorf("median after 5000 h: %v %v, want 0.05", got, ok)
	}
}

func TestSketchEdges(t *testing.T) {
	s, err := NewSketch(DefaultSketchOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Quantile(0.5); ok {
		t.Fatal("empty sketch returned a quantile")
	}
	t0 := time.Unix(0, 0)
	s.Add(t0, math.NaN())
	s.Add(t0, -1)
	if s.Samples() != 0 {
		t.Fatal("NaN or negative value counted")
	}
	s.Add(t0, 0)
	s.Add(t0, 1e12)
	if lo, _ := s.Quantile(0); lo != s.opt.Min {
		t.Errorf("q0 %v, want Min %v", lo, s.opt.Min)
	}
	if hi, _ := s.Quantile(1); math.Abs(hi-s.opt.Max)/s.opt.Max > s.opt.RelativeAccuracy {
		t.Errorf("q1 %v, want Max %v", hi, s.opt.Max)
	}
	if _, ok := s.Quantile(1.5); ok {
		t.Error("q 1.5 accepted")
	}
	for _, bad := range []SketchOptions{
		{RelativeAccuracy: 0, Min: 1, Max: 2},
		{RelativeAccuracy: 0.01, Min: 0, Max: 2},
		{RelativeAccuracy: 0.01, Min: 1, Max: math.Inf(1)},
		{RelativeAccuracy: 0.01, Min: 1, Max: 2, HalfLife: -1},
		{RelativeAccuracy: 1e-6, Min: 1e-9, Max: 1e9},
	} {
		if _, err := NewSketch(bad); !errors.Is(err, ErrOptions) {
			t.Errorf("NewSketch(%+v): err %v, want ErrOptions", bad, err)
		}
	}
}

// TestSketchCountsInfinityInTheHighestBucket: +Inf is larger than Max and
// counts in the highest bucket, as SketchOptions says; it used to count in
// the lowest, so a sketch fed +Inf latencies reported them as Min.
func TestSketchCountsInfinityInTheHighestBucket(t *testing.T) {
	s, err := NewSketch(DefaultSketchOptions())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1e9, 0)
	for i := range 10 {
		s.Add(t0.Add(time.Duration(i)*time.Second), 0.1)
		s.Add(t0.Add(time.Duration(i)*time.Second), math.Inf(1))
	}
	if got, ok := s.Quantile(0.9); !ok || math.Abs(got-s.opt.Max)/s.opt.Max > s.opt.RelativeAccuracy {
		t.Fatalf("p90 %v, %v with half the values +Inf; want Max %v", got, ok, s.opt.Max)
	}
}
