package limit

import (
	"errors"
	"fmt"
	"math"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Limiter is an adaptive concurrency limit.
type Limiter interface {
	// Limit returns the current limit (>= 1). Cheap: an atomic load.
	Limit() int
	// Observe records one finished request: now and rtt in nanoseconds (now
	// from the caller's clock.Clock.Nanotime, so the limiter never reads the
	// clock itself on the hot path), inflight = requests in flight when this
	// one was admitted (including itself), dropped = it failed because of
	// overload (timeout, rejected downstream). Lock-free and allocation-free.
	Observe(now, rtt int64, inflight int, dropped bool)
}

// Inspector is implemented by every limiter of this package: a consistent
// enough view of its state for metrics, tests and the laboratory.
type Inspector interface {
	Snapshot() Snapshot
}

// Snapshot is the state of a limiter after its last decided window.
type Snapshot struct {
	Limit     int           // the limit Limit returns
	Learned   int           // the learned limit (differs from Limit while Little's law is not engaged)
	NoLoadRTT time.Duration // the no-load round-trip time estimate; 0 before the first window
	SampleRTT time.Duration // the last decided window's average round-trip time
	Probing   bool          // a no-load probe is running
	Engaged   bool          // the limit is enforced (always true except for Little's law)
	Windows   int64         // windows that led to a decision
	Probes    int64         // probes completed
	// MaxThroughput is Little's law's largest recent throughput, requests/s.
	MaxThroughput float64
}

// Errors. Every error of this package wraps one of them.
var (
	// ErrInvalidConfig: the rules.Concurrency given to New is invalid.
	ErrInvalidConfig = errors.New("limit: invalid config")
	// ErrInvalidOption: an Option was given an invalid value.
	ErrInvalidOption = errors.New("limit: invalid option")
)

// Defaults, as documented in rules.Concurrency.
const (
	DefaultInitial       = 20
	DefaultMin           = 4
	DefaultMax           = 1000
	DefaultTolerance     = 0.5
	DefaultProbeInterval = 60 * time.Second
	DefaultWindow        = 100 * time.Millisecond
	DefaultMinSamples    = 10
	maxLimit             = 1 << 20
)

// params are the resolved settings shared by the algorithms.
type params struct {
	min, max, initial int
	tolerance         float64
	probeInterval     int64
}

func resolve(cfg rules.Concurrency) (params, error) {
	bad := func(field, format string, args ...any) (params, error) {
		return params{}, fmt.Errorf("%w: concurrency.%s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch cfg.Algorithm {
	case "", rules.AlgorithmGradient, rules.AlgorithmLittle, rules.AlgorithmFixed:
	default:
		return bad("algorithm", "must be gradient, little or fixed, got %q", cfg.Algorithm)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"initial", cfg.Initial}, {"min", cfg.Min}, {"max", cfg.Max}} {
		if f.v < 0 || f.v > maxLimit {
			return bad(f.name, "must be between 0 (default) and %d, got %d", maxLimit, f.v)
		}
	}
	if cfg.Min > 0 && cfg.Max > 0 && cfg.Min > cfg.Max {
		return bad("min", "(%d) must not exceed max (%d)", cfg.Min, cfg.Max)
	}
	if cfg.Initial > 0 && cfg.Max > 0 && cfg.Initial > cfg.Max {
		return bad("initial", "(%d) must not exceed max (%d)", cfg.Initial, cfg.Max)
	}
	if cfg.Initial > 0 && cfg.Min > 0 && cfg.Initial < cfg.Min {
		return bad("initial", "(%d) must not be below min (%d)", cfg.Initial, cfg.Min)
	}
	if cfg.Algorithm == rules.AlgorithmFixed && cfg.Max == 0 {
		return bad("max", "is required for the fixed algorithm")
	}
	if math.IsNaN(cfg.Tolerance) || cfg.Tolerance < 0 || cfg.Tolerance > 10 {
		return bad("tolerance", "must be between 0 and 10, got %v", cfg.Tolerance)
	}
	if cfg.ProbeInterval < 0 || (cfg.ProbeInterval > 0 && cfg.ProbeInterval.D() < time.Second) || cfg.ProbeInterval.D() > 24*time.Hour {
		return bad("probe_interval", "must be between 1s and 24h, got %s", cfg.ProbeInterval.D())
	}

	p := params{min: cfg.Min, max: cfg.Max, initial: cfg.Initial, tolerance: cfg.Tolerance,
		probeInterval: int64(cfg.ProbeInterval)}
	if p.max == 0 {
		p.max = max(DefaultMax, p.min, p.initial)
	}
	if p.min == 0 {
		p.min = min(DefaultMin, p.max)
	}
	if p.initial == 0 {
		if cfg.Algorithm == rules.AlgorithmFixed {
			p.initial = p.max
		} else {
			p.initial = min(max(DefaultInitial, p.min), p.max)
		}
	}
	if p.tolerance == 0 {
		p.tolerance = DefaultTolerance
	}
	if p.probeInterval == 0 {
		p.probeInterval = int64(DefaultProbeInterval)
	}
	return p, nil
}

// New builds the algorithm named by cfg.Algorithm ("gradient" default,
// "little", "fixed"), with the defaults documented in rules.Concurrency, or an
// error wrapping ErrInvalidConfig or ErrInvalidOption that names the bad field.
// clk is used only off the hot path (Little's law's hold time); it may be nil
// for "gradient" and "fixed".
func New(cfg rules.Concurrency, clk clock.Clock, opts ...Option) (Limiter, error) {
	p, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.initial > 0 {
		p.initial = min(max(o.initial, p.min), p.max)
	}
	switch cfg.Algorithm {
	case rules.AlgorithmFixed:
		return newFixed(p.max), nil
	case rules.AlgorithmLittle:
		return newLittle(p, o, clk), nil
	default:
		return newGradient(p, o, clk), nil
	}
}
