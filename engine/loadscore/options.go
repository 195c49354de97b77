package loadscore

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// ErrInvalidOption marks bad options; the error names the field.
var ErrInvalidOption = errors.New("loadscore: invalid option")

// Term is one component of the score.
type Term string

// The terms.
const (
	CPU      Term = "cpu"
	Memory   Term = "memory"
	Latency  Term = "latency"
	InFlight Term = "inflight"
	Queue    Term = "queue"
)

// Terms lists every term in display order.
var Terms = []Term{CPU, Memory, Latency, InFlight, Queue}

// Weights weighs the terms; a term with zero or no weight is off.
type Weights map[Term]float64

// DefaultWeights returns 0.4 CPU, 0.3 memory, 0.3 latency.
func DefaultWeights() Weights { return Weights{CPU: 0.4, Memory: 0.3, Latency: 0.3} }

// Targets are the values at which a term counts as fully loaded (1).
type Targets struct {
	// CPUCores is the CPU capacity of one instance. Default 1.
	CPUCores float64
	// MemoryBytes is the memory limit of one instance. Default 1 GiB.
	MemoryBytes float64
	// Latency is the p99 latency objective. Default 250ms.
	Latency time.Duration
	// QueueDelay is the tolerated p99 queueing delay. Default 50ms.
	QueueDelay time.Duration
}

// DefaultTargets returns the defaults; set real values per service.
func DefaultTargets() Targets {
	return Targets{CPUCores: 1, MemoryBytes: 1 << 30, Latency: 250 * time.Millisecond, QueueDelay: 50 * time.Millisecond}
}

// withDefaults fills zero fields from d.
func (t Targets) withDefaults(d Targets) Targets {
	if t.CPUCores == 0 {
		t.CPUCores = d.CPUCores
	}
	if t.MemoryBytes == 0 {
		t.MemoryBytes = d.MemoryBytes
	}
	if t.Latency == 0 {
		t.Latency = d.Latency
	}
	if t.QueueDelay == 0 {
		t.QueueDelay = d.QueueDelay
	}
	return t
}

func (t Targets) validate(field string) error {
	switch {
	case !(t.CPUCores > 0) || math.IsInf(t.CPUCores, 0):
		return fmt.Errorf("%w: %s.cpu_cores must be positive and finite, got %g", ErrInvalidOption, field, t.CPUCores)
	case !(t.MemoryBytes > 0) || math.IsInf(t.MemoryBytes, 0):
		return fmt.Errorf("%w: %s.memory_bytes must be positive and finite, got %g", ErrInvalidOption, field, t.MemoryBytes)
	case t.Latency <= 0:
		return fmt.Errorf("%w: %s.latency must be positive, got %s", ErrInvalidOption, field, t.Latency)
	case t.QueueDelay <= 0:
		return fmt.Errorf("%w: %s.queue_delay must be positive, got %s", ErrInvalidOption, field, t.QueueDelay)
	}
	return nil
}

// Options configures a Tracker. Zero fields take the defaults of
// DefaultOptions.
type Options struct {
	// Weights replaces the default weights entirely when set.
	Weights Weights
	// Targets apply to every service without its own.
	Targets Targets
	// ServiceTargets override Targets per service; their zero fields take
	// the values of Targets.
	ServiceTargets map[string]Targets
	// MinKnownWeight is the share of the total weight that must be known
	// for a score to be known, in (0, 1]. Default 0.5.
	MinKnownWeight float64
	// HalfLife of the smoothing. Default 30s.
	HalfLife time.Duration
	// ActAbove and ReleaseBelow are the hysteresis thresholds on the
	// smoothed score, 0 < ReleaseBelow < ActAbove < 1 (a key acts when
	// the score rises above ActAbove, which it cannot above 1). Defaults
	// 0.8, 0.5.
	ActAbove, ReleaseBelow float64
	// MaxGap: a key without a known score for longer loses its history (and
	// its Overloaded state); a key absent from snapshots for longer is
	// forgotten (Tracker.Forget forgets a service's keys at once). Default
	// 5m.
	MaxGap time.Duration
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		Weights:        DefaultWeights(),
		Targets:        DefaultTargets(),
		MinKnownWeight: 0.5,
		HalfLife:       30 * time.Second,
		ActAbove:       0.8,
		ReleaseBelow:   0.5,
		MaxGap:         5 * time.Minute,
	}
}

