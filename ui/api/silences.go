package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"governor.dev/governor/alerts"
	alertsapi "governor.dev/governor/alerts/api"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

// silenceMaxBody bounds the body of POST /silences: a silence is a few
// matchers and a comment.
const silenceMaxBody = 64 << 10

// SilenceRequest is the body of POST /silences, in one of two forms.
//
// The short form silences a service (one tier, or all) for a while:
// service, tier, for and comment, through Options.Alerts.
//
// Alertmanager's form (with Options.AlertService) takes matchers
// ({service="checkout", severity=~"P1|P2"}), starts_at (default now) and
// ends_at as RFC 3339 times, and a comment; with the id of an existing
// silence it edits that silence as Alertmanager does (alertsapi.Service
// SaveSilence): in place, 200, or by expiring it and creating a new one,
// 201. A request with any of id, matchers, starts_at and ends_at is of
// this form, and may not carry service, tier or for.
type SilenceRequest struct {
	Service string `json:"service,omitempty"`
	Tier    string `json:"tier,omitempty"`
	For     string `json:"for,omitempty"`
	Comment string `json:"comment"`

	ID       string `json:"id,omitempty"`
	Matchers string `json:"matchers,omitempty"`
	StartsAt string `json:"starts_at,omitempty"`
	EndsAt   string `json:"ends_at,omitempty"`
}

func (q SilenceRequest) byMatchers() bool {
	return q.ID != "" || q.Matchers != "" || q.StartsAt != "" || q.EndsAt != ""
}

func (a *API) silence(w http.ResponseWriter, r *http.Request) {
	var req SilenceRequest
	if err := decodeMax(w, r, &req, silenceMaxBody); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.byMatchers() {
		a.silenceByMatchers(w, r, req)
		return
	}
	if a.o.Alerts == nil {
		a.fail(w, r, fmt.Errorf("%w: alerting is not configured", httperr.ErrUnavailable))
		return
	}
	s, err := model.ParseSilence(req.Service, req.Tier, req.For, req.Comment, a.o.Clock.Now())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s.By = auth.FromContext(r.Context()).User.Name
	if err := a.o.Alerts.Silence(r.Context(), s); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s)
}

// alertService answers 503 when no AlertService is configured.
func (a *API) alertService(w http.ResponseWriter, r *http.Request) bool {
	if a.o.AlertService == nil {
		a.fail(w, r, fmt.Errorf("%w: silences by matchers and alert history are not served here (no alerts manager in this process)", httperr.ErrUnavailable))
		return false
	}
	return true
}

// silenceByMatchers serves Alertmanager's form of POST /silences.
func (a *API) silenceByMatchers(w http.ResponseWriter, r *http.Request, req SilenceRequest) {
	var bad []rules.FieldError
	for _, f := range []struct{ name, value string }{{"service", req.Service}, {"tier", req.Tier}, {"for", req.For}} {
		if f.value != "" {
			bad = append(bad, rules.FieldError{Field: f.name,
				Problem: "belongs to the short form (service, tier, for); a silence by matchers takes matchers, starts_at and ends_at"})
		}
	}
	sr := alertsapi.SilenceRequest{ID: req.ID, CreatedBy: auth.FromContext(r.Context()).User.Name, Comment: strings.TrimSpace(req.Comment)}
	var err error
	if req.Matchers == "" {
		bad = append(bad, rules.FieldError{Field: "matchers", Problem: `required, e.g. {service="checkout"}`})
	} else if sr.Matchers, err = alerts.ParseMatchers(req.Matchers); err != nil {
		bad = append(bad, rules.FieldError{Field: "matchers", Problem: strings.TrimPrefix(err.Error(), alerts.ErrInvalid.Error()+": ")})
	}
	for _, f := range []struct {
		name, value string
		dst         *time.Time
	}{{"starts_at", req.StartsAt, &sr.StartsAt}, {"ends_at", req.EndsAt, &sr.EndsAt}} {
		t, err := alertsapi.ParseTime(f.name, f.value)
		if err != nil {
			bad = append(bad, rules.FieldError{Field: f.name, Problem: strings.TrimPrefix(err.Error(), alerts.ErrInvalid.Error()+": "+f.name+": ")})
			continue
		}
		*f.dst = t
	}
	if req.EndsAt == "" {
		bad = append(bad, rules.FieldError{Field: "ends_at", Problem: "required: an RFC 3339 time like \"2006-01-02T15:04:05Z\""})
	}
	if sr.Comment == "" || len(sr.Comment) > model.MaxSilenceComment {
		bad = append(bad, rules.FieldError{Field: "comment", Problem: fmt.Sprintf("required, at most %d bytes", model.MaxSilenceComment)})
	}
	if len(bad) > 0 {
		a.fail(w, r, &versioning.InputError{Errors: bad})
		return
	}
	if !a.alertService(w, r) {
		return
	}
	s, created, err := a.o.AlertService.SaveSilence(r.Context(), sr)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("ETag", strconv.Quote(s.Version))
	writeJSON(w, status, s)
}

