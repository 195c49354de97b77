package api

import (
	"fmt"
	"net/http"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

func (a *API) rollouts(w http.ResponseWriter, r *http.Request) (string, bool) {
	svc, err := service(r)
	if err == nil && a.o.Rollouts == nil {
		err = fmt.Errorf("%w: canary rollouts are not configured", httperr.ErrUnavailable)
	}
	if err != nil {
		a.fail(w, r, err)
		return "", false
	}
	return svc, true
}

// canaryDone records a canary action that took effect in the audit log and
// answers status with body. When the entry cannot be written the action
// still took effect, so the answer stays a success, and its body says in
// audit_error that the audit log does not show it (and why, as far as may be
// shown): a client must neither take it for recorded nor repeat it.
func (a *API) canaryDone(w http.ResponseWriter, r *http.Request, svc string, action versioning.Action, version int64, detail any, status int, body map[string]any) {
	if err := model.RecordCanary(r.Context(), a.o.Rules, auth.FromContext(r.Context()).Actor(), action, svc, version, detail); err != nil {
		a.o.Logger.Error("api: canary audit entry not written", "service", svc, "action", action, "err", err)
		body["audit_error"] = "the action took effect, " + httperr.NotRecorded(err)
	}
	writeJSON(w, status, body)
}

func (a *API) canary(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.rollouts(w, r)
	if !ok {
		return
	}
	c, err := a.o.Rollouts.Canary(r.Context(), svc)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"canary": c})
}

// CanaryRequest is the body of POST /services/{service}/canary.
type CanaryRequest struct {
	Version int64   `json:"version"`
	Percent float64 `json:"percent"`
}

func (a *API) startCanary(w http.ResponseWriter, r *http.Request) {
	svc, ok := a.rollouts(w, r)
	if !ok {
		return
	}
	var req CanaryRequest
	if err := a.decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.Version < 1 {
		a.fail(w, r, &versioning.InputError{Errors: []rules.FieldError{{Field: "version", Problem: "must be a version number"}}})
		return
	}
	v, err := a.o.Rules.Get(r.Context(), svc, req.Version)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !v.State.WentLive() {
		a.fail(w, r, &versioning.InputError{Errors: []rules.FieldError{{Field: "version", Problem: fmt.Sprintf("v%d is %s; only approved versions are staged", v.Number, v.State)}}})
		return
	}
	if err := a.o.Rollouts.StartCanary(r.Context(), v, req.Percent); err != nil {
		a.fail(w, r, err)
		return
	}
	a.canaryDone(w, r, svc, model.ActionCanaryStart, v.Number, map[string]any{"percent": req.Percent},
		http.StatusCreated, map[string]any{"version": v.Number, "percent": req.Percent})
}

// CanaryActionRequest is the body of POST /services/{service}/canary/promote
// and /abort: the version the caller saw staged. If another version is
// staged now, nothing changes (409).
type CanaryActionRequest struct {
	Version int64 `json:"version"`
}

func (a *API) canaryAction(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		svc, ok := a.rollouts(w, r)
		if !ok {
			return
		}
		var req CanaryActionRequest
		if err := a.decode(w, r, &req); err != nil {
			a.fail(w, r, err)
			return
		}
		if req.Version < 1 {
			a.fail(w, r, &versioning.InputError{Errors: []rules.FieldError{{Field: "version", Problem: "required: the staged version number to " + kind}}})
			return
		}
		var (
			n   int64
			err error
		)
		if kind == "promote" {
			n, err = a.o.Rollouts.Promote(r.Context(), svc, req.Version)
		} else {
			n, err = a.o.Rollouts.Abort(r.Context(), svc, req.Version)
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		action := model.ActionCanaryAbort
		if kind == "promote" {
			action = model.ActionCanaryPromote
		}
		a.canaryDone(w, r, svc, action, n, map[string]any{}, http.StatusOK, map[string]any{"version": n})
	}
}
