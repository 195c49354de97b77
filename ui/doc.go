// Package ui wires Governor's web UI and JSON API into one http.Handler:
// security headers and a strict Content-Security-Policy (no inline scripts or
// styles), net/http's CrossOriginProtection, authentication (package
// ui/auth), the embedded assets (ui/assets), the server-rendered pages
// (ui/pages) and the API under /api/v1 (ui/api).
//
// The engine's `make run` process mounts New's handler next to its own; in
// production cmd/web runs it as its own horizontally scalable process (all
// state lives in the rules database).
package ui
