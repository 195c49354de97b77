// Package recommend turns a service's load score and signals into proposed
// rule versions with evidence.
//
// # Two time scales
//
// The SDK adapts in milliseconds inside its bounds; this package moves the
// bounds once per evaluation. A PID controller per service (package
// engine/pid) holds the service's smoothed load score at a setpoint (default
// 0.7) by moving the service-wide rate ceiling: a score above the setpoint
// lowers it, one below raises it again, but only while the ceiling binds
// (raising a ceiling nobody reaches changes nothing and is not proposed).
// The concurrency bounds (Concurrency.Max) of the rate-limited routes follow
// the same ratio. While a proposed ceiling is not in force (it waits for
// approval, or was rejected) the load cannot answer it, so the controller's
// integral holds once the proposal, by the evidence's own estimate
// (ExpectedScore), brings the score to the setpoint: a waiting proposal
// does not wind down to the band's floor.
//
// What a Recommender keeps between evaluations can move to another replica:
// SaveBaselines and RestoreBaseline carry each service's healthy baseline,
// SaveControllers and RestoreControllers the controllers (integral, filtered
// derivative, last step, the version tracked) and the counts of consecutive
// known scores, so a replica that restores both recommends exactly what the
// one that saved them would have (engine/evaluate persists them across a
// leader change).
//
// # Breaker thresholds
//
// Breaker slow-call thresholds come from engine/thresholds' healthy
// baselines. Once its Recommender is conclusive for a service (enough
// healthy intervals), every downstream breaker of kind breaker that counts
// slow calls (slow_call_ratio above 0 and below 1; unset or 1 turns slow-call
// detection off in the SDK, so slow_call would have no effect and is left
// alone, the note saying so) gets
// slow_call = SlowCallFactor x the healthy p99 baseline, rounded to two
// significant digits, kept within [SlowCallMin, SlowCallMax] and at most the
// downstream's timeout; every other breaker field is kept. A threshold
// within SlowCallDeadband (relative, default 20%) of the one in force (the
// SDK default of 1s when unset) is left alone, so it does not flap with
// the baseline. Evidence.Breakers names the baseline behind each change;
// while the baselines are inconclusive nothing changes and
// Evidence.BreakerNote (and the reason of a recommendation without a
// ruleset) says why. A breaker change may come alone, with the ceiling
// held; it never applies itself, whatever the band: when it comes with a
// ceiling move the band allows, Proposer submits the ceiling move alone
// (it applies itself) and the breaker change is recommended again on a
// later cycle, to wait for approval. The latency alert levels travel in
// Evidence.Detector.
//
// # Cluster-wide limits
//
// The ceiling is a service-level number; the SDK enforces per instance. The
// ceiling is split into equal per-instance shares from the live instance
// count of the delivery ledger and re-split as instances come and go, so no
// counter is shared on the request path. A share is rounded to one decimal
// or three significant digits, whichever is finer, so the instances
// together enforce the ceiling the evidence names within 0.5%, whether
// there is one of them or a thousand. The service-level ceiling travels
// in the evidence of each engine version so a re-split keeps it.
//
// # Evidence and restraint
//
// Each Recommendation carries its Evidence: the signals and their values, the
// load score and its term contributions, the controller's P, I and D terms,
// the threshold detector's state, the expected effect and a confidence. With
// inconclusive data (unknown score or rate, too few known evaluations, no
// live instance, no active version) there is no recommendation, only the
// reason; neither is there one for a change below MinChange.
//
// # Proposals and bands
//
// Proposer turns a recommendation into a proposed version through
// rules/versioning, keeping at most one open engine proposal per service,
// updated in place rather than stacked. While a recommendation waits for
// approval and is based on the same version as the open engine proposal,
// that proposal is revised (versioning.Store.Revise: same number, Revision
// + 1, audited as revise): its evidence is refreshed, and its ruleset
// replaced when the recommendation moved beyond Proposer.OpenDeadband
// (default 10%) of its rate ceilings and concurrency bounds or changed
// anything else; a ruleset change invalidates the approvals already given
// on it, so nobody approves one ruleset and has another published. Inside
// the deadband the ruleset (and its reason) stay and the evidence says why
// (ruleset_kept, Submitted.Kept); such evidence-only revisions come at most
// once per Proposer.EvidenceRefresh (default 1 minute), so a recommendation
// repeated every evaluation does not write an audited revision every
// evaluation. A recommendation that applies itself, or one based on
// another active version than the open proposal, is proposed as a new
// version that withdraws the open one in the same transaction
// (Submitted.Replaced). Proposals by people are never touched. A
// recommendation waiting for approval that repeats the engine's latest
// proposal, which a person rejected (based on the same version, its ruleset
// inside OpenDeadband of the rejected one), is not proposed again
// (Submitted.Rejected): a rejection holds until the recommendation moves
// beyond the deadband or the active version changes. An evidence-only
// revision keeps the ceiling and concurrency bounds of the ruleset it keeps
// in the evidence, since the engine reads the ceiling in force back from
// there once the version is published. A proposal
// applies itself (AutoApply, audited as the engine) only inside the service's
// Band: a cumulative change of at most MaxChangePerHour (measured from the
// ceiling in force before the hour's automatic changes; a move back against
// one of them counts every move of the hour, so the ceiling does not swing
// back and forth inside the band), never below Floor or above Ceiling, never for Manual services, and never in the direction of
// a change that applied itself and was rolled back (by the guardrail or a
// person) within Proposer.RollbackHold (default 1 hour): the engine does not
// redo what was just undone. Everything else waits for a person's approval.
//
// # Where a service's band comes from
//
// Precedence, highest first (PolicyBand):
//
//  1. The band a person set in the service's policy in the rules store
//     (versioning.Policy.Band, edited by admins on the Settings page and
//     audited as a policy change): its MaxChangePerHour, Floor and Ceiling
//     replace the configured ones, and it is Manual exactly when the policy
//     is ManualOnly.
//  2. Otherwise the engine's configured band (engine config bands.services,
//     then bands.default), made Manual also when the policy is ManualOnly
//     (the store refuses automatic application under such a policy anyway).
//
// Proposer.Submit reads the policy before every submission, so a band set
// or cleared by a person takes effect on the next evaluation; the band
// passed to Submit is the configured fallback. PolicyBands gives the
// evaluator the same band for the controller's output bounds. Submitted and
// the evidence of each engine version record the band used and its source
// ("policy" or "config").
package recommend
