package thresholds

import "math"

// Features, each non-negative: the point residual above and below the
// expected value, the level shift up and down, and the excess above and
// below the envelope of past values.
const (
	pointUp = iota
	pointDown
	shiftUp
	shiftDown
	envUp
	envDown
	midUp
	midDown
	nFeatures
)

// typical normalises a non-negative feature by its long-run mean, so that
// features of different units and series of different scales give comparable
// surprise: f / mean(f), with the mean clipped against outliers and floored.
type typical struct {
	mean  float64
	vari  float64
	k     float64
	floor float64
	alpha float64
	n     int
}

func (t *typical) norm(f float64) float64 {
	return f / math.Exp(t.mean+t.k*math.Sqrt(t.vari))
}

func (t *typical) update(f float64) {
	t.n++
	a := math.Max(t.alpha, 1/float64(t.n))
	l := math.Log(f + t.floor)
	d := l - t.mean
	t.mean += a * d
	t.vari = (1 - a) * (t.vari + a*d*d)
}

// extremes tracks a slowly decaying envelope (highest and lowest values seen)
// and reports how far a value lies outside it, relative to its width.
type extremes struct {
	hi, lo float64
	decay  float64 // share of the gap to the centre forgotten per sample
	n      int
}

func (e *extremes) exceed(x float64) (up, down float64) {
	if e.n < 2 {
		return 0, 0
	}
	w := e.hi - e.lo
	if w <= 0 {
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
