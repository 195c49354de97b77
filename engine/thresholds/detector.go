package thresholds

import (
	"math"
	"time"
)

// Result is the verdict on one sample.
type Result struct {
	// Score is the anomaly score in [0, 1]; 0 while Inconclusive.
	Score float64
	// Inconclusive is true until the detector has seen Options.Warmup samples.
	Inconclusive bool
	// Surprise is the sample's distance from the expected value in spreads.
	Surprise float64
	// Expected and Spread describe the baseline the sample was judged against.
	Expected, Spread float64
	// Seasonal is true when the seasonal profile gave the expected value.
	Seasonal bool
}

// Detector scores one series. It is not safe for concurrent use; give each
// series its own Detector.
type Detector struct {
	opt     Options
	level   robust  // recent level and spread
	long    robust  // long-run level and spread
	short   float64 // fast EWMA of the value
	aShort  float64
	mid     float64 // slower EWMA of the value
	aMid    float64
	env     extremes  // envelope of past values
	season  *seasonal // daily (or other) profile; nil when disabled
	smooth  float64   // short EWMA of the raw surprise
	aSmooth float64
	rare    [nFeatures]rarity
	typ     [nFeatures]typical
	decay   float64
	n       int
}

// New returns a Detector; it fails if the options are invalid.
func New(opt Options) (*Detector, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	a := halfLifeAlpha(opt.BaselineHalfLife)
	d := &Detector{
		opt:     opt,
		level:   robust{alpha: a},
		long:    robust{alpha: halfLifeAlpha(opt.LongHalfLife)},
		aShort:  halfLifeAlpha(opt.ShortHalfLife),
		aMid:    halfLifeAlpha(opt.MidHalfLife),
		env:     extremes{decay: halfLifeAlpha(opt.EnvelopeHalfLife)},
		season:  newSeasonal(opt.Season, opt.SeasonBins, opt.SeasonHalfLife, a),
		decay:   math.Exp2(-1 / opt.SuppressHalfLife),
		aSmooth: halfLifeAlpha(opt.SmoothHalfLife),
	}
	for i := range d.rare {
		d.rare[i] = newRarity(opt.SuppressHalfLife, opt.RecordMargin)
		d.typ[i] = typical{alpha: halfLifeAlpha(opt.TypicalHalfLife), floor: 1e-3, k: opt.TailK}
	}
	return d, nil
}

// Observe scores the sample (t, v) against what came before and then learns
// from it. NaN and infinite values are refused: the result is Inconclusive
// and the state is unchanged.
func (d *Detector) Observe(t time.Time, v float64) Result {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Result{Inconclusive: true}
	}
	ts := t.UnixNano()
	res := Result{Expected: d.level.mean, Spread: d.level.spread()}
	resid := d.level.residual(v)
	if s := d.season; s != nil && s.ready(ts) {
		if r, ok := s.residual(ts, v); ok && s.resid.spread() < d.opt.SeasonGain*d.level.spread() {
			resid = r
			res.Expected, res.Spread, res.Seasonal = v-r, s.resid.spread(), true
		}
	}
	floor := math.Max(d.opt.SpreadFloor*d.long.spread(), d.opt.RangeFloor*(d.env.hi-d.env.lo))
	var f [nFeatures]float64
	if d.n > 0 {
		z := resid / math.Max(res.Spread, floor)
		res.Surprise = math.Abs(z)
		d.short += d.aShort * (v - d.short)
		sh := (d.short - d.long.mean) / d.long.spread()
		up, down := d.env.exceed(v)
		d.mid += d.aMid * (v - d.mid)
		mid := (d.mid - d.long.mean) / d.long.spread()
		f = [nFeatures]float64{max(z, 0), max(-z, 0), max(sh, 0), max(-sh, 0), up, down, max(mid, 0), max(-mid, 0)}
	} else {
		d.short, d.mid = v, v
	}
	d.n++
	d.level.update(v, d.opt.Clip)
	d.long.update(v, d.opt.Clip)
	d.env.update(v, d.long.mean)
	if d.season != nil {
		d.season.update(ts, v, d.opt.Clip)
	}
	raw := 0.0
	for i := range f {
		if d.opt.Weights[i] > 0 {
			sur := d.rare[i].surprisal(f[i]) + d.opt.Magnitude*math.Log1p(d.typ[i].norm(f[i]))
			raw = math.Max(raw, d.opt.Weights[i]*sur)
			d.rare[i].update(f[i])
			d.typ[i].update(f[i])
		}
	}
	if d.n <= d.opt.Warmup {
		res.Inconclusive = true
		return res
	}
	res.Score = raw / (raw + d.opt.ScoreScale)
	return res
}

// Score is Observe returning only the score, for batch runners.
func (d *Detector) Score(t time.Time, v float64) float64 { return d.Observe(t, v).Score }
