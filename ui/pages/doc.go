// Package pages is the server-rendered web UI: html/template pages for the
// overview, a service, its rules (timeline, a version, diffs, proposing,
// approving and rolling back), recommendations, alerts, the audit log and
// settings, plus the login flow and the overview's Server-Sent Events stream.
//
// Every read-only page works without JavaScript; the only script
// (assets/app.js) swaps in fresh overview rows pushed over SSE. Every form
// that changes state carries the session's CSRF token, and each route states
// the roles it needs (see Routes); the rules store enforces four eyes and
// policy roles again underneath, so the UI cannot be more permissive than the
// store. A failing backend (database, metrics, alerts) shows a banner instead
// of the part it would fill; errors never show internals.
package pages
