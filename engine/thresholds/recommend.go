package thresholds

import (
	"fmt"
	"math"
	"time"
)

// Interval is one scrape interval of a service's signals, as the engine
// computes them from metrics.
type Interval struct {
	Time       time.Time
	Throughput float64 // requests per second
	ErrorRatio float64 // failed / all requests, in [0, 1]
	LatencyP50 float64 // seconds
	LatencyP99 float64 // seconds
}

// RecommenderOptions configures a Recommender.
type RecommenderOptions struct {
	// MinSamples is the number of healthy intervals needed before any
	// recommendation; until then the result is Inconclusive.
	MinSamples int
	// HealthyErrorRatio: an interval with a higher error ratio is not
	// healthy and does not shape the baselines. Neither, below it, is one
	// whose error ratio is above the warn level of the healthy error ratio
	// (its robust level plus WarnSpreads of its robust spread), once
	// Detector.Warmup healthy intervals have shaped it, until that level
	// has lasted MinSamples consecutive intervals: hours at 0.8% errors
	// under a 1% limit are an incident to alert on, not a baseline to
	// learn (they would double the learnt ErrorWarn within a working day).
	HealthyErrorRatio float64
	// SlowCallFactor multiplies the healthy p99 latency baseline to give the
	// breaker's slow-call threshold.
	SlowCallFactor float64
	// Headroom multiplies the healthy peak throughput to give the rate ceiling.
	Headroom float64
	// PeakQuantile is the quantile of healthy throughput taken as its peak
	// (a high quantile rather than the maximum, so one burst does not count).
	PeakQuantile float64
	// WarnSpreads and CriticalSpreads place the latency and error-ratio
	// alert levels above their baselines, in robust spreads of the p99 and
	// error-ratio series. Intervals above a warn level are held out of the
	// baselines (see HealthyErrorRatio and Detector).
	WarnSpreads, CriticalSpreads float64
	// Sketch configures the latency and throughput sketches (their decay).
	Sketch SketchOptions
	// Detector configures the anomaly detector run on the p99 latency; an
	// interval it scores at or above AnomalyScore is not healthy.
	//
	// Neither is one whose p99 is above the warn level of the healthy
	// baseline (its robust level plus WarnSpreads of its robust spread),
	// once Detector.Warmup healthy intervals have shaped it. The
	// detector adapts to a lasting incident within minutes and reports an
	// event once, so its score alone would let the incident in as healthy;
	// the healthy baseline learns only from healthy intervals, so it does
	// not. A level that lasts MinSamples consecutive intervals (as long as
	// a baseline takes to learn) is taken as the new normal and learnt.
	Detector     Options
	AnomalyScore float64
}

// DefaultRecommenderOptions returns conservative defaults: a day of 30 s
// intervals before recommending, 1% errors as the health limit.
func DefaultRecommenderOptions() RecommenderOptions {
	return RecommenderOptions{
		MinSamples:        2880,
		HealthyErrorRatio: 0.01,
		SlowCallFactor:    2,
		Headroom:          1.2,
		PeakQuantile:      0.99,
		WarnSpreads:       4,
		CriticalSpreads:   8,
		Sketch:            SketchOptions{RelativeAccuracy: 0.01, Min: 1e-6, Max: 1e9, HalfLife: 7 * 24 * time.Hour},
		Detector:          DefaultOptions(),
		AnomalyScore:      0.9,
	}
}

