// Package app wires the decision engine into one process: the rules store
// (SQLite or PostgreSQL), NATS (embedded or a cluster), the distribution plane
// (outbox relay and delivery ledger), the signal source (the embedded metrics
// store or a Prometheus API), the load scores, the recommender, the
// guardrail, leader election and the HTTP API. In dev mode it adds the demo
// fleet, seeds each demo service with an approved first version and, after a
// while, publishes a deliberately bad version so the guardrail has something
// to roll back.
//
// cmd/engine only parses the configuration and calls Run; tests embed the
// whole process through New.
package app
