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
	opt    Options
	level  robust
	season *seasonal
	slow   robust  // long-run scale, floors the spread
	typ    robust  // typical surprise, normalises it
	peak   float64 // decayed maximum of past surprise
	decay  float64
	n      int
}

// New returns a Detector; it fails if the options are invalid.
func New(opt Options) (*Detector, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	a := halfLifeAlpha(opt.BaselineHalfLife)
	return &Detector{
		opt:    opt,
		level:  robust{alpha: a},
		slow:   robust{alpha: halfLifeAlpha(20 * opt.BaselineHalfLife)},
		typ:    robust{alpha: halfLifeAlpha(10 * opt.BaselineHalfLife)},
		season: newSeasonal(opt.Season, opt.SeasonBins, opt.SeasonHalfLife, a),
		decay:  math.Exp2(-1 / opt.SuppressHalfLife),
	}, nil
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
	floor := 0.05 * d.slow.spread()
	if d.n > 0 {
		res.Surprise = math.Abs(resid) / math.Max(res.Spread, floor)
	}
	d.n++
	d.slow.update(v, 1e9)
	d.level.update(v, d.opt.Clip)
	if d.season != nil {
		d.season.update(ts, v, d.opt.Clip)
	}
	norm := res.Surprise / math.Max(d.typ.mean, 1e-9)
	if d.n > 10 {
		d.typ.update(math.Min(res.Surprise, 10*math.Max(d.typ.mean, 1e-9)), 1e9)
	}
	if d.n <= d.opt.Warmup {
		res.Inconclusive = true
		return res
	}
	excess := norm - d.opt.Suppress*d.peak
	d.peak = math.Max(d.peak*d.decay, norm)
	if excess > 0 {
		res.Score = excess / (excess + d.opt.ScoreScale)
	}
	return res
}

// Score is Observe returning only the score, for batch runners.
func (d *Detector) Score(t time.Time, v float64) float64 { return d.Observe(t, v).Score }
