package thresholds

import "math"

// robust is an outlier-resistant EWMA of level and spread (mean absolute
// deviation). A residual's influence is clipped to clip spreads, so a spike
// moves the baseline by a bounded amount while a lasting shift is followed.
type robust struct {
	mean, mad float64
	alpha     float64
	n         int
}

// floor keeps the spread of a flat series from reaching zero.
func (r *robust) floor() float64 { return 1e-6*math.Abs(r.mean) + 1e-12 }

// spread is the current scale (MAD scaled to a normal sigma).
func (r *robust) spread() float64 { return 1.2533*r.mad + r.floor() }

// residual is x minus the current level, without updating.
func (r *robust) residual(x float64) float64 { return x - r.mean }

// update folds x in; during the first 1/alpha samples it averages plainly.
func (r *robust) update(x, clip float64) {
	r.n++
	if r.n == 1 {
		r.mean = x
		return
	}
	a := math.Max(r.alpha, 1/float64(r.n))
	d := x - r.mean
	lim := clip * r.spread()
	if r.n > 8 {
		d = math.Max(-lim, math.Min(lim, d))
	}
	r.mean += a * d
	r.mad += a * (math.Abs(d) - r.mad)
}
