package thresholds

import (
	"math"
	"slices"
	"time"
)

// Result is the verdict on one sample.
type Result struct {
	// Score is the anomaly score in [0, 1]; 0 while Inconclusive. It is the
	// surprisal s (in nats) of the most surprising feature mapped by
	// s/(s+ScoreScale): scores near ln(m)/(ln(m)+1), with m the samples in
	// the memory half-life, mean "not seen in recent memory"; higher ones
	// mean "beyond anything seen".
	Score float64
	// Inconclusive is true until the detector has seen Options.Warmup samples.
	Inconclusive bool
	// Feature is the feature that gave the score.
	Feature Feature
	// Surprise is the sample's distance from Expected in spreads.
	Surprise float64
	// Expected and Spread describe the baseline the sample was judged against.
	Expected, Spread float64
	// Seasonal is true when the seasonal profile gave the expected value.
	Seasonal bool
}

// Detector scores one series in O(1) time and memory per sample (the
// seasonal profile is a fixed number of bins). It is not safe for concurrent
// use; give each series its own Detector.
type Detector struct {
	opt    Options
	level  robust      // recent level and spread
	long   robust      // long-run level and spread
	short  float64     // fast average of the value
	mid    float64     // medium average of the value
	aShort float64     // EWMA weights of short and mid
	aMid   float64     //
	env    extremes    // envelope of past values
	season []*seasonal // seasonal profiles, one per Options.Seasons
	rare   [NumFeatures]rarity
	cusUp  float64 // leaky CUSUM statistics and their retention per sample
	cusDn  float64 //
	cusRet float64 //
	vol    volatility
	echo   int     // samples since the last near-unseen surprisal
	unseen float64 // surprisal of a value not seen within memory
	n      int
}

// New returns a Detector; it fails if the options are invalid.
func New(opt Options) (*Detector, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt.Seasons = slices.Clone(opt.Seasons) // the caller may reuse its slice
	a := halfLifeAlpha(opt.BaselineHalfLife)
	d := &Detector{
		opt:    opt,
		level:  robust{alpha: a},
		long:   robust{alpha: halfLifeAlpha(opt.LongHalfLife)},
		aShort: halfLifeAlpha(opt.ShortHalfLife),
		aMid:   halfLifeAlpha(opt.MidHalfLife),
		env:    extremes{decay: halfLifeAlpha(opt.EnvelopeHalfLife)},
	}
	for _, se := range opt.Seasons {
		d.season = append(d.season, newSeasonal(se.Period, se.Bins, opt.SeasonHalfLife, a))
	}
	d.cusRet = 1 - halfLifeAlpha(opt.CusumHalfLife)
	for i := range d.rare {
		d.rare[i] = newRarity(opt.MemoryHalfLife)
	}
	d.vol = volatility{alpha: halfLifeAlpha(opt.VolatilityHalfLife), longAlpha: halfLifeAlpha(opt.LongHalfLife)}
	d.unseen = math.Log1p(1 / halfLifeAlpha(opt.MemoryHalfLife))
	d.echo = math.MaxInt
	return d, nil
}

// MaxValue is the largest magnitude Observe accepts; beyond it the
// arithmetic of spreads and averages could overflow.
const MaxValue = 1e150

// Observe scores the sample (t, v) against what came before and then learns
// from it. NaN, infinite and values beyond ±MaxValue are refused: the result
// is Inconclusive and the state is unchanged.
func (d *Detector) Observe(t time.Time, v float64) Result {
	if !(math.Abs(v) <= MaxValue) {
		return Result{Inconclusive: true}
	}
	ts := t.UnixNano()
	f, res, adj := d.features(ts, v)
	d.learn(ts, v, adj)
	best, second := 0.0, 0.0
	for i := range f {
		if d.opt.Weights[i] == 0 {
			continue
		}
		b := d.rare[i].bin(f[i])
		switch s := d.opt.Weights[i] * d.rare[i].surprisal(f[i], b); {
		case s > best:
			best, second, res.Feature = s, best, Feature(i)
		case s > second:
			second = s
		}
		d.rare[i].update(f[i], b)
	}
	if d.n <= d.opt.Warmup {
		res.Inconclusive = true
		return res
	}
	best = d.damp(d.corroborate(best, second, res.Feature, f[res.Feature]))
	res.Score = best / (best + d.opt.ScoreScale)
	if math.IsInf(best, 1) {
		res.Score = 1
	}
	return res
}