// silences lists the silences, oldest start first, each with its state;
// each ?state= given (pending, active, expired) keeps those in that state.
func (a *API) silences(w http.ResponseWriter, r *http.Request) {
	if !a.alertService(w, r) {
		return
	}
	states, err := alertsapi.ParseStates(r.URL.Query()["state"])
	if err != nil {
		a.fail(w, r, &versioning.InputError{Errors: []rules.FieldError{{Field: "state",
			Problem: strings.TrimPrefix(err.Error(), alerts.ErrInvalid.Error()+": silence: state: ")}}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"silences": a.o.AlertService.Silences(states)})
}

// expireSilence ends a silence now, 204; it stays listed as expired.
// With If-Match, the ETag of the silence as the client showed it, a
// silence changed since is left as it is, 409 saying what changed;
// without (or with "*") it ends whatever it became, as Alertmanager's
// DELETE does.
func (a *API) expireSilence(w http.ResponseWriter, r *http.Request) {
	version, err := ifMatch(r.Header.Values("If-Match"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.alertService(w, r) {
		return
	}
	if err := a.o.AlertService.ExpireSilenceIf(r.Context(), chi.URLParam(r, "id"), version); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ifMatch reads the If-Match header of a silence's expiry: none or "*"
// is "" (any version); else one strong ETag, a silence's version quoted.
// A weak ETag (W/"…") never matches in If-Match, and a list names
// several versions where an expiry checks one: both are refused, as is a
// tag that cannot be a version, rather than ending the silence.
func ifMatch(values []string) (string, error) {
	h := strings.TrimSpace(strings.Join(values, ","))
	if h == "" || h == "*" {
		return "", nil
	}
	v, ok := strings.CutPrefix(h, `"`)
	if ok {
		v, ok = strings.CutSuffix(v, `"`)
	}
	if !ok || !model.IsSilenceVersion(v) {
		return "", fmt.Errorf(`%w: If-Match: must be one strong ETag of the silence, as its ETag header or its version quoted (e.g. "3f9a0c1e5b7d2468"); weak tags and lists are not accepted`, httperr.ErrBadRequest)
	}
	return v, nil
}

// alertHistory lists an alert's state changes, oldest first: the newest
// ?limit (default 100, 1 to 1000).
func (a *API) alertHistory(w http.ResponseWriter, r *http.Request) {
	if !a.alertService(w, r) {
		return
	}
	var bad []rules.FieldError
	limit := pageLimit(r.URL.Query(), 100, &bad)
	if len(bad) > 0 {
		a.fail(w, r, &versioning.InputError{Errors: bad})
		return
	}
	hist, err := a.o.AlertService.History(r.Context(), chi.URLParam(r, "id"), limit)
	if errors.Is(err, alerts.ErrInvalid) {
		err = &versioning.InputError{Errors: []rules.FieldError{{Field: "id", Problem: "must be an alert's fingerprint (16 hexadecimal digits, as GET /alerts lists)"}}}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"history": hist})
}
