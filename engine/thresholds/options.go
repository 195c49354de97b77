package thresholds

import (
	"fmt"
	"math"
	"time"
)

// Options tunes a Detector. The zero value is not valid; start from
// DefaultOptions. One set of options serves every series.
type Options struct {
	// Warmup is the number of samples before any score is reported; until
	// then Observe returns Inconclusive results with score 0.
	Warmup int
	// BaselineHalfLife is the half-life, in samples, of the robust level and
	// spread estimates.
	BaselineHalfLife float64
	// Clip bounds a sample's influence on the baseline to Clip spreads.
	Clip float64
	// Season is the seasonal period (0 disables seasonality) and SeasonBins
	// the number of phase bins it is cut into.
	Season     time.Duration
	SeasonBins int
	// SeasonHalfLife is the half-life, in periods, of each bin's estimate.
	SeasonHalfLife float64
	// SeasonGain is how much better (ratio of spreads) the seasonal model
	// must explain the data before its residual is used.
	SeasonGain float64
	// LongHalfLife is the half-life, in samples, of the long-run baseline the
	// short-term mean (ShortHalfLife) is compared with to find level shifts.
	LongHalfLife  float64
	ShortHalfLife float64
	MidHalfLife   float64
	// EnvelopeHalfLife is how fast, in samples, the envelope of past
	// extremes shrinks back towards the long-run level.
	EnvelopeHalfLife float64
	// EnvelopeFloor is the smallest typical envelope excess; it keeps a
	// series that never leaves its envelope from turning tiny excesses into
	// alarms.
	EnvelopeFloor float64
	// SpreadFloor is the smallest spread, as a share of the long-run spread.
	SpreadFloor float64
	// RangeFloor is the smallest spread as a share of the envelope width, so
	// a flat series with rare spikes does not see its spread collapse.
	RangeFloor float64
	// TypicalHalfLife is the half-life, in samples, of each feature's typical
	// value, which normalises it.
	TypicalHalfLife float64
	// SmoothHalfLife is the half-life, in samples, of the average of the
	// combined surprise, which favours sustained over isolated deviations.
	SmoothHalfLife float64
	// Magnitude weighs the size of a feature (against its typical level)
	// next to its rarity, ranking events that are all unprecedented.
	Magnitude float64
	// RecordMargin: a feature value above RecordMargin times its all-time
	// maximum scores above every merely unusual value.
	RecordMargin float64
	// TailK places the normalising quantile TailK standard deviations above
	// the mean of the feature's logarithm.
	TailK float64
	// Weights scale the point, shift and envelope features.
	Weights [nFeatures]float64
	// SuppressHalfLife is the half-life, in samples, of the memory of past
	// surprise: a new alarm must exceed Suppress times the remembered peak.
	SuppressHalfLife float64
	Suppress         float64
	// ScoreScale is the surprise (in spreads) that maps to a score of 0.5.
	ScoreScale float64
}

// DefaultOptions returns the options tuned on the NAB corpus, one set for
// all series.
func DefaultOptions() Options {
	return Options{
		Warmup:           300,
		BaselineHalfLife: 200,
		Clip:             4,
		Season:           24 * time.Hour,
		SeasonBins:       288,
		SeasonHalfLife:   2,
		SeasonGain:       0.6,
		LongHalfLife:     2000,
		ShortHalfLife:    3,
		MidHalfLife:      150,
		EnvelopeHalfLife: 2000,
		EnvelopeFloor:    0.01,
		SpreadFloor:      0.05,
		RangeFloor:       0,
		TypicalHalfLife:  2000,
		TailK:            1,
		RecordMargin:     1,
		Magnitude:        0,
		SmoothHalfLife:   0.1,
		Weights:          [nFeatures]float64{1, 1, 1, 0, 1, 0, 1, 0},
		SuppressHalfLife: 150,
		Suppress:         1.2,
		ScoreScale:       1,
	}
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	switch {
	case o.Warmup < 2:
		return fmt.Errorf("%w: Warmup %d: want at least 2", ErrOptions, o.Warmup)
	case !(o.BaselineHalfLife >= 1) || math.IsInf(o.BaselineHalfLife, 0):
		return fmt.Errorf("%w: BaselineHalfLife %v: want a finite value >= 1", ErrOptions, o.BaselineHalfLife)
	case !(o.Clip > 0) || math.IsInf(o.Clip, 0):
		return fmt.Errorf("%w: Clip %v: want a finite value > 0", ErrOptions, o.Clip)
	case o.Season < 0:
		return fmt.Errorf("%w: Season %v: want >= 0", ErrOptions, o.Season)
	case o.Season > 0 && (o.SeasonBins < 2 || o.SeasonBins > 1<<16):
		return fmt.Errorf("%w: SeasonBins %d: want 2..65536", ErrOptions, o.SeasonBins)
	case o.Season > 0 && !(o.SeasonHalfLife > 0):
		return fmt.Errorf("%w: SeasonHalfLife %v: want > 0", ErrOptions, o.SeasonHalfLife)
	case o.Season > 0 && !(o.SeasonGain > 0 && o.SeasonGain <= 1):
		return fmt.Errorf("%w: SeasonGain %v: want in (0, 1]", ErrOptions, o.SeasonGain)
	case !(o.SuppressHalfLife > 0):
		return fmt.Errorf("%w: SuppressHalfLife %v: want > 0", ErrOptions, o.SuppressHalfLife)
	case !(o.Suppress >= 0):
		return fmt.Errorf("%w: Suppress %v: want >= 0", ErrOptions, o.Suppress)
	case !(o.ScoreScale > 0) || math.IsInf(o.ScoreScale, 0):
		return fmt.Errorf("%w: ScoreScale %v: want a finite value > 0", ErrOptions, o.ScoreScale)
	}
	return nil
}

// halfLifeAlpha converts a half-life in steps to an EWMA weight.
func halfLifeAlpha(h float64) float64 { return 1 - math.Exp2(-1/h) }