// features computes the sample's features against the state before it.
// adj is the value with the season taken out when the seasonal profile is
// in use, else v; the slower features and baselines follow adj.
func (d *Detector) features(ts int64, v float64) (f [NumFeatures]float64, res Result, adj float64) {
	res = Result{Expected: d.level.mean, Spread: d.level.spread()}
	adj = v
	if d.n == 0 {
		d.short, d.mid = v, v
		d.vol.prev = v
		return f, res, adj
	}
	resid := d.level.residual(v)
	if s := d.bestSeason(ts); s != nil {
		r, _ := s.residual(ts, v)
		resid = r
		res.Expected, res.Spread, res.Seasonal = v-r, s.resid.spread(), true
		if off, ok := s.offset(ts); ok && d.opt.Deseason {
			adj = v - off
		}
	}
	floor := math.Max(d.opt.SpreadFloor*d.long.spread(), d.opt.RangeFloor*d.env.width())
	z := resid / math.Max(res.Spread, floor)
	res.Surprise = safe(math.Abs(z))
	d.short += d.aShort * (adj - d.short)
	d.mid += d.aMid * (adj - d.mid)
	ls := d.long.spread()
	shift := (d.short - d.long.mean) / ls
	drift := (d.mid - d.long.mean) / ls
	up, down := d.env.exceed(adj)
	volUp, volDown := d.vol.update(v, d.long.mean)
	zl := (adj - d.long.mean) / ls
	d.cusUp = math.Max(0, d.cusRet*d.cusUp+zl-d.opt.CusumAllowance)
	d.cusDn = math.Max(0, d.cusRet*d.cusDn-zl-d.opt.CusumAllowance)
	f = [NumFeatures]float64{
		PointUp: safe(z), PointDown: safe(-z),
		ShiftUp: safe(shift), ShiftDown: safe(-shift),
		EnvelopeUp: safe(up), EnvelopeDown: safe(down),
		DriftUp: safe(drift), DriftDown: safe(-drift),
		CusumUp: safe(d.cusUp), CusumDown: safe(d.cusDn),
		VolatilityUp: safe(volUp), VolatilityDown: safe(volDown),
	}
	return f, res, adj
}

// damp lowers an echo: a surprisal at or near the level of "not seen within
// memory" that comes within EchoWindow samples of another one keeps only
// 1-EchoDamping of itself, so an event is reported once, at its start, and
// its aftershocks rank below fresh events.
func (d *Detector) damp(s float64) float64 {
	if d.opt.EchoWindow == 0 || s < echoLevel*d.unseen {
		d.echo = min(d.echo, math.MaxInt-1) + 1
		return s
	}
	recent := d.echo < d.opt.EchoWindow
	d.echo = 0
	if recent {
		return s * (1 - d.opt.EchoDamping)
	}
	return s
}

// corroborate lowers weak evidence: when the best surprisal comes from a
// feature marked in Options.Corroborate and the second best stays below
// CorroborationLevel times the "not seen within memory" surprisal, or from a
// feature whose value is below its Options.MinValue, it keeps 1-LoneDamping
// of itself.
func (d *Detector) corroborate(best, second float64, f Feature, value float64) float64 {
	lone := d.opt.Corroborate[f] && second < d.opt.CorroborationLevel*d.unseen
	if lone || value < d.opt.MinValue[f] {
		return best * (1 - d.opt.LoneDamping)
	}
	return best
}

// echoLevel is the share of the "not seen within memory" surprisal from
// which a surprisal counts as an event for damp.
const echoLevel = 0.95

// bestSeason is the ready seasonal profile with a value for t whose
// residual spread is smallest and below SeasonGain times the recent spread,
// or nil.
func (d *Detector) bestSeason(ts int64) *seasonal {
	var best *seasonal
	limit := d.opt.SeasonGain * d.level.spread()
	for _, s := range d.season {
		if !s.ready(ts) || !s.has(ts) {
			continue
		}
		if sp := s.resid.spread(); sp < limit {
			best, limit = s, sp
		}
	}
	return best
}

// learn folds the sample into the baselines.
func (d *Detector) learn(ts int64, v, adj float64) {
	d.n++
	d.level.update(v, d.opt.Clip)
	d.long.update(adj, d.opt.Clip)
	d.env.update(adj, d.long.mean)
	for _, s := range d.season {
		s.update(ts, v, d.opt.Clip)
	}
}

// Samples is the number of samples observed (refused ones excluded).
func (d *Detector) Samples() int { return d.n }

// Score is Observe returning only the score, for batch runners.
func (d *Detector) Score(t time.Time, v float64) float64 { return d.Observe(t, v).Score }
