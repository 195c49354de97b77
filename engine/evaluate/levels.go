package evaluate

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/thresholds"
)

// AlertLevels turns the alert levels of every service into alerting: once
// per cycle it compares each service's p99 latency and error ratio with
// its warn and critical levels and emits events.LevelCrossed when a
// reading goes above one (and again every Refresh while it stays above),
// events.LevelCleared when it is back at or below. The built-in alert rule
// GovernorSignalAboveLevel (package alerts/rule) turns them into alerts
// with a `for` duration: P1 for the critical level, P2 for warn, resolved
// by the cleared event.
//
// The levels in force are the engine's, not a rule version's (rule
// versions carry no alert levels). Precedence, per signal:
//
//   - p99 latency: a service's override (LevelOverride.LatencyWarn and
//     LatencyCritical), else the fixed LatencyWarn and LatencyCritical,
//     else the levels the service's healthy baseline recommends
//     (engine/thresholds, through the recommender), floored by
//     LearnedMargin; none while the baseline is inconclusive.
//   - error ratio: a service's override (LevelOverride.ErrorWarn and
//     ErrorCritical) is authoritative: an SRE's objective is used as set.
//     Otherwise, with ErrorLearned, the levels the healthy baseline
//     recommends (its median error ratio plus the recommender's warn and
//     critical spreads, at least LearnedMargin above the median), with
//     ErrorWarn and ErrorCritical as floors: a learned level never goes
//     below the configured one, so nothing is paged below the objective.
//     While the baseline is inconclusive the floors are the levels; with
//     both floors zero there are none until it is conclusive. Without
//     ErrorLearned, ErrorWarn and ErrorCritical are the levels.
//
// The event's Source says which applied: "configured" or "learned". A
// reading that is unknown compares with nothing: its alert, if any, stays
// until the rule's resolve_after passes without a new event. A service
// that reports nothing for Options.ForgetAfter is forgotten, and each of
// its levels still raised is resolved with a level_cleared event saying
// so (Value 0: there is no reading). What was
// reported (the levels crossed and when) is persisted with the engine's
// state (State): a new leader that restores it reports neither a second
// crossing of what is still above nor misses the clearing of what the old
// leader raised; without it, a new leader starts afresh, reporting what is
// above at its first cycle, and an alert the old leader raised for a
// reading now below resolves through the rule's resolve_after (5m).
//
// Its methods run on Tick's goroutine only. The zero value is not usable:
// use DefaultAlertLevels and adjust.
type AlertLevels struct {
	// LatencyWarn and LatencyCritical fix the p99 levels; zero: learned.
	LatencyWarn, LatencyCritical time.Duration
	// ErrorWarn and ErrorCritical are the error-ratio levels, or with
	// ErrorLearned the floors of the learned ones (both zero: no floor);
	// 0 < warn < critical < 1 (1, the ratio's maximum, is never crossed).
	ErrorWarn, ErrorCritical float64
	// ErrorLearned learns the error-ratio levels from the healthy
	// baseline (see the precedence above). Default true.
	ErrorLearned bool
	// LearnedMargin floors the learned levels: warn at least this share
	// above the healthy baseline, critical twice as far, so a very steady
	// service is not paged for a jitter its tiny spread calls an
	// excursion. Default 0.25.
	LearnedMargin float64
	// MinRequestRate: the error ratio of a service serving fewer requests
	// per second is not judged.
	MinRequestRate float64
	// Refresh is how often a level still crossed is reported again,
	// between 1s and 2m: the rule's resolve_after (5m) must not pass
	// between two reports of a level still crossed.
	Refresh time.Duration
	// Services override the levels of single services.
	Services map[string]LevelOverride

	raised map[levelKey]time.Time // last report of each crossed level
}

// DefaultAlertLevels returns learned p99 levels (at least 25% and 50% above
// the healthy baseline), learned error-ratio levels no lower than 1% and
// 5%, judged from 1 request per second, reported every minute.
func DefaultAlertLevels() *AlertLevels {
	return &AlertLevels{LearnedMargin: 0.25, ErrorWarn: 0.01, ErrorCritical: 0.05, ErrorLearned: true, MinRequestRate: 1, Refresh: time.Minute}
}

