// Package alerts holds the vocabulary of Governor's tiered alerting: the
// P0/P1/P2 severities, the alert state enum, label sets with their
// fingerprints, label matchers and the sentinel errors shared by the
// subpackages.
//
// The pipeline is cut by domain, as in Alertmanager:
//
//	alerts/rule      alert rules (PromQL or engine condition), for / keep-firing-for, built-in rules
//	alerts/silence   silences with matchers, start/end, author and comment
//	alerts/inhibit   a P0 mutes the P1/P2 it explains
//	alerts/notify    the Notifier interface, bounded per-receiver queues with retry and back-off,
//	                 and one subpackage per integration (webhook, alertmanager, pagerduty, slack, email)
//	alerts/dispatch  routing, grouping, group wait / interval, repeat per tier, acknowledgements,
//	                 the notification log that keeps a state change from being sent twice
//	alerts/store     persistence of state, history, silences, acks and the notification log
//	                 in PostgreSQL or SQLite (migrations 00100-00199)
//
// Times are always passed in: nothing in the algorithms reads the wall clock.
package alerts
