// Package model is what the web UI reads from the rest of Governor, as small
// interfaces the UI's wiring adapts the engine, the delivery ledger and the
// alerting subsystem to, plus the overview assembled from them.
//
// Fleet gives the live state of each service (load score and its trend, the
// golden signals, the rollout state of its rules). Alerts gives the firing
// alerts by tier and lets operators acknowledge and silence them. The rules
// themselves come from versioning.Reader directly.
//
// Build assembles the overview: every service any source knows, sorted by
// what needs attention first (see Attention). Alerts of no service
// (fleet-wide ones) are counted but make no row; a value that is not a
// finite number is no data. A failing source does not fail the overview:
// it is named in Overview.Problems (with what it still returned shown), so
// the page can show a banner and everything else. A Fleet that read the
// metrics but got some signals only in part or not at all returns a
// *SignalError with its services: each such signal is then a problem of its
// own ("metrics partial: <signal>: <warning>", "metrics query failed:
// <signal>: <reason>"), told apart from "metrics unavailable: ..." (the
// whole read failed).
package model
