// Package httperr maps the errors of every package the UI calls to HTTP
// status codes and user-facing messages, in one place, and writes them as
// JSON for the API or as a small HTML page for browsers. Internal details
// (database errors, stack traces) never reach the client: they are logged.
package httperr

import (
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

// Errors of the UI itself.
var (
	// ErrBadRequest: a malformed request (bad number, missing parameter).
	ErrBadRequest = errors.New("ui: bad request")
	// ErrNotFound: no such page or object.
	ErrNotFound = errors.New("ui: not found")
	// ErrUnavailable: a backend (metrics, alerts) is not configured or down.
	ErrUnavailable = errors.New("ui: unavailable")
)

type mapping struct {
	err    error
	status int
	// public: the error's text may be shown to the user.
	public bool
}

var static = []mapping{
	{versioning.ErrNotFound, http.StatusNotFound, true},
	{versioning.ErrConflict, http.StatusConflict, true},
	{versioning.ErrSelfApproval, http.StatusForbidden, true},
	{versioning.ErrForbidden, http.StatusForbidden, true},
	{versioning.ErrInvalidState, http.StatusConflict, true},
	{versioning.ErrInvalid, http.StatusUnprocessableEntity, true},
	{versioning.ErrTampered, http.StatusInternalServerError, true},
	{versioning.ErrUnavailable, http.StatusServiceUnavailable, false},
	{rules.ErrInvalid, http.StatusUnprocessableEntity, true},
	{auth.ErrUnauthenticated, http.StatusUnauthorized, true},
	{auth.ErrForbidden, http.StatusForbidden, true},
	{auth.ErrThrottled, http.StatusTooManyRequests, true},
	{auth.ErrCSRF, http.StatusForbidden, true},
	{auth.ErrInvalid, http.StatusUnprocessableEntity, true},
	{auth.ErrExists, http.StatusConflict, true},
	{auth.ErrNotFound, http.StatusNotFound, true},
	{auth.ErrUnavailable, http.StatusServiceUnavailable, false},
	{model.ErrInvalid, http.StatusUnprocessableEntity, true},
	{model.ErrNotFound, http.StatusNotFound, true},
	{model.ErrConflict, http.StatusConflict, true},
	{model.ErrUnavailable, http.StatusServiceUnavailable, false},
	{configstore.ErrConflict, http.StatusConflict, true},
	{alerts.ErrInvalid, http.StatusUnprocessableEntity, true},
	{alerts.ErrNotFound, http.StatusNotFound, true},
	{alerts.ErrStore, http.StatusServiceUnavailable, false},
	{ErrBadRequest, http.StatusBadRequest, true},
	{ErrNotFound, http.StatusNotFound, true},
	{ErrUnavailable, http.StatusServiceUnavailable, true},
}

// Status returns the HTTP status for err and whether its text is safe to
// show.
func Status(err error) (int, bool) {
	for _, m := range static {
		if errors.Is(err, m.err) {
			return m.status, m.public
		}
	}
	return http.StatusInternalServerError, false
}

// Message is the user-facing text for err.
func Message(err error) string {
	status, public := Status(err)
	if public {
		return err.Error()
	}
	if status == http.StatusServiceUnavailable {
		return "A backend is unavailable (the database or the metrics source). Try again shortly."
	}
	return "Internal error. It has been logged."
}

// Fields returns the field-level problems of an input error, if any.
func Fields(err error) []rules.FieldError {
	var ie *versioning.InputError
	if errors.As(err, &ie) {
		return ie.Errors
	}
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		return ve.Errors
	}
	return nil
}

// WantsJSON reports whether the request is an API call.
func WantsJSON(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || strings.Contains(r.Header.Get("Accept"), "application/json")
}

// Body is the JSON error document of the API.
type Body struct {
	Error  string             `json:"error"`
	Status int                `json:"status"`
	Fields []rules.FieldError `json:"fields,omitempty"`
}

// Write logs err (when it is not the client's fault) and writes it.
func Write(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status, _ := Status(err)
	if status >= 500 && log != nil {
		log.Error("ui: request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	msg := Message(err)
	if WantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(Body{Error: msg, Status: status, Fields: Fields(err)})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = page.Execute(w, map[string]any{"Status": status, "Text": http.StatusText(status), "Message": msg})
}

var page = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Status}} {{.Text}} · Governor</title><link rel="stylesheet" href="/assets/app.css"></head>
<body><main class="narrow"><div class="banner banner-error" role="alert"><strong>{{.Status}} {{.Text}}</strong><p>{{.Message}}</p></div>
<p><a href="/">Back to the overview</a></p></main></body></html>`))
