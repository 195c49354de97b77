package thresholds

import "math"

// frugal tracks a quantile of a positive stream in O(1) memory by stochastic
// approximation in the log domain: each sample above the estimate raises it
// by p*step, each one below lowers it by (1-p)*step, so it settles where a
// share 1-p of samples lie above it.
type frugal struct {
	p, step float64
	logq    float64
	n       int
}

func (f *frugal) value() float64 { return math.Exp(f.logq) }

func (f *frugal) update(x float64) {
	if !(x > 0) {
		x = 1e-12
	}
	lx := math.Log(x)
	f.n++
	if f.n == 1 {
		f.logq = lx
		return
	}
	if lx > f.logq {
		f.logq += f.step * f.p
	} else {
		f.logq -= f.step * (1 - f.p)
	}
}
