// Package httperr maps the errors of every package the UI calls to HTTP
// status codes and user-facing messages, in one place, and writes them as
// JSON for the API or as a small HTML page for browsers. Internal details
// (database errors, stack traces) never reach the client: they are logged.
package httperr

import (
	"encoding/json"
	"errors"
	"fmt"
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
	// ErrMethodNotAllowed: the path exists, not with this method (the
	// caller sets the Allow header).
	ErrMethodNotAllowed = errors.New("ui: method not allowed")
)

type mapping struct {
	err    error
	status int
	// public: the error's text may be shown to the user.
	public bool
	// strip: the sentinel's own text ("auth: invalid input") is not shown
	// before the problem it introduces.
	strip bool
}

var static = []mapping{
	{versioning.ErrNotFound, http.StatusNotFound, true, false},
	{versioning.ErrConflict, http.StatusConflict, true, false},
	{versioning.ErrSelfApproval, http.StatusForbidden, true, false},
	{versioning.ErrForbidden, http.StatusForbidden, true, false},
	{versioning.ErrInvalidState, http.StatusConflict, true, false},
	{versioning.ErrInvalid, http.StatusUnprocessableEntity, true, false},
	{versioning.ErrTampered, http.StatusInternalServerError, true, false},
	{versioning.ErrUnavailable, http.StatusServiceUnavailable, false, false},
	{rules.ErrInvalid, http.StatusUnprocessableEntity, true, false},
	{auth.ErrUnauthenticated, http.StatusUnauthorized, true, false},
	{auth.ErrForbidden, http.StatusForbidden, true, false},
	{auth.ErrThrottled, http.StatusTooManyRequests, true, false},
	{auth.ErrCSRF, http.StatusForbidden, true, false},
	{auth.ErrLastAdmin, http.StatusUnprocessableEntity, true, true},
	{auth.ErrInvalid, http.StatusUnprocessableEntity, true, true},
	{auth.ErrExists, http.StatusConflict, true, false},
	{auth.ErrNotFound, http.StatusNotFound, true, false},
	{auth.ErrUnavailable, http.StatusServiceUnavailable, false, false},
	{model.ErrInvalid, http.StatusUnprocessableEntity, true, false},
	{model.ErrNotFound, http.StatusNotFound, true, false},
	{model.ErrConflict, http.StatusConflict, true, false},
	{model.ErrUnavailable, http.StatusServiceUnavailable, false, false},
	{configstore.ErrConflict, http.StatusConflict, true, false},
	{alerts.ErrInvalid, http.StatusUnprocessableEntity, true, false},
	{alerts.ErrNotFound, http.StatusNotFound, true, false},
	{alerts.ErrConflict, http.StatusConflict, true, false},
	{alerts.ErrStore, http.StatusServiceUnavailable, false, false},
	{ErrBadRequest, http.StatusBadRequest, true, false},
	{ErrNotFound, http.StatusNotFound, true, false},
	{ErrUnavailable, http.StatusServiceUnavailable, true, false},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, true, false},
}

// Status returns the HTTP status for err and whether its text is safe to
// show. A request body over its limit (an *http.MaxBytesError anywhere in
// err's chain) is 413.
func Status(err error) (int, bool) {
	m, ok := lookup(err)
	return m.status, ok && m.public
}

func lookup(err error) (mapping, bool) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return mapping{status: http.StatusRequestEntityTooLarge, public: true}, true
	}
	for _, m := range static {
		if errors.Is(err, m.err) {
			return m, true
		}
	}
	return mapping{status: http.StatusInternalServerError}, false
}

// Message is the user-facing text for err. An error of a sentinel whose
// own text is internal (auth.ErrInvalid, auth.ErrLastAdmin) is shown from
// the problem on: "roles: ...", not "auth: invalid input: roles: ...".
func Message(err error) string {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return TooLargeMessage(mbe.Limit)
	}
	m, ok := lookup(err)
	if ok && m.public {
		msg := err.Error()
		if m.strip {
			msg = strings.TrimPrefix(msg, m.err.Error()+": ")
		}
		return msg
	}
	status := m.status
	if status == http.StatusServiceUnavailable {
		return "A backend is unavailable (the database or the metrics source). Try again shortly."
	}
	return "Internal error. It has been logged."
}

// Reason is why a rules store call failed with err, as much of it as may
// be shown, for a sentence about something else that failed because of it
// (an action that took effect but whose audit entry was not written):
// Message when the error is public, else what kind of failure it was
// (every 503 of the rules store is its database). Message's own words for
// those ("Try again shortly") would invite repeating the action.
func Reason(err error) string {
	status, public := Status(err)
	switch {
	case public:
		return Message(err)
	case status == http.StatusServiceUnavailable:
		return "the database is unavailable"
	}
	return "an internal error; it has been logged"
}

// NotRecorded says, after the words of an action that took effect, that
// its audit entry could not be written (the write failed with err): the
// audit log does not show it, and repeating the action would act again.
func NotRecorded(err error) string {
	return "but its audit entry could not be written (" + Reason(err) + "): the audit log does not show it; do not repeat it"
}

// TooLargeMessage says that a request body is over limit bytes.
func TooLargeMessage(limit int64) string {
	if limit >= 1<<20 && limit%(1<<20) == 0 {
		return fmt.Sprintf("request body too large: at most %d bytes (%d MiB)", limit, limit>>20)
	}
	return fmt.Sprintf("request body too large: at most %d bytes", limit)
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
