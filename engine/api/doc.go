// Package api serves the engine's HTTP endpoints: /healthz, /readyz,
// /metrics and the read-only JSON API the web UI uses. Every JSON answer is
// an object; errors are {"error": "..."} with 400 (bad input), 404 (unknown
// service or version), 503 (a read the store or ledger did not answer
// within Options.Timeout, default 10s) or 500. The API is unauthenticated and read-only:
// keep the engine's listener internal. Its prefix is /engine/api/v1, never
// /api/v1, which is the web UI's authenticated API (the dev engine serves
// both from one listener). Unknown numbers (a score without data) are
// null, never zero. The API is versioned by path; fields are only added.
//
//	GET /healthz                       200 "ok" while the process runs
//	GET /readyz                        200 once the store, NATS and the first
//	                                   evaluation are up; 503 {"error"} before
//	GET /metrics                       Prometheus exposition of the engine
//	GET /engine/api/v1/services        {"services": [Service], "last_tick": t, "problems": [string] (only when a part could not be read)}
//	GET /engine/api/v1/services/{service}
//	                                   Service
//	GET /engine/api/v1/services/{service}/versions?limit=N&before=V
//	                                   {"versions": [versioning.Version]} newest first,
//	                                   at most N (default 50, at most 1000), numbered
//	                                   below V if given (the next page: V = the
//	                                   last number of this one)
//	GET /engine/api/v1/recommendations {"recommendations": [recommend.Recommendation]}
//	GET /engine/api/v1/ledger?service=S
//	                                   {"instances": [distribution.Instance]}; an instance
//	                                   no version is published for has state
//	                                   "UNPUBLISHED" and target 0
//	GET /engine/api/v1/guardrails      {"decisions": [guardrail.Decision]} newest first
//	GET /engine/api/v1/events?kind=K   {"events": [events.Event]} oldest first
//	GET /engine/api/v1/undeliverable?service=S
//	                                   {"undeliverable": [distribution.Undeliverable]}
//	                                   versions the relay gave up on, as the rules
//	                                   store records them (they survive restarts
//	                                   and are shared by every relay replica),
//	                                   until a newer version is published; newest first
//
// Service is {"service", "score" (loadscore.Score: value, known, overloaded
// and raw.terms with each term's input, weight and contribution),
// "active_version" (number, 0 if none), "pending" (open proposals), "instances" (count per ledger
// state: "SYNCED", "PENDING", "STALE", "NACKED", "GONE" and "UNPUBLISHED",
// the instances no version is published for, which run the SDK defaults
// and are never counted as "SYNCED" (see distribution.StateUnpublished);
// states without instances are left out; null when the engine has no
// delivery ledger or could not read it, which the list's "problems" then
// says: unknown, not none), "recommendation" (the latest, with its evidence), "latency_levels"
// ({"warn", "critical"} p99 levels in seconds and "source": "configured" or
// "learned"; absent when the engine has none for the service),
// "alert_levels" (per signal, "latency_p99" then "error_ratio": "in_force",
// "warn" and "critical" (null when not in force), "source", "warn_from" and
// "critical_from" ("learned", "floor": the configured floor of a learned
// level, "configured" or "override": the service's own), "learned",
// "baseline" (the healthy median the learned levels come from, null while
// inconclusive), "samples" (its healthy intervals) and "needed"; absent
// when the service is not compared),
// "undeliverable" (its versions the relay gave up on: version, reason,
// size and limit in bytes, error, time and relay; absent when none)}.
package api