// Validate names the first bad field. A level its reading can never cross
// is refused, as the configuration (engine/config) refuses it: an
// error-ratio level (or floor) of 1, the ratio's maximum, and a Refresh
// at which a crossed level's alert resolves between two reports.
func (l *AlertLevels) Validate() error {
	switch {
	case l.LatencyWarn < 0 || l.LatencyCritical < 0 || (l.LatencyWarn == 0) != (l.LatencyCritical == 0) ||
		(l.LatencyWarn > 0 && l.LatencyCritical <= l.LatencyWarn):
		return fmt.Errorf("%w: AlertLevels.LatencyWarn %s and LatencyCritical %s: want both zero, or 0 < warn < critical",
			ErrInvalidOption, l.LatencyWarn, l.LatencyCritical)
	case l.ErrorLearned && l.ErrorWarn == 0 && l.ErrorCritical == 0:
		// No floors.
	case l.ErrorLearned && (l.ErrorWarn == 0 || l.ErrorCritical == 0):
		return fmt.Errorf("%w: AlertLevels.ErrorWarn %v and ErrorCritical %v (floors of the learned levels): want both zero, or 0 < warn < critical < 1",
			ErrInvalidOption, l.ErrorWarn, l.ErrorCritical)
	case !l.ErrorLearned && l.ErrorWarn == 0 && l.ErrorCritical == 0:
		return fmt.Errorf("%w: AlertLevels.ErrorWarn %v and ErrorCritical %v: want 0 < warn < critical < 1 (or ErrorLearned)",
			ErrInvalidOption, l.ErrorWarn, l.ErrorCritical)
	}
	if l.ErrorWarn != 0 || l.ErrorCritical != 0 {
		if err := errorLevelsProblem("AlertLevels.", l.ErrorWarn, l.ErrorCritical); err != nil {
			return err
		}
	}
	switch {
	case !(l.LearnedMargin >= 0 && l.LearnedMargin <= 10):
		return fmt.Errorf("%w: AlertLevels.LearnedMargin %v: want in [0, 10]", ErrInvalidOption, l.LearnedMargin)
	case !(l.MinRequestRate >= 0) || math.IsInf(l.MinRequestRate, 0):
		return fmt.Errorf("%w: AlertLevels.MinRequestRate %v: want a finite rate >= 0", ErrInvalidOption, l.MinRequestRate)
	case l.Refresh < time.Second || l.Refresh > 2*time.Minute:
		return fmt.Errorf("%w: AlertLevels.Refresh %s: want between 1s and 2m (a crossed level's alert resolves 5m after its last report)",
			ErrInvalidOption, l.Refresh)
	}
	for svc, o := range l.Services {
		if err := o.validate(svc); err != nil {
			return err
		}
	}
	return nil
}

// errorLevelsProblem checks a pair of error-ratio levels, their fields
// prefixed by field: 0 < warn < critical < 1. A level alerts when the ratio
// rises above it, so a level of 1, the ratio's maximum, is never crossed
// (as a floor of learned levels too).
func errorLevelsProblem(field string, warn, crit float64) error {
	if !(warn > 0 && warn < 1) {
		return fmt.Errorf("%w: %sErrorWarn %v: want in (0, 1)", ErrInvalidOption, field, warn)
	}
	if !(crit > warn && crit < 1) {
		return fmt.Errorf("%w: %sErrorCritical %v: want above ErrorWarn (%v) and below 1 (the error ratio's maximum; 1 is never crossed)",
			ErrInvalidOption, field, crit, warn)
	}
	return nil
}

// LevelOverride is one service's levels; zero fields keep AlertLevels'.
type LevelOverride struct {
	// Disabled: the service is not compared at all.
	Disabled bool
	// LatencyWarn and LatencyCritical fix the service's p99 levels (both
	// or neither).
	LatencyWarn, LatencyCritical time.Duration
	// ErrorWarn and ErrorCritical replace the error-ratio levels (both or
	// neither; 0 < warn < critical < 1).
	ErrorWarn, ErrorCritical float64
}

func (o LevelOverride) validate(service string) error {
	switch {
	case o.LatencyWarn < 0 || o.LatencyCritical < 0 || (o.LatencyWarn == 0) != (o.LatencyCritical == 0) ||
		(o.LatencyWarn > 0 && o.LatencyCritical <= o.LatencyWarn):
		return fmt.Errorf("%w: AlertLevels.Services[%q].LatencyWarn %s and LatencyCritical %s: want both zero, or 0 < warn < critical",
			ErrInvalidOption, service, o.LatencyWarn, o.LatencyCritical)
	case (o.ErrorWarn == 0) != (o.ErrorCritical == 0):
		return fmt.Errorf("%w: AlertLevels.Services[%q].ErrorWarn %v and ErrorCritical %v: want both zero, or 0 < warn < critical < 1",
			ErrInvalidOption, service, o.ErrorWarn, o.ErrorCritical)
	case o.ErrorWarn != 0:
		return errorLevelsProblem(fmt.Sprintf("AlertLevels.Services[%q].", service), o.ErrorWarn, o.ErrorCritical)
	}
	return nil
}