// Validate reports the first invalid field.
func (o RecommenderOptions) Validate() error {
	switch {
	case o.MinSamples < 1:
		return fmt.Errorf("%w: MinSamples %d: want >= 1", ErrOptions, o.MinSamples)
	case !(o.HealthyErrorRatio >= 0 && o.HealthyErrorRatio <= 1):
		return fmt.Errorf("%w: HealthyErrorRatio %v: want in [0, 1]", ErrOptions, o.HealthyErrorRatio)
	case !(o.SlowCallFactor >= 1) || math.IsInf(o.SlowCallFactor, 0):
		return fmt.Errorf("%w: SlowCallFactor %v: want a finite value >= 1", ErrOptions, o.SlowCallFactor)
	case !(o.Headroom >= 1) || math.IsInf(o.Headroom, 0):
		return fmt.Errorf("%w: Headroom %v: want a finite value >= 1", ErrOptions, o.Headroom)
	case !(o.PeakQuantile > 0 && o.PeakQuantile <= 1):
		return fmt.Errorf("%w: PeakQuantile %v: want in (0, 1]", ErrOptions, o.PeakQuantile)
	case !(o.WarnSpreads > 0) || !(o.CriticalSpreads > o.WarnSpreads):
		return fmt.Errorf("%w: WarnSpreads %v, CriticalSpreads %v: want 0 < warn < critical", ErrOptions, o.WarnSpreads, o.CriticalSpreads)
	case !(o.AnomalyScore > 0 && o.AnomalyScore <= 1):
		return fmt.Errorf("%w: AnomalyScore %v: want in (0, 1]", ErrOptions, o.AnomalyScore)
	}
	return nil
}

// Recommendation is what the engine proposes from the observed baselines.
type Recommendation struct {
	// Inconclusive is true while too few healthy intervals have been seen;
	// Reason says why and every threshold is zero.
	Inconclusive bool
	Reason       string
	// HealthyIntervals is the number of intervals that shaped the baselines;
	// Intervals counts all of them.
	HealthyIntervals, Intervals int
	// BaselineP50 and BaselineP99 are the median healthy p50 and p99 latency.
	BaselineP50, BaselineP99 float64
	// SlowCallThreshold is the breaker's slow-call threshold (seconds).
	SlowCallThreshold float64
	// PeakThroughput is the healthy peak; RateCeiling adds the headroom.
	PeakThroughput, RateCeiling float64
	// LatencyWarn and LatencyCritical are alert levels on p99 latency.
	LatencyWarn, LatencyCritical float64
	// BaselineErrorRatio is the median error ratio of the healthy
	// intervals; ErrorWarn and ErrorCritical are alert levels on the error
	// ratio WarnSpreads and CriticalSpreads robust spreads of the healthy
	// error ratio above it (capped at 1).
	BaselineErrorRatio, ErrorWarn, ErrorCritical float64
}

// Recommender learns a service's healthy baselines from its intervals and
// recommends thresholds. Memory is fixed; each interval costs O(1).
type Recommender struct {
	opt        RecommenderOptions
	p50, p99   *Sketch
	throughput *Sketch
	detector   *Detector
	p99Spread  robust
	errs       *Sketch // error ratio of the healthy intervals
	errSpread  robust
	healthy    int
	total      int
	// above and errAbove count the consecutive intervals whose p99 and
	// error ratio were above the warn level of their healthy baseline.
	above, errAbove int
}

// NewRecommender returns a Recommender or an error naming the bad option.
func NewRecommender(opt RecommenderOptions) (*Recommender, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	det, err := New(opt.Detector)
	if err != nil {
		return nil, fmt.Errorf("recommender options, Detector: %w", err)
	}
	a := halfLifeAlpha(opt.Detector.LongHalfLife)
	r := &Recommender{opt: opt, detector: det, p99Spread: robust{alpha: a}, errSpread: robust{alpha: a}}
	for _, s := range []**Sketch{&r.p50, &r.p99, &r.throughput, &r.errs} {
		if *s, err = NewSketch(opt.Sketch); err != nil {
			return nil, fmt.Errorf("recommender options, Sketch: %w", err)
		}
	}
	return r, nil
}

func validInterval(iv Interval) bool {
	ok := func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }
	return ok(iv.Throughput) && iv.ErrorRatio >= 0 && iv.ErrorRatio <= 1 && ok(iv.LatencyP50) && ok(iv.LatencyP99)
}

