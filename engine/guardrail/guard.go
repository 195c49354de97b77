package guardrail

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
)

// Verdict is the state of a guarded version.
type Verdict string

// Verdicts. Watching and Inconclusive are open states; Pass, Regression and
// the final Inconclusive (Final set) are decisions.
const (
	Watching     Verdict = "watching"
	Inconclusive Verdict = "inconclusive"
	Pass         Verdict = "pass"
	Regression   Verdict = "regression"
)

// Check is one metric's comparison.
type Check struct {
	Metric    Metric  `json:"metric"`
	Before    Summary `json:"before"`
	After     Summary `json:"after"`
	PValue    float64 `json:"p_value"`
	Effect    float64 `json:"effect"`
	Tolerance float64 `json:"tolerance"`
	Verdict   Verdict `json:"verdict"`
	Detail    string  `json:"detail"`
}

// Decision is the guardrail's state of one version.
type Decision struct {
	Service     string    `json:"service"`
	Version     int64     `json:"version"`
	Parent      int64     `json:"parent"`
	ActivatedAt time.Time `json:"activated_at"`
	At          time.Time `json:"at"`
	Verdict     Verdict   `json:"verdict"`
	// Final is true once the verdict no longer changes.
	Final  bool    `json:"final"`
	Reason string  `json:"reason"`
	Checks []Check `json:"checks"`
	// RollbackVersion is the version the rollback created (0: none).
	RollbackVersion int64 `json:"rollback_version,omitempty"`
}

// Guard watches active versions. It is safe for concurrent use.
type Guard struct {
	o       Options
	mu      sync.Mutex
	watches map[string]*Decision // by service: the active version's state
	done    []Decision           // final decisions, newest last
}

// New validates the options and returns a Guard.
func New(o Options) (*Guard, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	return &Guard{o: o, watches: map[string]*Decision{}}, nil
}