type levelKey struct{ service, signal, level string }

// learnedLevels returns a service's learned p99 levels, ok false while
// there are none.
type learnedLevels func(service string) (thresholds.Recommendation, bool)

// P99Levels returns the p99 latency levels in seconds that service's
// readings are compared with, and where they come from: "configured" (the
// service's override or the fixed levels) or "learned" (from the healthy
// baseline learned gives, floored by LearnedMargin). ok is false when
// there are none: the service is disabled, or its baseline is still
// inconclusive. It reads only the configuration and learned, so it is safe
// to call from any goroutine while the configuration is not changed.
func (l *AlertLevels) P99Levels(service string, learned func(service string) (thresholds.Recommendation, bool)) (warn, crit float64, source string, ok bool) {
	if l == nil || l.Services[service].Disabled {
		return 0, 0, "", false
	}
	v := l.p99Levels(service, learned)
	return v.Warn, v.Critical, v.Source, v.InForce
}

// ErrorLevels returns the error-ratio levels that service's readings are
// compared with and where they come from, "configured" or "learned" (see
// the precedence in AlertLevels); ok is false when there are none: the
// service is disabled, or the levels are learned without floors and the
// baseline is still inconclusive. Like P99Levels it is safe to call from
// any goroutine while the configuration is not changed.
func (l *AlertLevels) ErrorLevels(service string, learned func(service string) (thresholds.Recommendation, bool)) (warn, crit float64, source string, ok bool) {
	if l == nil || l.Services[service].Disabled {
		return 0, 0, "", false
	}
	v := l.errorLevels(service, learned)
	return v.Warn, v.Critical, v.Source, v.InForce
}

// Where a level in force comes from (SignalLevels.WarnFrom, CriticalFrom).
const (
	// FromLearned: the service's healthy baseline.
	FromLearned = "learned"
	// FromFloor: the configured floor of a learned level, in force while
	// the baseline is inconclusive or when the learned level is lower.
	FromFloor = "floor"
	// FromConfigured: the engine's configuration (fixed p99 levels, or
	// error-ratio levels with learning off).
	FromConfigured = "configured"
	// FromOverride: the service's own levels in the configuration.
	FromOverride = "override"
)

// SignalLevels are the alert levels one signal of one service is compared
// with, where each comes from and the healthy baseline behind them.
type SignalLevels struct {
	// Signal is events.SignalLatencyP99 (levels in seconds) or
	// events.SignalErrorRatio (ratios).
	Signal string
	// InForce is false when the signal has no levels (learned ones while
	// the baseline is inconclusive, without floors): nothing alerts on it.
	InForce bool
	// Warn and Critical are the levels; zero when not in force.
	Warn, Critical float64
	// Source is what the level events say: "learned" when a level came
	// from the baseline, else "configured".
	Source string
	// WarnFrom and CriticalFrom say where each level comes from: FromLearned,
	// FromFloor, FromConfigured or FromOverride; empty when not in force.
	WarnFrom, CriticalFrom string
	// Learned is true when the levels are learned from the service's
	// healthy baseline (or are the floors of learned ones).
	Learned bool
	// Conclusive: the baseline has enough healthy intervals; Baseline is
	// then its median (p99 in seconds, or error ratio), zero before.
	// Samples is its count of healthy intervals, Needed the count it needs
	// to be conclusive.
	Conclusive      bool
	Baseline        float64
	Samples, Needed int
}

// InForce returns the levels a service's p99 latency and error ratio are
// compared with, in that order, or nil when the service is not compared
// (alert levels off, or the service disabled). needed is the baseline's
// MinSamples. Like P99Levels it is safe to call from any goroutine while
// the configuration is not changed.
func (l *AlertLevels) InForce(service string, learned func(service string) (thresholds.Recommendation, bool), needed int) []SignalLevels {
	if l == nil || l.Services[service].Disabled {
		return nil
	}
	out := []SignalLevels{l.p99Levels(service, learned), l.errorLevels(service, learned)}
	for i := range out {
		if out[i].Learned {
			out[i].Needed = needed
		}
	}
	return out
}

// AlertLevelsInForce returns the levels of service its cycles compare the
// readings with (AlertLevels.InForce over the recommender's baselines); nil
// without Options.Levels or for a disabled service. It is safe to call
// from any goroutine.
func (e *Evaluator) AlertLevelsInForce(service string) []SignalLevels {
	return e.o.Levels.InForce(service, e.o.Recommender.Thresholds, e.o.Recommender.Options().Thresholds.MinSamples)
}