// Observe learns from one interval and reports whether it counted as
// healthy. Intervals with NaN, negative or infinite signals are ignored
// (they are unknown, not zero).
func (r *Recommender) Observe(iv Interval) (healthy bool) {
	if !validInterval(iv) {
		return false
	}
	r.total++
	res := r.detector.Observe(iv.Time, iv.LatencyP99)
	latencyHeld := r.holdOut(&r.above, r.aboveWarn(&r.p99Spread, iv.LatencyP99))
	errorsHeld := r.holdOut(&r.errAbove, r.aboveWarn(&r.errSpread, iv.ErrorRatio))
	if iv.ErrorRatio > r.opt.HealthyErrorRatio || (!res.Inconclusive && res.Score >= r.opt.AnomalyScore) ||
		latencyHeld || errorsHeld {
		return false
	}
	r.healthy++
	r.p50.Add(iv.Time, iv.LatencyP50)
	r.p99.Add(iv.Time, iv.LatencyP99)
	r.throughput.Add(iv.Time, iv.Throughput)
	r.p99Spread.update(iv.LatencyP99, r.opt.Detector.Clip)
	r.errs.Add(iv.Time, iv.ErrorRatio)
	r.errSpread.update(iv.ErrorRatio, r.opt.Detector.Clip)
	return true
}

// aboveWarn reports whether x is above the warn level of a healthy
// baseline b (its robust level plus WarnSpreads of its robust spread), once
// Detector.Warmup healthy intervals shaped it. Not only the critical level:
// an incident between the two, learnt as healthy, would widen the spread
// until the warn level passed it and its alert cleared while it lasts.
func (r *Recommender) aboveWarn(b *robust, x float64) bool {
	if r.healthy < r.opt.Detector.Warmup {
		return false
	}
	return x > b.mean+r.opt.WarnSpreads*b.spread()
}

// holdOut counts in *run the consecutive intervals above the warn level
// and reports whether this one is held out of the baselines: it is above,
// and the level has not yet lasted MinSamples intervals (after that it is
// the new normal).
func (r *Recommender) holdOut(run *int, above bool) bool {
	if !above {
		*run = 0
		return false
	}
	*run = min(*run+1, math.MaxInt32)
	return *run <= r.opt.MinSamples
}

// Recommend returns the current recommendation.
func (r *Recommender) Recommend() Recommendation {
	rec := Recommendation{HealthyIntervals: r.healthy, Intervals: r.total}
	if r.healthy < r.opt.MinSamples {
		rec.Inconclusive = true
		rec.Reason = fmt.Sprintf("%d healthy intervals of %d needed", r.healthy, r.opt.MinSamples)
		return rec
	}
	rec.BaselineP50, _ = r.p50.Quantile(0.5)
	rec.BaselineP99, _ = r.p99.Quantile(0.5)
	rec.PeakThroughput, _ = r.throughput.Quantile(r.opt.PeakQuantile)
	rec.SlowCallThreshold = r.opt.SlowCallFactor * rec.BaselineP99
	rec.RateCeiling = r.opt.Headroom * rec.PeakThroughput
	spread := r.p99Spread.spread()
	rec.LatencyWarn = rec.BaselineP99 + r.opt.WarnSpreads*spread
	rec.LatencyCritical = rec.BaselineP99 + r.opt.CriticalSpreads*spread
	// The sketch's lowest bucket stands for every ratio up to its Min:
	// a service without errors has a baseline of 0.
	if rec.BaselineErrorRatio, _ = r.errs.Quantile(0.5); rec.BaselineErrorRatio <= r.opt.Sketch.Min {
		rec.BaselineErrorRatio = 0
	}
	es := r.errSpread.spread()
	rec.ErrorWarn = math.Min(1, rec.BaselineErrorRatio+r.opt.WarnSpreads*es)
	rec.ErrorCritical = math.Min(1, rec.BaselineErrorRatio+r.opt.CriticalSpreads*es)
	return rec
}
