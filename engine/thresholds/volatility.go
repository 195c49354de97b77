package thresholds

import "math"

// volatility follows the mean absolute change between consecutive samples
// at two speeds: a recent average and a long-run one whose updates are
// clipped to volClip times itself, so a burst of large steps barely moves
// the long-run level it is judged against.
type volatility struct {
	prev             float64 // previous sample
	recent, typical  float64 // mean absolute step, recent and long-run
	alpha, longAlpha float64 // their EWMA weights
	n                int
}

// volClip bounds one step's influence on the long-run typical step.
const volClip = 4

// update folds in x and returns the recent mean step over the long-run one
// (up) and its inverse (down). scale is the series' level, used only to
// floor the typical step of a flat series.
func (v *volatility) update(x, scale float64) (up, down float64) {
	step := math.Abs(x - v.prev)
	v.prev = x
	v.n++
	if v.n == 1 {
		v.recent, v.typical = step, step
	} else {
		v.recent += v.alpha * (step - v.recent)
		v.typical += v.longAlpha * (math.Min(step, volClip*v.typical+1e-12) - v.typical)
	}
	typical := v.typical + 1e-9*math.Abs(scale) + 1e-12
	return v.recent / typical, typical / (v.recent + 1e-12)
}
