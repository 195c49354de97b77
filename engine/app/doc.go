// Package app wires the decision engine into one process: the rules store
// (SQLite or PostgreSQL), NATS (embedded or a cluster), the distribution plane
// (outbox relay and delivery ledger), the signal source (the embedded metrics
// store or a Prometheus API), the load scores, the recommender, the
// guardrail, leader election, the alerts manager and the HTTP API. In dev
// mode it adds the demo fleet, seeds each demo service with an approved first
// version and, after a while, publishes a deliberately bad version so the
// guardrail has something to roll back.
//
// One listener serves /healthz, /readyz, /metrics and the engine's read API
// under /engine/api/v1 (package engine/api, unauthenticated: keep it
// internal). In dev mode (or with Options.WebUI) the same listener serves the
// web UI (package ui) at every other path, its authenticated JSON API under
// /api/v1 included; the UI's accounts live in the rules database and the
// first admin's one-time password is printed in the banner. New binds the
// listener before it starts anything else, so a port already taken fails the
// start before the admin is created. At a stop, requests still running after
// a 5s grace have their connections closed (their contexts end) before the
// databases close; the engine API bounds each read itself (api.Options.Timeout).
// The NATS connections are drained (what their subscriptions received is
// handled, what they published flushed; at most 5s each), the engine's
// before the stores close. The whole stop is bounded by
// Options.ShutdownTimeout (or the configuration's shutdown_timeout; default
// 25s, within Kubernetes' 30s grace): what has not finished by then is
// logged by name and left behind.
//
// Each evaluation cycle is bounded by the configuration's tick_timeout
// (default nine tenths of the interval), counted from its tick on the
// engine's clock: a cycle whose reads have not answered by then (a hung
// Prometheus) is cut short, logged and counted in
// governor_engine_tick_timeouts_total; it writes nothing more, saves no
// state and does not make the replica ready, and the next cycle runs on
// time. A Prometheus query attempt lasts at most the tick timeout (and at
// most 30s), which is also the timeout the query asks Prometheus for.
//
// The alerts manager (package alerts/manager) stores its state in the rules
// database, receives the engine's events through its EngineSink and
// evaluates its rules every AlertInterval while this replica leads, so two
// engines never notify twice. It starts as a standby that sends nothing;
// when the replica takes the lead it takes over the stored alert state and
// queues the notifications the log holds undelivered (manager.Lead), and
// the moment the lead ends it stops sending, leaving its queue in the log
// for the next leader (manager.Standby). Its rules, routes and receivers come from
// Options.Alerts or the document alerts.config_file names; without either
// it runs the built-in rules and only logs notifications.
//
// cmd/engine only parses the configuration and calls Run; tests embed the
// whole process through New.
package app
