// Package rule evaluates alert rules. A rule is either a PromQL expression,
// read through an injected QueryFunc like Prometheus's rules manager does, or
// an engine condition raised by events (breaker open, instance stale or
// nacked, automatic rollback, emergency publish, leader lost, anomaly).
//
// Each series or event subject becomes an alert that moves
// inactive -> pending -> firing once the condition has held for the rule's
// For, and back to inactive when it stops holding (after KeepFiringFor, to
// ride out flapping). The evaluation time is always an argument.
//
// Update replaces the rule set atomically: the new set is validated whole and
// refused with the old set kept on any error; rules that did not change keep
// their alerts' state and queued events, the others start over. An Eval
// that runs while the set changes never applies a replaced or removed rule.
package rule
