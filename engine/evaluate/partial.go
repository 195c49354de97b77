package evaluate

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/sdk/watch"
)

// guardSignals are the signals the guardrail judges a version by (its
// request rate, error ratio, p99 latency and shed ratio samples, see
// guardrail.Guard.Record) and the freshness that decides whether they are
// stale. While any of them is partial the guardrail judges nothing: a
// service whose series a store lost reads as absent, which the guardrail
// would take for a version after which no instance reports (and roll back),
// and a partial rate or ratio as a regression.
var guardSignals = []signals.Signal{signals.RequestRate, signals.ErrorRatio, signals.LatencyP99, signals.ShedRatio, signals.Freshness}

// partialPrefix begins every reason given for partial data.
const partialPrefix = "metrics partial: "

// partialServices returns, by service, why its signals are partial
// ("metrics partial: <signal>: <warning>"); services whose signals are all
// complete are absent.
func partialServices(snap *signals.Snapshot) map[string]string {
	out := map[string]string{}
	for k, en := range snap.Entries {
		if k.Instance != "" {
			continue
		}
		if detail, ok := en.Partial(); ok {
			out[k.Service] = partialPrefix + detail
		}
	}
	return out
}

// partialReads lists the cycle's reads that answered with partial data:
// the snapshot's signals, then the incident reads.
func (e *Evaluator) partialReads(snap *signals.Snapshot) []string {
	var out []string
	for _, s := range slices.Sorted(maps.Keys(snap.Partial)) {
		out = append(out, partialPrefix+string(s)+": "+snap.Partial[s])
	}
	return append(out, e.incidentsPartial...)
}

// guardHold says why the guardrail must not judge this cycle, or "": a
// signal it judges by was partial, or an incident read was partial or
// failed.
func (e *Evaluator) guardHold(snap *signals.Snapshot) string {
	for _, s := range guardSignals {
		if w, ok := snap.Partial[s]; ok {
			return partialPrefix + string(s) + ": " + w
		}
	}
	if len(e.incidentsPartial) > 0 {
		return e.incidentsPartial[0]
	}
	return e.incidentsFailed
}

// incidentFailedPrefix begins the reason the guardrail is held for when an
// incident read failed.
const incidentFailedPrefix = "incident read failed: "

// incidentFailed notes that an incident read failed with err, so the
// guardrail is held for the cycle: a downstream incident the read could
// not see (an open breaker, a slow dependency) would otherwise be blamed
// on a version. It returns err.
func (e *Evaluator) incidentFailed(err error) error {
	if e.incidentsFailed == "" {
		e.incidentsFailed = incidentFailedPrefix + err.Error()
	}
	return err
}

// incidentRead notes a partial-data warning of an incident read (what,
// e.g. "breakers") and reports whether there was one.
func (e *Evaluator) incidentRead(what string, res *signals.Result) bool {
	for _, w := range res.Warnings {
		if signals.PartialData(w) {
			e.incidentsPartial = append(e.incidentsPartial, partialPrefix+what+": "+w)
			return true
		}
	}
	return false
}

// fleetCount is what the delivery ledger has of a service: its live
// instances (not GONE), what the ceiling is split over, and how many of
// them are expected to report metrics (see expectedReporting).
type fleetCount struct{ live, expected int }

// expectedReporting reports whether a live instance of the delivery ledger
// is expected among the instances reporting metrics at at: the ledger
// first heard from it (first) at least grace ago, and it is still
// heartbeating (heard from within one and a half of its heartbeat
// periods, 10s if it did not say). The ledger and the metrics see an
// instance come and go at different times: the ledger hears from it when
// it starts, the metrics only once its target is discovered and scraped;
// the metrics drop it as soon as its target goes, the ledger keeps it
// live until it is GONE, three missed heartbeats (35s by default) after it
// stopped. Counted while joining or leaving, the instances of a rolling
// deploy or a scale-out would hold nearly every cut. A zero first or
// LastSeen is unknown: the instance is expected.
func expectedReporting(in distribution.Instance, first, at time.Time, grace time.Duration) bool {
	if !first.IsZero() && at.Sub(first) < grace {
		return false // joining: perhaps not scraped yet
	}
	beat := watch.DefaultOptions().Heartbeat
	if in.HeartbeatMS > 0 {
		beat = time.Duration(in.HeartbeatMS) * time.Millisecond
	}
	// Leaving: silent past a heartbeat, with at least 5 s of margin for
	// short heartbeats (clock skew between the ledger and the engine, the
	// ledger's write latency).
	return in.LastSeen.IsZero() || at.Sub(in.LastSeen) <= max(beat+beat/2, beat+leavingMargin)
}

// leavingMargin is the least time past its heartbeat an instance may be
// silent and still be expected to report.
const leavingMargin = 5 * time.Second

// fewerReporting says why rec must not be proposed, or "": it lowers the
// service's rate ceiling while the service's signals come from fewer
// instances (signals.Entry.Reporting, those with a current SDK sample)
// than the delivery ledger has live and expected to report (fc.expected;
// expectedReporting leaves out those joining, first heard less than grace
// ago, and those leaving, silent past a heartbeat). Such a cut follows the
// summed request rate, which lacks the traffic of the instances not
// scraped (a target down, a scrape failing): overloaded below a ceiling
// nobody seems to reach, the recommender cuts to the offered rate's share,
// down to the band's floor (a tenth of the ceiling by default). A
// recommendation that raises the ceiling, keeps it (a re-split over the
// live instances) or only changes breakers is not held: the missing
// traffic can only make the ceiling look less reached, never raise it.
// Without a delivery ledger nothing is expected and nothing is held.
func fewerReporting(in recommend.Input, rec recommend.Recommendation, fc fleetCount, grace time.Duration) string {
	if rec.Ruleset == nil || rec.Evidence == nil || in.Entry == nil {
		return ""
	}
	if c := rec.Evidence.Ceiling; !(c.To < c.From) || in.Entry.Reporting >= fc.expected {
		return ""
	}
	churn := ""
	if n := fc.live - fc.expected; n > 0 {
		churn = fmt.Sprintf(", not counting %d joining or leaving (first heard less than %s ago, or silent past a heartbeat)", n, grace)
	}
	return fmt.Sprintf("%s%d of %d instances reported (expected: the live instances of the delivery ledger)%s: a ceiling cut from their summed request rate would follow the missing instances' traffic, not the load",
		partialPrefix, in.Entry.Reporting, fc.expected, churn)
}
