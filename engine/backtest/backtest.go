// Package backtest replays recorded metrics through the recommender: for
// every step between two times it reads the service's signals as the live
// engine would have at that time, scores them, and asks the recommender what
// it would have proposed, assuming each proposal was approved at once (so
// later steps start from it) and saying whether its band would have let it
// apply itself. Nothing is written anywhere. As in the live engine, a step
// whose signals read as partial (a query warned that data may be missing)
// proposes nothing and counts as inconclusive; unlike it, the replay has no
// guardrail, so it does not hold proposals while a version is judged.
//
// A range without any series of the service is not an error, but its
// Summary says so (StepsWithData is 0): a replay with no proposals because
// it saw no data must not read as evidence that the rules are fine.
package backtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

// ErrInvalidOption marks bad options.
var ErrInvalidOption = errors.New("backtest: invalid option")

// MaxSteps bounds the evaluations of one replay: every step queries the
// source for both scopes, so a long range with a tiny step would run for
// hours. 100000 steps are over eleven days at the engine's default 10s
// interval; replay a longer range with a larger step, or in parts.
const MaxSteps = 100_000

// Options configure a replay. Source, Service, From, To and Ruleset are
// required.
type Options struct {
	Source  signals.Source
	Service string
	From    time.Time
	To      time.Time
	// Step between evaluations; default 10s (the engine's interval).
	Step time.Duration
	// Ruleset is the version in force at From.
	Ruleset   *rules.Ruleset
	Reader    signals.ReaderOptions
	LoadScore loadscore.Options
	Recommend recommend.Options
	Band      recommend.Band
}

// Proposal is what the engine would have proposed at one step.
type Proposal struct {
	At          time.Time           `json:"at"`
	Version     int64               `json:"version"`
	Reason      string              `json:"reason"`
	AutoApply   bool                `json:"auto_apply"`
	Policy      string              `json:"policy"`
	Evidence    *recommend.Evidence `json:"evidence"`
	RulesetJSON json.RawMessage     `json:"ruleset"`
}

// Summary counts what happened over the replay.
type Summary struct {
	Steps, KnownScores, Inconclusive int
	Proposals, AutoApplied           int
	MaxScore                         float64
	// FailedReads counts the steps at which some query failed (its
	// signals read as unknown, the step ran on the rest); FirstFailure is
	// the first such failure.
	FailedReads  int
	FirstFailure string
	// StepsWithData counts the steps at which the source held any series
	// of the service. 0 means the range has no data for it (a wrong
	// service name, a range outside the source's retention): the replay
	// proposed nothing because it saw nothing, which says nothing about
	// the rules; report it as such, not as a quiet replay.
	StepsWithData int
	// PartialSteps counts the steps at which the service's signals read
	// as partial (a query answered with a warning that data may be
	// missing, see signals.PartialData). The live engine proposes nothing
	// on partial data, and neither does the replay: such a step is
	// inconclusive. FirstPartial is the first such step and its warning.
	PartialSteps int
	FirstPartial string
}

// Run replays the range, calling emit for every proposal in time order.
func Run(ctx context.Context, o Options, emit func(Proposal)) (Summary, error) {
	return run(ctx, o, emit, &autoApplied{prune: true})
}

