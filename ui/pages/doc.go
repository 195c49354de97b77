// Package pages is the server-rendered web UI: html/template pages for the
// overview, a service, its rules (timeline, a version, diffs, proposing,
// approving and rolling back), recommendations, alerts, the audit log and
// settings, plus the login flow and the overview's Server-Sent Events stream.
//
// Times are printed in Options.Location (UTC unless set) with the zone's
// name; chart time axes are in UTC and their last label says so.
//
// Charts are server-rendered SVG (svg.go) with axes, units, every value on
// hover, reference lines (act, release, setpoint, target), breaks where
// samples are missing, a visible marker for a point with no neighbour, and
// the reason when there is no data; charts of several series (traffic by
// class, breaker states) carry a legend that is also their text summary.
// A chart whose query failed says "Query failed: <reason>." instead of no
// data, and one drawn from a partial answer of the metrics source (a
// federated store that did not answer) says "Partial data: <warning>. Some
// series may be missing.", each in a warn notice above the chart, so an
// empty or flat line is not read as no traffic.
// An engine recommendation's evidence (evidence.go) is shown for people:
// the signals over the minutes before it (from a model.Window source, else
// the evidence's own readings), the controller's P, I and D terms and how
// they add up to the change, the load score terms, the detector, the
// expected effect, the confidence and what it rests on, the change as a
// before / after table and the auto-apply verdict; the raw JSON stays in a
// collapsed block.
//
// Every read-only page works without JavaScript; the only script
// (assets/app.js) swaps in fresh overview rows pushed over SSE. While the
// stream is down it keeps the rows, marked stale with the time they were
// read (the page's data-at, then each update's), and opens the stream again
// with backoff when the browser gives up on it. Every form
// that changes state carries the session's CSRF token, and each route states
// the roles it needs (see Routes); the rules store enforces four eyes and
// policy roles again underneath, so the UI cannot be more permissive than the
// store. Forms that act on what a person reviewed carry what they saw: an
// approval the ruleset's checksum, a rollback the active version its
// preview was computed against ("from"); if it changed meanwhile, nothing
// is applied and the page comes back fresh with a message saying so, unless
// the version now active is this very rollback (the same form sent twice):
// that answer leads to it as the first did. A form sent back with an error
// marks the field in error, ties it to the message and focuses it. A failing backend (database, metrics, alerts) shows a banner instead
// of the part it would fill; errors never show internals.
package pages
