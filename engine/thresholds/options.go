package thresholds

import (
	"fmt"
	"math"
	"time"
)

// Options tunes a Detector. Start from DefaultOptions; one set of options
// serves every series. Half-lives are in samples unless noted.
type Options struct {
	// Warmup is the number of samples before any score is reported; until
	// then Observe returns Inconclusive results with score 0.
	Warmup int
	// BaselineHalfLife is the half-life of the robust recent level and spread
	// that point residuals are measured against.
	BaselineHalfLife float64
	// Clip bounds a sample's influence on the baselines to Clip spreads, so
	// outliers barely move them while lasting shifts are followed.
	Clip float64
	// Seasons are the candidate seasonal periods (none disables
	// seasonality), each cut into phase bins followed with a half-life of
	// SeasonHalfLife periods. A profile replaces the recent level once a full
	// period has been seen and its residual spread is below SeasonGain times
	// the recent spread (the data really has that season); of several such
	// profiles the one with the smallest residual spread is used.
	Seasons        []Season
	SeasonHalfLife float64
	SeasonGain     float64
	// Deseason feeds the slower features (shift, drift, envelope, CUSUM)
	// with the season taken out once the seasonal profile is in use, so a
	// daily cycle does not read as a drift. Off by default: on the NAB subset
	// it cost about 3 points, the cycles there being caught by the point
	// features already.
	Deseason bool
	// ShortHalfLife and MidHalfLife are the half-lives of the fast and medium
	// averages compared with the long-run level (LongHalfLife) to see level
	// shifts and drifts.
	ShortHalfLife, MidHalfLife, LongHalfLife float64
	// EnvelopeHalfLife is how fast the envelope of past extremes shrinks back
	// towards the long-run level.
	EnvelopeHalfLife float64
	// SpreadFloor and RangeFloor bound the spread from below, as shares of the
	// long-run spread and of the envelope width, so a flat series does not
	// turn rounding noise into surprise.
	SpreadFloor, RangeFloor float64
	// MemoryHalfLife is the half-life of the history each feature's rarity is
	// judged against: an event like one seen a few half-lives ago scores low.
	MemoryHalfLife float64
	// CusumHalfLife is the leak of the CUSUM features (how fast an old
	// excursion is forgotten) and CusumAllowance the drift, in long-run
	// spreads, it tolerates before accumulating.
	CusumHalfLife, CusumAllowance float64
	// VolatilityHalfLife is the half-life of the recent mean absolute change
	// between samples that the volatility features compare with its long-run
	// level (LongHalfLife).
	VolatilityHalfLife float64
	// Weights scale each Feature's surprisal; 0 disables a feature. The
	// defaults enable the features that earned their place on NAB; the
	// others (ShiftDown, EnvelopeDown, DriftDown, the CUSUMs,
	// VolatilityDown) are available for series where they matter.
	Weights [NumFeatures]float64
	// EchoWindow and EchoDamping report an event once: a sample at or near
	// the surprisal of "not seen within memory" that comes less than
	// EchoWindow samples after another such sample keeps 1-EchoDamping of its
	// surprisal (it still scores high, but below a fresh event). EchoWindow 0
	// disables the damping.
	EchoWindow  int
	EchoDamping float64
	// Corroborate marks the features whose surprisal needs corroboration:
	// when one of them gives the score and no other feature reaches
	// CorroborationLevel times the surprisal of "not seen within memory",
	// the score keeps 1-LoneDamping of its surprisal, so a lone slow signal
	// (a drift or a new high seen by nothing else) ranks just below an
	// event that several views of the series agree on. LoneDamping 0
	// disables it (and MinValue).
	Corroborate        [NumFeatures]bool
	CorroborationLevel float64
	LoneDamping        float64
	// MinValue is, per feature, the value below which the feature's
	// surprisal counts as weak evidence and keeps only 1-LoneDamping of
	// itself: a point residual of a few spreads, a new high beyond the
	// envelope by a hair of its width, a fast average barely a long-run
	// spread from the long-run level, or a mean step barely above the
	// typical one is rare only because the series has been unusually quiet.
	// 0 leaves a feature alone.
	MinValue [NumFeatures]float64
	// ScoreScale is the surprisal (in nats) that maps to a score of 0.5.
	ScoreScale float64
}

// Season is one seasonal period and the number of phase bins it is cut into.
type Season struct {
	Period time.Duration
	Bins   int
}

// Daily and Weekly are the default seasons: 5-minute bins over a day,
// 30-minute bins over a week.
var (
	Daily  = Season{Period: 24 * time.Hour, Bins: 288}
	Weekly = Season{Period: 7 * 24 * time.Hour, Bins: 336}
)