// baseline records what the baseline t (ok false: none yet) says.
func (v *SignalLevels) baseline(t thresholds.Recommendation, ok bool, median float64) {
	v.Learned = true
	if !ok {
		return
	}
	v.Samples = t.HealthyIntervals
	if v.Conclusive = !t.Inconclusive; v.Conclusive {
		v.Baseline = median
	}
}

// p99Levels: a service's override, else the fixed levels, else learned
// ones floored by LearnedMargin.
func (l *AlertLevels) p99Levels(service string, learned learnedLevels) SignalLevels {
	v := SignalLevels{Signal: events.SignalLatencyP99, Source: "configured"}
	ov := l.Services[service]
	switch {
	case ov.LatencyWarn > 0:
		v.Warn, v.Critical, v.WarnFrom, v.CriticalFrom = ov.LatencyWarn.Seconds(), ov.LatencyCritical.Seconds(), FromOverride, FromOverride
	case l.LatencyWarn > 0:
		v.Warn, v.Critical, v.WarnFrom, v.CriticalFrom = l.LatencyWarn.Seconds(), l.LatencyCritical.Seconds(), FromConfigured, FromConfigured
	default:
		v.Source = "learned"
		t, ok := learned(service)
		v.baseline(t, ok, t.BaselineP99)
		if ok && !t.Inconclusive && t.LatencyWarn > 0 && t.LatencyCritical > t.LatencyWarn {
			v.Warn = math.Max(t.LatencyWarn, t.BaselineP99*(1+l.LearnedMargin))
			v.Critical = math.Max(t.LatencyCritical, t.BaselineP99*(1+2*l.LearnedMargin))
			v.WarnFrom, v.CriticalFrom = FromLearned, FromLearned
		}
	}
	v.InForce = v.Warn > 0
	return v
}

// errorLevels: a service's override, else the configured levels, or with
// ErrorLearned the learned ones over the configured floors.
func (l *AlertLevels) errorLevels(service string, learned learnedLevels) SignalLevels {
	v := SignalLevels{Signal: events.SignalErrorRatio, Source: "configured"}
	if ov := l.Services[service]; ov.ErrorWarn > 0 {
		v.Warn, v.Critical, v.WarnFrom, v.CriticalFrom, v.InForce = ov.ErrorWarn, ov.ErrorCritical, FromOverride, FromOverride, true
		return v
	}
	v.Warn, v.Critical, v.WarnFrom, v.CriticalFrom = l.ErrorWarn, l.ErrorCritical, FromConfigured, FromConfigured
	if l.ErrorLearned {
		v.WarnFrom, v.CriticalFrom = FromFloor, FromFloor
		t, ok := learned(service)
		v.baseline(t, ok, t.BaselineErrorRatio)
		if ok && !t.Inconclusive && t.ErrorCritical > t.ErrorWarn && t.ErrorWarn > 0 {
			lw := math.Min(1, math.Max(t.ErrorWarn, t.BaselineErrorRatio*(1+l.LearnedMargin)))
			lc := math.Min(1, math.Max(t.ErrorCritical, t.BaselineErrorRatio*(1+2*l.LearnedMargin)))
			if lw > v.Warn || lc > v.Critical {
				v.Source = "learned"
			}
			if lw > v.Warn {
				v.Warn, v.WarnFrom = lw, FromLearned
			}
			if lc > v.Critical {
				v.Critical, v.CriticalFrom = lc, FromLearned
			}
			if v.Critical <= v.Warn { // a learned warn above the critical floor
				if c := math.Min(1, math.Max(v.Critical, v.Warn*(1+l.LearnedMargin))); c != v.Critical {
					v.Critical, v.CriticalFrom = c, FromLearned
				}
			}
		}
	}
	if v.InForce = v.Warn > 0 && v.Critical > v.Warn; !v.InForce {
		v.WarnFrom, v.CriticalFrom = "", ""
	}
	return v
}

