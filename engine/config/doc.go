// Package config is the engine's configuration: a YAML file, then
// environment variables (GOVERNOR_*), then command-line flags, each layer
// overriding the one before, validated as a whole at start. Validate reports
// every problem at once, each naming its field, so `engine -check-config`
// shows a broken file's mistakes in one run. The file holds one YAML
// document (settings after a second "---" are refused, not ignored), and
// every URL (nats.url, a comma-separated list too,
// metrics.prometheus_url, metrics.targets) needs its scheme and a host.
// Unknown keys and keys given twice are refused, each named with its line,
// and durations need a unit ("10s"; a bare 10 is refused).
//
// The per-service sections (bands.services, alert_levels.services) are
// keyed by service name, checked with the rules store's rule for names
// (versioning.ValidateService): a malformed name is refused, its field
// named as bands.services["check out"] (names may hold dots, hence the
// brackets). A well-formed name is accepted whether or not the service
// exists; the leader logs, at its first cycle that scored services, each
// entry naming a service neither the signals nor the rules store know. A
// service's band takes the keys it leaves out from bands.default (a band
// that only sets a floor keeps the default max_change_per_hour; an
// explicit 0 stays 0, holding every change for a person).
//
// leader.max_clock_skew (default 10s, between 100ms and 10m; with a
// Postgres database) is how far ahead of the database clock a replica's
// clock may run and still claim evaluation ticks: a replica further ahead
// claims none (logged with the skew), since ticks only move forward and
// its ticks would keep the other replicas from claiming until their clocks
// caught up. interval plus alert_levels.refresh must stay under 5m, the
// built-in level alert's resolve_after, or a crossed level's alert would
// resolve between reports and never page.
//
// tick_timeout bounds one evaluation cycle, counted from its tick (default
// 0: nine tenths of interval; at least 10ms, at most interval). A cycle
// whose reads (a Prometheus that hangs, a rules database that does not
// answer) are still running then is cut short: it is logged, counted in
// governor_engine_tick_timeouts_total, proposes, applies and rolls back
// nothing more, saves no engine state and does not make the replica ready,
// and the next cycle starts on time instead of being skipped. With
// metrics.prometheus_url, each query attempt lasts at most tick_timeout
// (and at most 30s), which is also the timeout the query asks Prometheus
// to apply, so Prometheus gives up when the cycle does. shutdown_timeout (default 25s, positive) bounds a stop: the HTTP
// requests, the background work, the NATS drains and the closing of the
// stores get that long in all, and what has not finished is logged by
// name and left behind; keep it under the pod's
// terminationGracePeriodSeconds (30s by default) minus any preStop hook.
//
// Besides the engine's own keys, alerts.config_file (also
// GOVERNOR_ALERTS_CONFIG and -alerts-config) names the alerting document
// (package alerts/config: rules, routes, receivers); cmd/engine and
// engine/app read and validate it with the rest, so -check-config reports
// its errors too. It is the bootstrap: alert routing saved from the UI
// supersedes it. alert_levels sets the p99 latency and error-ratio levels
// the engine alerts on (engine/evaluate AlertLevels). Precedence, per
// service: its own levels under alert_levels.services are authoritative;
// otherwise the p99 levels are latency_warn and latency_critical when set,
// else learned from the healthy baseline (at least learned_margin above
// it); the error-ratio levels, with error_ratio_levels "learned" (the
// default), are learned from the healthy baseline with error_ratio_warn
// and error_ratio_critical as floors (the floors apply while the baseline
// is inconclusive; both 0: no floor and no level until it is conclusive),
// with "configured" exactly error_ratio_warn and error_ratio_critical.
// A threshold that its measure can never exceed is refused, not accepted
// as a setting that never fires: error-ratio levels (and floors) must be
// below 1, as must guardrail.error_tolerance and guardrail.goodput_tolerance
// (the error ratio rises, and the goodput share drops, by at most 1).
// state.* sets how the leader persists what it learned and reported for
// the next leader (state.every: spread over that many cycles, default 30;
// state.max_age: older state is ignored at a takeover, and a service
// absent from the signals that long is forgotten, default 1h;
// state.disabled). nats.transition_retention: how long the delivery
// ledger keeps what each instance ran (default 720h). recommend.* every
// knob of the recommender, the open-proposal deadband
// (recommend.open_deadband) and how often an open proposal's evidence alone
// is revised (recommend.evidence_refresh, default 1m), how long a change
// like one that applied itself and was rolled back waits for a person
// (recommend.rollback_hold, default 1h), guardrail.* the
// guardrail's (guardrail.step, default 10s, is best a multiple of interval:
// then every sample time the guardrail compares is a cycle's, and costs no
// query of its own). guardrail.settle must be at least metrics.window
// (0 stands for the guardrail's default, 30s): the points just after
// activation are rates over a window, and one shorter than the window
// would count traffic from before the version as the version's.
//
// metrics.embedded_max_series bounds the series the embedded metrics
// store holds in memory (about 1-2 KiB each): past it a new series is
// refused, its samples dropped, counted in the target's status and
// logged, while the series already held keep their samples, so a label
// with unbounded values (a request ID) on a scraped target cannot exhaust
// the engine's memory. 0 (the default) is the store's own default,
// 4,000,000; a negative value removes the limit; a positive value must be
// at least 1000. It is unused with metrics.prometheus_url.
//
// Dev mode (`-dev`, used by `make run`) changes the defaults for a demo that
// shows something within a minute: embedded NATS, SQLite and metrics store,
// the demo fleet, second-scale intervals and short guardrail windows.
package config
