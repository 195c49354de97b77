package guardrail

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
)

// Sentinel errors.
var (
	ErrInvalidOption = errors.New("guardrail: invalid option")
	ErrSeries        = errors.New("guardrail: series unavailable")
)

// Options configure a Guard. Store and Series are required.
type Options struct {
	Store  versioning.Store
	Series Series
	// Window is the length of the before and after windows, at least 1s;
	// default 2m.
	Window time.Duration
	// Settle is skipped after activation while instances pick the version
	// up and the signals' rate windows move past it; default 30s.
	Settle time.Duration
	// Step is the sample spacing, at least 100ms; default 10s.
	Step time.Duration
	// MaxWait: a version still inconclusive this long after Settle is
	// recorded as inconclusive for good; at least Window; default 3
	// windows.
	MaxWait time.Duration
	// Recover is how long a version may have been live, when a Guard
	// first sees it (a restart, a new leader), and still be judged: after
	// the fact, on the windows around its activation read from Series
	// (see the package documentation). An older one is taken as judged by
	// the run that watched it, and logged once. Default 24h; negative (or
	// below Settle + MaxWait): no version is judged after the fact.
	Recover time.Duration
	// Drift is how far back the cumulative checks reach: a version is
	// also compared with the window before the oldest of its ancestors
	// activated within Drift before it (not past a rollback or a service's
	// first version), with the same tolerances, so small steps each within
	// tolerance of its parent do not add up without bound. Such a
	// regression counts only when the offered load is within 1.1x of that
	// window's and the versions' own step effects add up beyond the
	// tolerance too (see the package documentation). Default 1h; negative:
	// no cumulative check.
	Drift time.Duration
	// MinSamples per window and metric; default 6.
	MinSamples int
	// Alpha is the significance level of the one-sided test; default 0.05.
	Alpha float64
	// ErrorTolerance is the tolerated absolute rise of the error ratio,
	// in (0, 1) (the ratio rises by at most 1); default 0.01.
	ErrorTolerance float64
	// LatencyTolerance is the tolerated relative rise of p99 latency, in
	// (0, 10); default 0.25.
	LatencyTolerance float64
	// GoodputTolerance is the tolerated relative drop of the goodput share
	// (below what a rise of the offered load explains), in (0, 1) (the
	// share drops by at most all of it); default 0.2.
	GoodputTolerance float64
	// LoadRatio is how far the offered load may move between the windows
	// (after/before or before/after) for them to count as comparable;
	// beyond it no comparison passes and only regressions the load change
	// cannot explain count (see the package documentation). Default 1.5;
	// must be above 1.
	LoadRatio float64
	// Actor defaults to the engine (operator role).
	Actor  versioning.Actor
	Events events.Sink
	Logger *slog.Logger
	// Keep is how many decisions Decisions returns; default 200.
	Keep int
}

// DefaultOptions returns the defaults of the optional fields.
func DefaultOptions() Options {
	return Options{Window: 2 * time.Minute, Settle: 30 * time.Second, Step: 10 * time.Second, Recover: 24 * time.Hour, Drift: time.Hour, MinSamples: 6,
		Alpha: 0.05, ErrorTolerance: 0.01, LatencyTolerance: 0.25, GoodputTolerance: 0.2, LoadRatio: 1.5, Keep: 200}
}

func (o *Options) fill() error {
	d := DefaultOptions()
	var errs []error
	if o.Store == nil {
		errs = append(errs, fmt.Errorf("%w: Store is required", ErrInvalidOption))
	}
	if o.Series == nil {
		errs = append(errs, fmt.Errorf("%w: Series is required", ErrInvalidOption))
	}
	def := func(p *time.Duration, v time.Duration, name string) {
		if *p < 0 {
			errs = append(errs, fmt.Errorf("%w: %s is %s, must not be negative", ErrInvalidOption, name, *p))
		}
		if *p == 0 {
			*p = v
		}
	}
	def(&o.Window, d.Window, "Window")
	def(&o.Settle, d.Settle, "Settle")
	def(&o.Step, d.Step, "Step")
	def(&o.MaxWait, 3*o.Window, "MaxWait")
	if o.Recover == 0 {
		o.Recover = d.Recover
	}
	if o.Drift == 0 {
		o.Drift = d.Drift
	}
	if o.MaxWait > 0 && o.MaxWait < o.Window {
		// A version inconclusive on a partial after window would be
		// final before a full one was seen.
		errs = append(errs, fmt.Errorf("%w: MaxWait %s is shorter than Window %s", ErrInvalidOption, o.MaxWait, o.Window))
	}
	// As the configuration (engine/config) bounds them: a finer grid
	// keeps and reads a point per Step and service for no better verdict.
	if o.Window > 0 && o.Window < time.Second {
		errs = append(errs, fmt.Errorf("%w: Window is %s, want at least 1s", ErrInvalidOption, o.Window))
	}
	if o.Step > 0 && o.Step < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("%w: Step is %s, want at least 100ms", ErrInvalidOption, o.Step))
	}
	if o.MinSamples == 0 {
		o.MinSamples = d.MinSamples
	}
	if o.MinSamples < 2 {
		errs = append(errs, fmt.Errorf("%w: MinSamples is %d, want at least 2", ErrInvalidOption, o.MinSamples))
	}
	if o.Alpha == 0 {
		o.Alpha = d.Alpha
	}
	if !(o.Alpha > 0 && o.Alpha < 0.5) {
		errs = append(errs, fmt.Errorf("%w: Alpha is %v, want in (0, 0.5)", ErrInvalidOption, o.Alpha))
	}
	// A version is rolled back when its effect rises above the tolerance.
	// The error ratio rises by at most 1 and the goodput share drops by at
	// most all of it, so a tolerance of 1 or more would never roll back;
	// the p99 latency's relative rise has no maximum.
	tol := func(p *float64, v, max float64, name, why string) {
		if *p == 0 {
			*p = v
		}
		if !(*p > 0 && *p < max) {
			errs = append(errs, fmt.Errorf("%w: %s is %v, want in (0, %v)%s", ErrInvalidOption, name, *p, max, why))
		}
	}
	const never = ": the change it tolerates is at most 1, so a tolerance of 1 or more never rolls back"
	tol(&o.ErrorTolerance, d.ErrorTolerance, 1, "ErrorTolerance", never)
	tol(&o.LatencyTolerance, d.LatencyTolerance, 10, "LatencyTolerance", "")
	tol(&o.GoodputTolerance, d.GoodputTolerance, 1, "GoodputTolerance", never)
	if o.LoadRatio == 0 {
		o.LoadRatio = d.LoadRatio
	}
	if !(o.LoadRatio > 1 && o.LoadRatio <= 100) {
		errs = append(errs, fmt.Errorf("%w: LoadRatio is %v, want in (1, 100]", ErrInvalidOption, o.LoadRatio))
	}
	if o.Actor.Name == "" {
		o.Actor = versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}}
	}
	if o.Events == nil {
		o.Events = events.Discard{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Keep <= 0 {
		o.Keep = d.Keep
	}
	if o.Window/o.Step < time.Duration(o.MinSamples) && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%w: Window %s holds fewer than MinSamples (%d) steps of %s", ErrInvalidOption, o.Window, o.MinSamples, o.Step))
	}
	return errors.Join(errs...)
}
