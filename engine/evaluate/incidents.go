package evaluate

import (
	"context"
	"fmt"
	"math"
	"time"

	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/rules/versioning"
)

// DependencyOverloaded is the guardrail incident kind of a downstream that
// is itself a governed service and is overloaded.
const DependencyOverloaded = "dependency_overloaded"

// overloadedDependencies returns, for every active version, an incident per
// downstream named like a governed service whose load score is known and
// overloaded (the tracker's hysteresis state).
func overloadedDependencies(scores []loadscore.Score, active []versioning.Version) []guardrail.Incident {
	over := map[string]loadscore.Score{}
	for _, sc := range scores {
		if sc.Known && sc.Overloaded {
			over[sc.Key.Service] = sc
		}
	}
	if len(over) == 0 {
		return nil
	}
	var out []guardrail.Incident
	for _, v := range active {
		if v.Ruleset == nil {
			continue
		}
		for _, d := range v.Ruleset.Downstreams {
			if sc, ok := over[d.Name]; ok && d.Name != v.Service {
				out = append(out, guardrail.Incident{Service: v.Service, Kind: DependencyOverloaded, Downstream: d.Name,
					What: fmt.Sprintf("dependency %s is overloaded (load score %.2f)", d.Name, sc.Value)})
			}
		}
	}
	return out
}

// SlowDownstream is the guardrail incident kind of a downstream whose p99
// latency jumped.
const SlowDownstream = "slow_downstream"

// How a downstream latency jump is told: its p99 above slowFactor times its
// baseline and at least slowFloor above it; the incident lasts until the
// p99 falls below clearFactor times the baseline. The baseline is an
// exponentially weighted average (weight baselineWeight per cycle) of the
// p99 outside incidents, judged from its baselineCycles-th cycle on. A
// downstream slow for maxSlowCycles cycles in a row has a new normal: its
// baseline restarts from the current p99, so one lasting change does not
// excuse every version for good.
const (
	slowFactor     = 2.0
	clearFactor    = 1.5
	slowFloor      = 0.005 // seconds
	baselineWeight = 0.1
	baselineCycles = 6
	maxSlowCycles  = 60
)

// LatencyAnomaly is the guardrail incident kind of a downstream whose p99
// latency the anomaly detector (engine/thresholds) finds rising beyond what
// it has learnt of that series, short of the SlowDownstream jump.
const LatencyAnomaly = "latency_anomaly"

// anomalyScore is the detector score from which a rise of a downstream's
// p99 is an incident: about 0.84 means "not seen within recent memory", and
// the detector damps the scores of an event's aftershocks to about 0.82, so
// a rise that lasts keeps counting.
const anomalyScore = 0.8

// latencyBaseline is the usual p99 of one service's calls to a downstream.
type latencyBaseline struct {
	p99     float64
	n       int
	slow    bool
	slowFor int // cycles in a row
	// det follows the p99 series once per cycle; from its warm-up on, a
	// rise it scores at anomalyScore or more is a LatencyAnomaly.
	det *thresholds.Detector
	// seen is the last cycle the series was there (with or without a
	// sample); restored baselines count as seen at their row's cycle.
	seen time.Time
}

// slowDownstreams returns an incident per downstream whose p99 latency
// jumped (see slowFactor). A dependency that slows down makes its callers
// slower and more error-prone whatever their rules, so the guardrail must
// not blame their versions for it. The p99 is signals.DownstreamP99, read
// from the embedded store's samples or asked of Prometheus. Nothing is
// queried without Breakers (the PromQL source) or Guard. A downstream whose
// series is gone keeps its baseline and detector for Options.ForgetAfter:
// a caller whose scrapes failed for a rate window (an overload, a restart)
// continues with what it learned, rather than learning its "usual" p99
// anew from a dependency that is still slow. A partial answer
// (signals.PartialData) is neither learned nor reported; it holds the
// guardrail for the cycle, as a failed read does.
func (e *Evaluator) slowDownstreams(ctx context.Context, at time.Time) ([]guardrail.Incident, error) {
	if e.o.Breakers == nil || e.o.Guard == nil {
		return nil, nil
	}
	res, err := signals.DownstreamP99.Eval(ctx, e.o.Breakers, at)
	if err != nil {
		return nil, e.incidentFailed(fmt.Errorf("evaluate: downstream latency: %w", err))
	}
	if e.incidentRead("downstream latency", res) {
		// A p99 over partial buckets is neither learned nor reported; the
		// guardrail is held for the cycle.
		return nil, nil
	}
	if e.latency == nil {
		e.latency = map[string]*latencyBaseline{}
	}
	seen := make(map[string]bool, len(res.Samples))
	var out []guardrail.Incident
	for _, s := range res.Samples {
		svc, ds, v := s.Labels["service"], s.Labels["downstream"], s.V
		key := svc + "/" + ds
		seen[key] = true
		if b := e.latency[key]; b != nil {
			b.seen = at
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			continue // no calls in the window: nothing learned
		}
		b := e.latency[key]
		if b == nil {
			det, err := thresholds.New(thresholds.DefaultOptions())
			if err != nil {
				return nil, fmt.Errorf("evaluate: downstream latency detector: %w", err)
			}
			b = &latencyBaseline{p99: v, det: det, seen: at}
			e.latency[key] = b
		}
		an := b.det.Observe(at, v)
		if b.n >= baselineCycles {
			if b.slow {
				b.slow = v >= clearFactor*b.p99
			} else {
				b.slow = v > slowFactor*b.p99 && v-b.p99 >= slowFloor
			}
		}
		if b.slow && b.slowFor < maxSlowCycles {
			b.slowFor++
			out = append(out, guardrail.Incident{Service: svc, Kind: SlowDownstream, Downstream: ds,
				What: fmt.Sprintf("calls to %s are slow: p99 %.3fs, %.1fx the usual %.3fs", ds, v, v/b.p99, b.p99)})
			continue
		}
		if b.slow { // slow for too long: the new normal
			*b = latencyBaseline{p99: v, n: baselineCycles, det: b.det, seen: at}
			continue
		}
		if !an.Inconclusive && an.Score >= anomalyScore && v > an.Expected && v-an.Expected >= slowFloor {
			// Not a jump to twice the baseline, but a rise this series
			// has not shown: the dependency is in trouble all the same.
			out = append(out, guardrail.Incident{Service: svc, Kind: LatencyAnomaly, Downstream: ds,
				What: fmt.Sprintf("calls to %s are unusually slow: p99 %.3fs, expected %.3fs (anomaly score %.2f)", ds, v, an.Expected, an.Score)})
		}
		b.slowFor = 0
		b.p99 += baselineWeight * (v - b.p99)
		b.n++
	}
	for key, b := range e.latency {
		if !seen[key] && at.Sub(b.seen) > e.forgetAfter() {
			delete(e.latency, key)
		}
	}
	return out, nil
}
