package recommend

import (
	"errors"
	"fmt"
	"math"
	"time"

	"governor.dev/governor/engine/pid"
	"governor.dev/governor/engine/thresholds"
)

// ErrInvalidOption marks bad options; the error names the field.
var ErrInvalidOption = errors.New("recommend: invalid option")

// Gains are the PID gains relative to the ceiling in force when the
// controller starts: a load-score error of 0.1 moves the ceiling by
// Kp·0.1 of it at once and by Ki·0.1 of it per second of persistence.
type Gains struct {
	Kp, Ki, Kd float64
}

// Options configure a Recommender.
type Options struct {
	// Setpoint is the load score the controller holds; default 0.7.
	Setpoint float64
	// Gains relative to the starting ceiling; default Kp 1, Ki 0.05, Kd 0.
	Gains Gains
	// Deadband is the score error treated as zero; default 0.05.
	Deadband float64
	// MaxStepPerSecond bounds the ceiling's change per second as a share of
	// the starting ceiling; default 0.01 (10% per 10 s evaluation).
	MaxStepPerSecond float64
	// MinChange is the smallest relative ceiling change worth a proposal;
	// default 0.05.
	MinChange float64
	// MinScores is how many consecutive known load scores a service needs
	// before anything is recommended; default 3.
	MinScores int
	// Binding: a ceiling counts as binding when the offered rate is at
	// least this share of it; default 0.9.
	Binding float64
	// Thresholds configures the baselines behind breaker and alert
	// thresholds.
	Thresholds thresholds.RecommenderOptions
	// SlowCallMin and SlowCallMax bound the breaker slow-call threshold
	// derived from the healthy p99 baseline; defaults 10ms and 30s
	// (at most 1h, the ruleset's limit).
	SlowCallMin, SlowCallMax time.Duration
	// SlowCallDeadband is the relative difference from the slow-call
	// threshold in force below which no change is proposed; default 0.2.
	SlowCallDeadband float64
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{Setpoint: 0.7, Gains: Gains{Kp: 1, Ki: 0.05}, Deadband: 0.05, MaxStepPerSecond: 0.01,
		MinChange: 0.05, MinScores: 3, Binding: 0.9, Thresholds: thresholds.DefaultRecommenderOptions(),
		SlowCallMin: 10 * time.Millisecond, SlowCallMax: 30 * time.Second, SlowCallDeadband: 0.2}
}

func (o *Options) fill() error {
	d := DefaultOptions()
	if o.Setpoint == 0 {
		o.Setpoint = d.Setpoint
	}
	if o.Gains == (Gains{}) {
		o.Gains = d.Gains
	}
	if o.Deadband == 0 {
		o.Deadband = d.Deadband
	}
	if o.MaxStepPerSecond == 0 {
		o.MaxStepPerSecond = d.MaxStepPerSecond
	}
	if o.MinChange == 0 {
		o.MinChange = d.MinChange
	}
	if o.MinScores == 0 {
		o.MinScores = d.MinScores
	}
	if o.Binding == 0 {
		o.Binding = d.Binding
	}
	if o.Thresholds.MinSamples == 0 {
		o.Thresholds = d.Thresholds
	}
	if o.SlowCallMin == 0 {
		o.SlowCallMin = d.SlowCallMin
	}
	if o.SlowCallMax == 0 {
		o.SlowCallMax = d.SlowCallMax
	}
	if o.SlowCallDeadband == 0 {
		o.SlowCallDeadband = d.SlowCallDeadband
	}
	var errs []error
	bad := func(field string, v any, want string) {
		errs = append(errs, fmt.Errorf("%w: %s is %v, want %s", ErrInvalidOption, field, v, want))
	}
	if !(o.Setpoint > 0 && o.Setpoint < 1) {
		bad("Setpoint", o.Setpoint, "in (0, 1)")
	}
	if !(o.Gains.Kp >= 0 && o.Gains.Ki >= 0 && o.Gains.Kd >= 0) || math.IsInf(o.Gains.Kp+o.Gains.Ki+o.Gains.Kd, 0) {
		bad("Gains", o.Gains, "finite and not negative")
	}
	if !(o.Deadband >= 0 && o.Deadband < 0.5) {
		bad("Deadband", o.Deadband, "in [0, 0.5)")
	}
	if !(o.MaxStepPerSecond > 0) || math.IsInf(o.MaxStepPerSecond, 0) {
		bad("MaxStepPerSecond", o.MaxStepPerSecond, "above 0")
	}
	if !(o.MinChange > 0 && o.MinChange < 1) {
		bad("MinChange", o.MinChange, "in (0, 1)")
	}
	if o.MinScores < 1 {
		bad("MinScores", o.MinScores, "at least 1")
	}
	if !(o.Binding > 0 && o.Binding <= 1) {
		bad("Binding", o.Binding, "in (0, 1]")
	}
	if o.SlowCallMin < time.Millisecond {
		bad("SlowCallMin", o.SlowCallMin, "at least 1ms")
	}
	if o.SlowCallMax < o.SlowCallMin || o.SlowCallMax > time.Hour {
		bad("SlowCallMax", o.SlowCallMax, fmt.Sprintf("in [SlowCallMin %s, 1h]", o.SlowCallMin))
	}
	if !(o.SlowCallDeadband > 0 && o.SlowCallDeadband < 1) {
		bad("SlowCallDeadband", o.SlowCallDeadband, "in (0, 1)")
	}
	if err := o.Thresholds.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: Thresholds: %w", ErrInvalidOption, err))
	}
	return errors.Join(errs...)
}

// pidConfig is the controller of a service whose ceiling starts at c0, kept
// within [floor, ceiling].
func (o *Options) pidConfig(c0, floor, ceiling float64) pid.Config {
	cfg := pid.DefaultConfig()
	cfg.Kp, cfg.Ki, cfg.Kd = o.Gains.Kp*c0, o.Gains.Ki*c0, o.Gains.Kd*c0
	cfg.Deadband = o.Deadband
	cfg.OutMin, cfg.OutMax = floor, ceiling
	cfg.RateLimit = o.MaxStepPerSecond * c0
	cfg.MaxInterval = time.Minute
	return cfg
}