// normalize fills defaults and validates; it returns a copy.
func (o Options) normalize() (Options, error) {
	d := DefaultOptions()
	if o.Weights == nil {
		o.Weights = d.Weights
	}
	o.Weights = maps.Clone(o.Weights)
	total := 0.0
	for _, t := range slices.Sorted(maps.Keys(o.Weights)) {
		w := o.Weights[t]
		if !slices.Contains(Terms, t) {
			return o, fmt.Errorf("%w: weights: unknown term %q", ErrInvalidOption, t)
		}
		if !(w >= 0) || math.IsInf(w, 0) {
			return o, fmt.Errorf("%w: weights.%s must be a finite number >= 0, got %g", ErrInvalidOption, t, w)
		}
		total += w
	}
	if total <= 0 {
		return o, fmt.Errorf("%w: weights: at least one term needs a positive weight", ErrInvalidOption)
	}
	if math.IsInf(total, 0) {
		// Each weight is finite, their sum is not: every share would be
		// NaN or zero and the score meaningless.
		return o, fmt.Errorf("%w: weights: their sum %g must be finite", ErrInvalidOption, total)
	}
	o.Targets = o.Targets.withDefaults(d.Targets)
	if err := o.Targets.validate("targets"); err != nil {
		return o, err
	}
	st := make(map[string]Targets, len(o.ServiceTargets))
	for _, svc := range slices.Sorted(maps.Keys(o.ServiceTargets)) {
		t := o.ServiceTargets[svc].withDefaults(o.Targets)
		if err := t.validate("service_targets." + svc); err != nil {
			return o, err
		}
		st[svc] = t
	}
	o.ServiceTargets = st
	if o.MinKnownWeight == 0 {
		o.MinKnownWeight = d.MinKnownWeight
	}
	if !(o.MinKnownWeight > 0 && o.MinKnownWeight <= 1) {
		return o, fmt.Errorf("%w: min_known_weight must be in (0, 1], got %g", ErrInvalidOption, o.MinKnownWeight)
	}
	if o.HalfLife == 0 {
		o.HalfLife = d.HalfLife
	}
	if o.MaxGap == 0 {
		o.MaxGap = d.MaxGap
	}
	if o.HalfLife < 0 {
		return o, fmt.Errorf("%w: half_life must be positive, got %s", ErrInvalidOption, o.HalfLife)
	}
	if o.MaxGap < 0 {
		return o, fmt.Errorf("%w: max_gap must be positive, got %s", ErrInvalidOption, o.MaxGap)
	}
	if o.ActAbove == 0 {
		o.ActAbove = d.ActAbove
	}
	if o.ReleaseBelow == 0 {
		o.ReleaseBelow = d.ReleaseBelow
	}
	if o.ActAbove >= 1 {
		// The smoothed score never exceeds 1, so a key would never act.
		return o, fmt.Errorf("%w: act_above must be below 1 (the score's maximum; 1 is never exceeded), got %g", ErrInvalidOption, o.ActAbove)
	}
	if !(o.ReleaseBelow > 0 && o.ReleaseBelow < o.ActAbove) {
		return o, fmt.Errorf("%w: need 0 < release_below < act_above < 1, got release_below %g, act_above %g", ErrInvalidOption, o.ReleaseBelow, o.ActAbove)
	}
	return o, nil
}

func (o *Options) targetsFor(service string) Targets {
	if t, ok := o.ServiceTargets[service]; ok {
		return t
	}
	return o.Targets
}
