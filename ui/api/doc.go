// Package api is Governor's JSON API under /api/v1, for automation and for
// the pages' scripts. openapi.yaml (served at /api/v1/openapi.yaml) documents
// every operation.
//
// Callers authenticate with an API token ("Authorization: Bearer gov_...")
// or a browser session plus the X-CSRF-Token header on state changes. Each
// route needs the same roles as its page; the rules store enforces four eyes
// and the service's policy underneath. Errors are JSON documents
// {"error", "status", "fields"} written by package httperr; bad input names
// each field and its problem, and nothing is half-applied.
package api