// DefaultOptions returns the options tuned on the NAB corpus, one set for
// all series (see the nab package for the evaluation).
func DefaultOptions() Options {
	o := Options{
		Warmup:           300,
		BaselineHalfLife: 200,
		Clip:             4,
		Seasons:          []Season{Daily, Weekly},
		SeasonHalfLife:   2,
		SeasonGain:       0.6,
		ShortHalfLife:    3,
		MidHalfLife:      150,
		LongHalfLife:     2000,
		EnvelopeHalfLife: 2000,
		SpreadFloor:      0.05,
		RangeFloor:       0.03,
		MemoryHalfLife:   150,
		CusumHalfLife:    50, CusumAllowance: 0.5,
		VolatilityHalfLife: 50,
		EchoWindow:         5, EchoDamping: 0.1,
		CorroborationLevel: 0.5, LoneDamping: 0.05,
		ScoreScale: 1,
	}
	o.Corroborate[DriftUp], o.Corroborate[EnvelopeUp] = true, true
	o.MinValue[PointUp], o.MinValue[PointDown] = 3, 3
	o.MinValue[EnvelopeUp], o.MinValue[EnvelopeDown] = 0.08, 0.08
	o.MinValue[ShiftUp], o.MinValue[ShiftDown] = 1.5, 1.5
	o.MinValue[VolatilityUp] = 2
	for _, f := range []Feature{PointUp, PointDown, ShiftUp, EnvelopeUp, DriftUp, VolatilityUp} {
		o.Weights[f] = 1
	}
	return o
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	halfLives := []struct {
		name string
		v    float64
	}{
		{"BaselineHalfLife", o.BaselineHalfLife}, {"ShortHalfLife", o.ShortHalfLife},
		{"MidHalfLife", o.MidHalfLife}, {"LongHalfLife", o.LongHalfLife},
		{"EnvelopeHalfLife", o.EnvelopeHalfLife}, {"MemoryHalfLife", o.MemoryHalfLife},
		{"CusumHalfLife", o.CusumHalfLife}, {"VolatilityHalfLife", o.VolatilityHalfLife},
	}
	for _, h := range halfLives {
		if !(h.v > 0) || math.IsInf(h.v, 0) {
			return fmt.Errorf("%w: %s %v: want a finite value > 0", ErrOptions, h.name, h.v)
		}
	}
	switch {
	case o.Warmup < 2:
		return fmt.Errorf("%w: Warmup %d: want at least 2", ErrOptions, o.Warmup)
	case !(o.Clip > 0) || math.IsInf(o.Clip, 0):
		return fmt.Errorf("%w: Clip %v: want a finite value > 0", ErrOptions, o.Clip)
	case len(o.Seasons) > 0 && (!(o.SeasonHalfLife > 0) || math.IsInf(o.SeasonHalfLife, 0)):
		return fmt.Errorf("%w: SeasonHalfLife %v: want a finite value > 0", ErrOptions, o.SeasonHalfLife)
	case len(o.Seasons) > 0 && !(o.SeasonGain > 0 && o.SeasonGain <= 1):
		return fmt.Errorf("%w: SeasonGain %v: want in (0, 1]", ErrOptions, o.SeasonGain)
	case !(o.SpreadFloor >= 0) || math.IsInf(o.SpreadFloor, 0):
		return fmt.Errorf("%w: SpreadFloor %v: want a finite value >= 0", ErrOptions, o.SpreadFloor)
	case !(o.RangeFloor >= 0) || math.IsInf(o.RangeFloor, 0):
		return fmt.Errorf("%w: RangeFloor %v: want a finite value >= 0", ErrOptions, o.RangeFloor)
	case !(o.CusumAllowance >= 0) || math.IsInf(o.CusumAllowance, 0):
		return fmt.Errorf("%w: CusumAllowance %v: want a finite value >= 0", ErrOptions, o.CusumAllowance)
	case o.EchoWindow < 0:
		return fmt.Errorf("%w: EchoWindow %d: want >= 0", ErrOptions, o.EchoWindow)
	case !(o.EchoDamping >= 0 && o.EchoDamping <= 1):
		return fmt.Errorf("%w: EchoDamping %v: want in [0, 1]", ErrOptions, o.EchoDamping)
	case !(o.CorroborationLevel >= 0 && o.CorroborationLevel <= 1):
		return fmt.Errorf("%w: CorroborationLevel %v: want in [0, 1]", ErrOptions, o.CorroborationLevel)
	case !(o.LoneDamping >= 0 && o.LoneDamping <= 1):
		return fmt.Errorf("%w: LoneDamping %v: want in [0, 1]", ErrOptions, o.LoneDamping)
	case !(o.ScoreScale > 0) || math.IsInf(o.ScoreScale, 0):
		return fmt.Errorf("%w: ScoreScale %v: want a finite value > 0", ErrOptions, o.ScoreScale)
	}
	for i, se := range o.Seasons {
		switch {
		case se.Period <= 0:
			return fmt.Errorf("%w: Seasons[%d].Period %v: want > 0", ErrOptions, i, se.Period)
		case se.Bins < 2 || se.Bins > 1<<16:
			return fmt.Errorf("%w: Seasons[%d].Bins %d: want 2..65536", ErrOptions, i, se.Bins)
		}
	}
	any := false
	for f, m := range o.MinValue {
		if !(m >= 0) || math.IsInf(m, 0) {
			return fmt.Errorf("%w: MinValue[%s] %v: want a finite value >= 0", ErrOptions, Feature(f), m)
		}
	}
	for f, w := range o.Weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("%w: Weights[%s] %v: want a finite value >= 0", ErrOptions, Feature(f), w)
		}
		any = any || w > 0
	}
	if !any {
		return fmt.Errorf("%w: Weights: all zero, nothing would be scored", ErrOptions)
	}
	return nil
}

// halfLifeAlpha converts a half-life in steps to an EWMA weight.
func halfLifeAlpha(h float64) float64 { return 1 - math.Exp2(-1/h) }
