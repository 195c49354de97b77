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
// the same ratio. Breaker slow-call thresholds and latency alert levels come
// from engine/thresholds' healthy baselines.
//
// # Cluster-wide limits
//
// The ceiling is a service-level number; the SDK enforces per instance. The
// ceiling is split into equal per-instance shares from the live instance
// count of the delivery ledger and re-split as instances come and go, so no
// counter is shared on the request path. The service-level ceiling travels
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
// rules/versioning, keeping at most one open engine proposal per service (an
// older one is withdrawn and replaced, in place of stacking). A proposal
// applies itself (AutoApply, audited as the engine) only inside the service's
// Band: a cumulative change of at most MaxChangePerHour, never below Floor
// or above Ceiling, never for Manual services; everything else waits for a
// person's approval.
package recommend