// check compares the services' readings with their levels at time at.
// Only service-level entries (no instance) count.
func (l *AlertLevels) check(ctx context.Context, at time.Time, entries map[signals.Key]*signals.Entry, learned learnedLevels, sink events.Sink) {
	if l == nil {
		return
	}
	if l.raised == nil {
		l.raised = map[levelKey]time.Time{}
	}
	for k, en := range entries {
		if en == nil || k.Instance != "" {
			continue
		}
		svc := k.Service
		ov := l.Services[svc]
		if ov.Disabled {
			continue
		}
		if p99, ok := en.Get(signals.LatencyP99).Get(); ok {
			if warn, crit, source, ok := l.P99Levels(svc, learned); ok {
				l.compare(ctx, at, svc, events.SignalLatencyP99, p99, warn, crit, source, sink)
			}
		}
		er, ok1 := en.Get(signals.ErrorRatio).Get()
		rate, ok2 := en.Get(signals.RequestRate).Get()
		if ok1 && ok2 && rate >= l.MinRequestRate && !math.IsNaN(er) {
			if warn, crit, source, ok := l.ErrorLevels(svc, learned); ok {
				l.compare(ctx, at, svc, events.SignalErrorRatio, er, warn, crit, source, sink)
			}
		}
	}
}

// compare reports one signal of one service against both levels.
func (l *AlertLevels) compare(ctx context.Context, at time.Time, svc, signal string, v, warn, crit float64, source string, sink events.Sink) {
	for _, lv := range [...]struct {
		name      string
		threshold float64
		sev       events.Severity
	}{{events.LevelWarn, warn, events.Warning}, {events.LevelCritical, crit, events.Critical}} {
		key := levelKey{svc, signal, lv.name}
		last, raised := l.raised[key]
		d := events.Level{Signal: signal, Level: lv.name, Value: v, Threshold: lv.threshold, Source: source}
		switch {
		case v > lv.threshold && (!raised || at.Sub(last) >= l.Refresh):
			l.raised[key] = at
			sink.Emit(ctx, events.Event{Kind: events.LevelCrossed, Severity: lv.sev, At: at, Service: svc, Detail: d,
				Message: fmt.Sprintf("%s %s %s is above its %s level %s (%s)", svc, signalName(signal), levelText(signal, v), lv.name, levelText(signal, lv.threshold), source)})
		case v <= lv.threshold && raised:
			delete(l.raised, key)
			sink.Emit(ctx, events.Event{Kind: events.LevelCleared, Severity: events.Info, At: at, Service: svc, Detail: d,
				Message: fmt.Sprintf("%s %s %s is back at or below its %s level %s (%s)", svc, signalName(signal), levelText(signal, v), lv.name, levelText(signal, lv.threshold), source)})
		}
	}
}

// forget resolves every level of svc still raised, a service the
// evaluator forgets after absent without signals: a level_cleared each, as
// when a reading falls back below, its Value 0 (there is no reading) and
// its Threshold and Source the level in force, when there is one. The
// alert it raised is thus closed, and neither the evaluator nor its saved
// state keeps it.
func (l *AlertLevels) forget(ctx context.Context, at time.Time, svc string, absent time.Duration, learned learnedLevels, sink events.Sink) {
	for _, k := range l.take(svc) {
		d := events.Level{Signal: k.signal, Level: k.level}
		var warn, crit float64
		var ok bool
		if !l.Services[svc].Disabled {
			if k.signal == events.SignalLatencyP99 {
				warn, crit, d.Source, ok = l.P99Levels(svc, learned)
			} else {
				warn, crit, d.Source, ok = l.ErrorLevels(svc, learned)
			}
		}
		switch {
		case !ok:
			d.Source = ""
		case k.level == events.LevelCritical:
			d.Threshold = crit
		default:
			d.Threshold = warn
		}
		sink.Emit(ctx, events.Event{Kind: events.LevelCleared, Severity: events.Info, At: at, Service: svc, Detail: d,
			Message: fmt.Sprintf("%s %s: %s no longer reports (no signals for over %s, forgotten): its %s level is cleared",
				svc, signalName(k.signal), svc, absent, k.level)})
	}
}

// take removes the levels of svc still raised and returns them, by signal
// and level; none on a nil AlertLevels.
func (l *AlertLevels) take(svc string) []levelKey {
	if l == nil {
		return nil
	}
	var keys []levelKey
	for k := range l.raised {
		if k.service == svc {
			keys = append(keys, k)
			delete(l.raised, k)
		}
	}
	slices.SortFunc(keys, func(a, b levelKey) int { return cmp.Or(cmp.Compare(a.signal, b.signal), cmp.Compare(a.level, b.level)) })
	return keys
}

func signalName(s string) string {
	if s == events.SignalLatencyP99 {
		return "p99 latency"
	}
	return "error ratio"
}

func levelText(signal string, v float64) string {
	if signal == events.SignalLatencyP99 {
		return time.Duration(v * float64(time.Second)).Round(time.Microsecond).String()
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}