// run is Run keeping the changes that applied themselves in applied.
func run(ctx context.Context, o Options, emit func(Proposal), applied *autoApplied) (Summary, error) {
	var sum Summary
	if o.Step == 0 {
		o.Step = 10 * time.Second
	}
	var errs []error
	if o.Source == nil {
		errs = append(errs, fmt.Errorf("%w: Source is required", ErrInvalidOption))
	}
	if err := versioning.ValidateService(o.Service); err != nil {
		errs = append(errs, fmt.Errorf("%w: service: %w", ErrInvalidOption, err))
	}
	if o.From.IsZero() || !o.To.After(o.From) {
		errs = append(errs, fmt.Errorf("%w: from %s and to %s: want from before to", ErrInvalidOption,
			o.From.Format(time.RFC3339Nano), o.To.Format(time.RFC3339Nano)))
	}
	if o.Step < 0 {
		errs = append(errs, fmt.Errorf("%w: step %s must be positive", ErrInvalidOption, o.Step))
	}
	if n := Steps(o.From, o.To, o.Step); n > MaxSteps {
		errs = append(errs, fmt.Errorf("%w: step %s from %s to %s gives %d steps, more than the %d allowed: raise the step or shorten the range",
			ErrInvalidOption, o.Step, o.From.Format(time.RFC3339), o.To.Format(time.RFC3339), n, MaxSteps))
	}
	if o.Ruleset == nil {
		errs = append(errs, fmt.Errorf("%w: Ruleset (the version in force at the start) is required", ErrInvalidOption))
	} else if err := o.Ruleset.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: ruleset: %w", ErrInvalidOption, err))
	} else if o.Ruleset.Service != o.Service {
		errs = append(errs, fmt.Errorf("%w: ruleset is for service %q, not %q", ErrInvalidOption, o.Ruleset.Service, o.Service))
	}
	if err := errors.Join(errs...); err != nil {
		return sum, err
	}
	reader, err := signals.NewReader(o.Source, o.Reader)
	if err != nil {
		return sum, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	tracker, err := loadscore.New(o.LoadScore)
	if err != nil {
		return sum, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	rec, err := recommend.New(o.Recommend)
	if err != nil {
		return sum, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	active := versioning.Version{Service: o.Service, Number: 1, Ruleset: o.Ruleset, Active: true, ActivatedAt: o.From}
	for at := o.From; !at.After(o.To); at = at.Add(o.Step) {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		sum.Steps++
		snap, err := reader.Read(ctx, at, signals.PerService, o.Service)
		if err != nil {
			return sum, fmt.Errorf("backtest: read at %s: %w", at.Format(time.RFC3339), err)
		}
		inst, err := reader.Read(ctx, at, signals.PerInstance, o.Service)
		if err != nil {
			return sum, fmt.Errorf("backtest: read instances at %s: %w", at.Format(time.RFC3339), err)
		}
		if failed := readErrors(snap, inst); failed != "" {
			if sum.FailedReads == 0 {
				sum.FirstFailure = at.Format(time.RFC3339) + ": " + failed
			}
			sum.FailedReads++
		}
		key := signals.Key{Service: o.Service}
		entry := snap.Entries[key]
		if (entry != nil && len(entry.Values) > 0) || len(inst.Entries) > 0 {
			sum.StepsWithData++
		}
		if entry == nil {
			entry = &signals.Entry{Key: key, Values: map[signals.Signal]signals.Value{}}
		}
		sc := tracker.Observe(at, entry)
		if sc.Known {
			sum.KnownScores++
			sum.MaxScore = max(sum.MaxScore, sc.Value)
		}
		r := rec.Evaluate(recommend.Input{At: at, Service: o.Service, Score: sc, Entry: entry, Active: &active,
			Instances: len(inst.Entries), Band: o.Band})
		if detail, ok := entry.Partial(); ok {
			// As the live engine (engine/evaluate): signals that may lack
			// series propose nothing, whatever they suggest.
			if sum.PartialSteps == 0 {
				sum.FirstPartial = at.Format(time.RFC3339) + ": " + detail
			}
			sum.PartialSteps++
			r.Ruleset, r.Inconclusive = nil, true
		}
		if r.Inconclusive {
			sum.Inconclusive++
		}
		if r.Ruleset == nil {
			continue
		}
		ok, why := o.Band.Allows(applied.reference(at, r.Evidence.Ceiling.From), r.Evidence.Ceiling.To)
		if ok {
			applied.add(at, r.Evidence.Ceiling.From)
			sum.AutoApplied++
		}
		sum.Proposals++
		raw, _ := r.Ruleset.Canonical()
		ev, _ := json.Marshal(r.Evidence)
		active = versioning.Version{Service: o.Service, Number: active.Number + 1, Parent: active.Number, Ruleset: r.Ruleset,
			Evidence: ev, Active: true, ActivatedAt: at, Source: versioning.SourceEngine}
		if emit != nil {
			emit(Proposal{At: at, Version: active.Number, Reason: r.Reason, AutoApply: ok, Policy: why, Evidence: r.Evidence, RulesetJSON: raw})
		}
	}
	return sum, nil
}

// autoApplied holds the changes a replay let apply themselves, oldest
// first: when each applied, and the ceiling it replaced.
type autoApplied struct {
	at   []time.Time
	from []float64
	// prune drops the changes older than recommend.BandWindow as the replay moves
	// on; no later step can look at them.
	prune bool
}

// add records a change applied at at that replaced the ceiling from; at is
// no earlier than any change recorded.
func (a *autoApplied) add(at time.Time, from float64) {
	a.at, a.from = append(a.at, at), append(a.from, from)
}

// reference is the ceiling in force before the changes applied within
// recommend.BandWindow before at: the ceiling the oldest of them replaced, or cur
// when none applied. Replays move forward, so at is no earlier than at any
// call before.
func (a *autoApplied) reference(at time.Time, cur float64) float64 {
	if a.prune {
		old := 0
		for old < len(a.at) && at.Sub(a.at[old]) > recommend.BandWindow {
			old++
		}
		a.at, a.from = slices.Delete(a.at, 0, old), slices.Delete(a.from, 0, old)
	}
	// The changes are in time order: the oldest within the window is the
	// first not older than it.
	for i, t := range a.at {
		if at.Sub(t) <= recommend.BandWindow {
			return a.from[i]
		}
	}
	return cur
}

// Steps is how many evaluations a replay from from to to (both included)
// every step makes; 0 for an empty range or a step that is not positive.
func Steps(from, to time.Time, step time.Duration) int64 {
	if step <= 0 || from.IsZero() || to.Before(from) {
		return 0
	}
	return int64(to.Sub(from)/step) + 1
}

// readErrors describes the failed queries of a step's snapshots, in signal
// order; "" when none failed.
func readErrors(snaps ...*signals.Snapshot) string {
	var msgs []string
	for _, snap := range snaps {
		for _, sig := range slices.Sorted(maps.Keys(snap.Errors)) {
			msgs = append(msgs, fmt.Sprintf("%s (%s): %v", sig, snap.Scope, snap.Errors[sig]))
		}
	}
	return strings.Join(msgs, "; ")
}
