package limit

import (
	"fmt"
	"math"
	"time"

	"governor.dev/governor/sdk/rules"
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
		// As the default Max yields to an explicit Min or Initial, the
		// default Min yields to an explicit Max or Initial: an Initial of
		// 2 starts at 2 and is not raised to 4 by the first window.
		p.min = min(DefaultMin, p.max)
		if p.initial > 0 {
			p.min = min(p.min, p.initial)
		}
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
