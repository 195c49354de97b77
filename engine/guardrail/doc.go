// Package guardrail watches every rule version that goes live and rolls it
// back when it hurts.
//
// For a version activated at T the guardrail compares SLO signals over a
// window before T with a window after T plus a settling time: the error
// ratio (absolute tolerance), the p99 latency (relative tolerance) and the
// goodput (requests served without error per second, relative tolerance).
// Each comparison uses the per-step samples of the two windows and a
// one-sided Welch t-test: a regression needs both a significant p-value
// (below Alpha) and an effect beyond the tolerance. With fewer than
// MinSamples on either side a comparison is Inconclusive, and
// "inconclusive" is a state, never a pass: the guardrail keeps looking until
// MaxWait and then records the version as inconclusive (and emits an event).
//
// On a regression the guardrail rolls back to the version's parent through
// rules/versioning (a new rollback version, audited as the engine, with the
// decision as reason), and emits an auto_rollback event. Rollback versions
// themselves are watched but never rolled back, so the guardrail cannot
// loop; a service's first version is not watched (there is nothing before
// it). While a version is being judged, Watching is true and the engine
// proposes nothing new for the service, so every version gets its own
// verdict.
//
// The guardrail keeps no state that matters across a leader change: a new
// leader rebuilds its watches from the active versions' activation times.
package guardrail
