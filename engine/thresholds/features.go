package thresholds

import (
	"fmt"
	"math"
)

// Feature is one non-negative view of a sample whose rarity is scored.
type Feature int

// The features. "Up" and "Down" are the two signs of the same deviation.
const (
	// PointUp and PointDown: the residual from the expected value (recent
	// level, or the seasonal profile) in spreads.
	PointUp Feature = iota
	PointDown
	// ShiftUp and ShiftDown: the fast average's distance from the long-run
	// level in long-run spreads (a level shift).
	ShiftUp
	ShiftDown
	// EnvelopeUp and EnvelopeDown: how far the sample lies beyond the
	// envelope of past extremes, relative to its width (a new high or low).
	EnvelopeUp
	EnvelopeDown
	// DriftUp and DriftDown: the medium average's distance from the long-run
	// level (a slower drift).
	DriftUp
	DriftDown
	// CusumUp and CusumDown: leaky two-sided CUSUM of the sample's distance
	// from the long-run level in long-run spreads, less an allowance of half a
	// spread (Page's change detector; its threshold is the rarity judgement).
	CusumUp
	CusumDown
	// VolatilityUp and VolatilityDown: the recent mean absolute change
	// between samples (half-life VolatilityHalfLife) against the long-run
	// typical change, and its inverse (a series gone unusually restless, or
	// unusually still).
	VolatilityUp
	VolatilityDown
	// NumFeatures is the number of features.
	NumFeatures
)

var featureNames = [...]string{"point-up", "point-down", "shift-up", "shift-down", "envelope-up", "envelope-down", "drift-up", "drift-down", "cusum-up", "cusum-down", "volatility-up", "volatility-down"}

func (f Feature) String() string {
	if f >= 0 && f < NumFeatures {
		return featureNames[f]
	}
	return fmt.Sprintf("Feature(%d)", int(f))
}

// extremes tracks a slowly decaying envelope (highest and lowest values seen)
// and reports how far a value lies outside it, relative to its width.
type extremes struct {
	hi, lo float64
	decay  float64 // share of the gap to the centre forgotten per sample
	n      int
}

func (e *extremes) width() float64 {
	if e.n < 2 {
		return 0
	}
	return e.hi - e.lo
}

func (e *extremes) exceed(x float64) (up, down float64) {
	if e.n < 2 {
		return 0, 0
	}
	w := e.hi - e.lo
	if !(w > 0) {
		w = 1e-6*math.Abs(e.hi) + 1e-12
	}
	return math.Max(0, x-e.hi) / w, math.Max(0, e.lo-x) / w
}

func (e *extremes) update(x, centre float64) {
	e.n++
	if e.n == 1 {
		e.hi, e.lo = x, x
		return
	}
	e.hi -= e.decay * (e.hi - centre)
	e.lo -= e.decay * (e.lo - centre)
	e.hi = math.Max(e.hi, x)
	e.lo = math.Min(e.lo, x)
}

// safe maps NaN (from arithmetic on extreme inputs) to 0 and clamps the
// rest to [0, 1e300], so surprisal stays finite.
func safe(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return math.Min(x, 1e300)
}