// Observe updates the watches from the services' active versions at time now
// and evaluates every open one, rolling back regressions. It returns the
// decisions that became final during this call. Per-service failures are
// joined into the error; the other services are still evaluated.
func (g *Guard) Observe(ctx context.Context, now time.Time, active []versioning.Version) ([]Decision, error) {
	var open []*Decision
	g.mu.Lock()
	seen := map[string]bool{}
	for _, v := range active {
		seen[v.Service] = true
		w := g.watches[v.Service]
		if w != nil && w.Version == v.Number {
			if !w.Final {
				open = append(open, w)
			}
			continue
		}
		if v.ActivatedAt.IsZero() || now.Sub(v.ActivatedAt) > g.o.Settle+g.o.MaxWait || v.Parent == 0 && v.RollbackOf == 0 {
			// Too old to judge (a restart, say), or a service's first
			// version: nothing before it to compare with or return to.
			delete(g.watches, v.Service)
			continue
		}
		w = &Decision{Service: v.Service, Version: v.Number, Parent: v.Parent, ActivatedAt: v.ActivatedAt, Verdict: Watching}
		if v.RollbackOf != 0 || v.Source == versioning.SourceRollback {
			w.Parent = 0 // a rollback is watched but never rolled back
		}
		g.watches[v.Service] = w
		open = append(open, w)
	}
	for s := range g.watches {
		if !seen[s] {
			delete(g.watches, s)
		}
	}
	g.mu.Unlock()

	var final []Decision
	var errs []error
	for _, w := range open {
		d, err := g.evaluate(ctx, now, *w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g.mu.Lock()
		if cur := g.watches[d.Service]; cur != nil && cur.Version == d.Version {
			*cur = d
		}
		if d.Final {
			g.done = append(g.done, d)
			if len(g.done) > g.o.Keep {
				g.done = append(g.done[:0:0], g.done[len(g.done)-g.o.Keep:]...)
			}
			final = append(final, d)
		}
		g.mu.Unlock()
	}
	return final, errors.Join(errs...)
}

// evaluate judges one watch at time now.
func (g *Guard) evaluate(ctx context.Context, now time.Time, d Decision) (Decision, error) {
	d.At = now
	start := d.ActivatedAt.Add(g.o.Settle)
	if now.Before(start.Add(time.Duration(g.o.MinSamples) * g.o.Step)) {
		d.Verdict, d.Reason = Watching, "settling: not enough samples after activation yet"
		return d, nil
	}
	end := start.Add(g.o.Window)
	if now.Before(end) {
		end = now
	}
	d.Checks = d.Checks[:0]
	regressed, conclusive := []string{}, true
	for _, m := range Metrics {
		before, err := g.o.Series.Samples(ctx, d.Service, m, d.ActivatedAt.Add(-g.o.Window), d.ActivatedAt.Add(-time.Millisecond), g.o.Step)
		if err != nil {
			return d, fmt.Errorf("guardrail: %s v%d: %w", d.Service, d.Version, err)
		}
		after, err := g.o.Series.Samples(ctx, d.Service, m, start, end, g.o.Step)
		if err != nil {
			return d, fmt.Errorf("guardrail: %s v%d: %w", d.Service, d.Version, err)
		}
		c := g.compare(m, summarize(before), summarize(after))
		d.Checks = append(d.Checks, c)
		switch c.Verdict {
		case Regression:
			regressed = append(regressed, c.Detail)
		case Inconclusive:
			conclusive = false
		}
	}
	full := !now.Before(start.Add(g.o.Window))
	switch {
	case len(regressed) > 0:
		d.Verdict, d.Final = Regression, true
		d.Reason = "guardrail: regression after v" + fmt.Sprint(d.Version) + ": " + strings.Join(regressed, "; ")
		if err := g.rollback(ctx, &d); err != nil {
			return d, err
		}
	case conclusive && full:
		d.Verdict, d.Final, d.Reason = Pass, true, "no regression beyond tolerance over the full window"
	case !conclusive && !now.Before(start.Add(g.o.MaxWait)):
		d.Verdict, d.Final, d.Reason = Inconclusive, true, "too few samples to judge within the maximum wait"
		g.o.Events.Emit(ctx, events.Event{Kind: events.GuardrailInconclusive, Severity: events.Warning, At: now,
			Service: d.Service, Version: d.Version, Message: fmt.Sprintf("%s v%d: guardrail inconclusive", d.Service, d.Version), Detail: d})
	case !conclusive:
		d.Verdict, d.Reason = Inconclusive, "too few samples on one side so far"
	default:
		d.Verdict, d.Reason = Watching, "no regression so far"
	}
	return d, nil
}

// compare judges one metric.
func (g *Guard) compare(m Metric, before, after Summary) Check {
	c := Check{Metric: m, Before: before, After: after, PValue: math.NaN()}
	if before.N < g.o.MinSamples || after.N < g.o.MinSamples {
		c.Verdict = Inconclusive
		c.Detail = fmt.Sprintf("%s: %d samples before and %d after, need %d each", m, before.N, after.N, g.o.MinSamples)
		return c
	}
	var worse bool
	switch m {
	case ErrorRatio:
		c.Tolerance, c.Effect = g.o.ErrorTolerance, after.Mean-before.Mean
		c.PValue = welchGreater(before, after)
		worse = c.Effect > c.Tolerance
		c.Detail = fmt.Sprintf("error ratio %.4f -> %.4f (tolerance +%.4f, p=%.3g)", before.Mean, after.Mean, c.Tolerance, c.PValue)
	case LatencyP99:
		c.Tolerance, c.Effect = g.o.LatencyTolerance, rel(after.Mean, before.Mean)
		c.PValue = welchGreater(before, after)
		worse = c.Effect > c.Tolerance
		c.Detail = fmt.Sprintf("p99 latency %.4fs -> %.4fs (%+.1f%%, tolerance +%.0f%%, p=%.3g)", before.Mean, after.Mean, 100*c.Effect, 100*c.Tolerance, c.PValue)
	case Goodput:
		c.Tolerance, c.Effect = g.o.GoodputTolerance, -rel(after.Mean, before.Mean)
		c.PValue = welchGreater(after, before)
		worse = c.Effect > c.Tolerance
		c.Detail = fmt.Sprintf("goodput %.1f/s -> %.1f/s (%+.1f%%, tolerance -%.0f%%, p=%.3g)", before.Mean, after.Mean, -100*c.Effect, 100*c.Tolerance, c.PValue)
	}
	if worse && c.PValue < g.o.Alpha {
		c.Verdict = Regression
	} else {
		c.Verdict = Pass
	}
	return c
}

func rel(after, before float64) float64 {
	if before <= 0 {
		if after > 0 {
			return math.Inf(1)
		}
		return 0
	}
	return after/before - 1
}

// rollback returns the service to the guarded version's parent.
func (g *Guard) rollback(ctx context.Context, d *Decision) error {
	if d.Parent == 0 {
		d.Reason += " (nothing to roll back to)"
		g.o.Events.Emit(ctx, events.Event{Kind: events.AutoRollback, Severity: events.Critical, At: d.At, Service: d.Service,
			Version: d.Version, Message: fmt.Sprintf("%s v%d regressed but has no version to roll back to", d.Service, d.Version), Detail: *d})
		return nil
	}
	v, err := g.o.Store.Rollback(ctx, d.Service, d.Parent, g.o.Actor, clip(d.Reason, versioning.MaxReasonBytes))
	if err != nil {
		if errors.Is(err, versioning.ErrConflict) || errors.Is(err, versioning.ErrInvalidState) {
			d.Reason += fmt.Sprintf(" (rollback not possible: %v)", err)
			return nil
		}
		return fmt.Errorf("guardrail: roll back %s v%d to v%d: %w", d.Service, d.Version, d.Parent, err)
	}
	d.RollbackVersion = v.Number
	g.o.Logger.Warn("guardrail rolled back", "service", d.Service, "version", d.Version, "to", d.Parent, "rollback", v.Number, "reason", d.Reason)
	g.o.Events.Emit(ctx, events.Event{Kind: events.AutoRollback, Severity: events.Critical, At: d.At, Service: d.Service, Version: v.Number,
		Message: fmt.Sprintf("%s v%d rolled back to v%d as v%d: %s", d.Service, d.Version, d.Parent, v.Number, d.Reason), Detail: *d})
	return nil
}

// Watching reports whether the active version of a service is still being
// judged; the engine proposes no further change meanwhile, so every version
// gets its own verdict.
func (g *Guard) Watching(service string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.watches[service]
	return w != nil && !w.Final
}

// Decisions returns the open watches and the kept final decisions, newest
// first.
func (g *Guard) Decisions() []Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Decision, 0, len(g.watches)+len(g.done))
	for _, w := range g.watches {
		if !w.Final {
			out = append(out, *w)
		}
	}
	for i := len(g.done) - 1; i >= 0; i-- {
		out = append(out, g.done[i])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
