package thresholds

import (
	"fmt"
	"math"
	"time"
)

// SketchOptions configures a Sketch.
type SketchOptions struct {
	// RelativeAccuracy bounds the relative error of every quantile.
	RelativeAccuracy float64
	// Min and Max bound the values resolved; smaller values count in the
	// lowest bucket and larger ones in the highest.
	Min, Max float64
	// HalfLife makes old samples fade: a sample HalfLife older than another
	// weighs half as much. 0 keeps every sample at full weight.
	HalfLife time.Duration
}

// DefaultSketchOptions suits latencies in seconds: 1% accuracy from 1µs to
// about 3 hours, with a one-week half-life.
func DefaultSketchOptions() SketchOptions {
	return SketchOptions{RelativeAccuracy: 0.01, Min: 1e-6, Max: 1e4, HalfLife: 7 * 24 * time.Hour}
}

// Sketch is a streaming quantile sketch with bounded relative error
// (logarithmic buckets, as in DDSketch) and optional exponential decay by
// time. Memory is fixed by the options; Add is O(1), Quantile O(buckets).
type Sketch struct {
	opt       SketchOptions
	gamma     float64 // bucket ratio
	lnGamma   float64
	offset    float64 // index of Min
	counts    []float64
	total     float64
	samples   int
	origin    time.Time
	log2Scale float64 // a sample's weight is 2^(age/halfLife - log2Scale)
	started   bool
	latest    time.Time
	halfLife  float64 // seconds
}

// NewSketch returns an empty sketch or an error naming the bad option.
func NewSketch(opt SketchOptions) (*Sketch, error) {
	switch {
	case !(opt.RelativeAccuracy > 0 && opt.RelativeAccuracy < 0.5):
		return nil, fmt.Errorf("%w: RelativeAccuracy %v: want in (0, 0.5)", ErrOptions, opt.RelativeAccuracy)
	case !(opt.Min > 0) || math.IsInf(opt.Max, 0) || !(opt.Max > opt.Min):
		return nil, fmt.Errorf("%w: Min %v, Max %v: want 0 < Min < Max, finite", ErrOptions, opt.Min, opt.Max)
	case opt.HalfLife < 0:
		return nil, fmt.Errorf("%w: HalfLife %v: want >= 0", ErrOptions, opt.HalfLife)
	}
	gamma := (1 + opt.RelativeAccuracy) / (1 - opt.RelativeAccuracy)
	lg := math.Log(gamma)
	n := int(math.Ceil(math.Log(opt.Max/opt.Min)/lg)) + 2
	if n > 1<<16 {
		return nil, fmt.Errorf("%w: RelativeAccuracy %v over [%v, %v] needs %d buckets, more than 65536", ErrOptions, opt.RelativeAccuracy, opt.Min, opt.Max, n)
	}
	return &Sketch{
		opt: opt, gamma: gamma, lnGamma: lg,
		offset:   math.Floor(math.Log(opt.Min) / lg),
		counts:   make([]float64, n),
		halfLife: opt.HalfLife.Seconds(),
	}, nil
}

func (s *Sketch) index(v float64) int {
	switch {
	case !(v > s.opt.Min):
		return 0
	case math.IsInf(v, 1): // the conversion below would make it the lowest
		return len(s.counts) - 1
	}
	i := int(math.Ceil(math.Log(v)/s.lnGamma)-s.offset) + 1
	return max(0, min(i, len(s.counts)-1))
}

// value is the representative value of bucket i (relative error bounded by
// RelativeAccuracy for values inside [Min, Max]).
func (s *Sketch) value(i int) float64 {
	if i == 0 {
		return s.opt.Min
	}
	upper := math.Exp((float64(i-1) + s.offset) * s.lnGamma)
	return math.Min(2*upper/(1+s.gamma), s.opt.Max)
}

// weight returns the weight of a sample at t. Weights grow by 2 per
// half-life instead of old counts decaying; when they grow large the counts
// are rescaled (old ones may underflow to zero, which is what they are worth).
func (s *Sketch) weight(t time.Time) float64 {
	if s.halfLife == 0 {
		return 1
	}
	if !s.started {
		s.started, s.origin, s.latest = true, t, t
	}
	if t.After(s.latest) {
		s.latest = t
	}
	e := s.latest.Sub(s.origin).Seconds()/s.halfLife - s.log2Scale
	if e > 300 {
		f := math.Exp2(-e)
		for i := range s.counts {
			s.counts[i] *= f
		}
		s.total *= f
		s.log2Scale += e
		e = 0
	}
	return math.Exp2(e)
}

// Add records value v observed at t. Out-of-order timestamps are weighted
// as of the latest one seen. NaN and negative values are ignored.
func (s *Sketch) Add(t time.Time, v float64) {
	if math.IsNaN(v) || v < 0 {
		return
	}
	w := s.weight(t)
	s.counts[s.index(v)] += w
	s.total += w
	s.samples++
}

// Samples is the number of values added.
func (s *Sketch) Samples() int { return s.samples }

// Quantile returns the q-quantile (0 <= q <= 1) of the decayed distribution,
// or false if the sketch is empty.
func (s *Sketch) Quantile(q float64) (float64, bool) {
	if s.total == 0 || !(q >= 0 && q <= 1) {
		return 0, false
	}
	rank := q * s.total
	acc := 0.0
	for i, c := range s.counts {
		acc += c
		if acc >= rank && c > 0 {
			return s.value(i), true
		}
	}
	for i := len(s.counts) - 1; i >= 0; i-- {
		if s.counts[i] > 0 {
			return s.value(i), true
		}
	}
	return 0, false
}
