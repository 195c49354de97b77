package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
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

func (a *API) audit1(r *http.Request, svc string, action versioning.Action, version int64, detail any) {
	raw, _ := json.Marshal(detail)
	if _, err := a.o.Rules.RecordAudit(r.Context(), versioning.AuditRecord{Actor: auth.FromContext(r.Context()).Actor(), Action: action, Service: svc, Version: version, Detail: raw}); err != nil {
		a.o.Logger.Error("api: canary audit entry not written", "service", svc, "action", action, "err", err)
	}
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
	a.audit1(r, svc, "canary_start", v.Number, map[string]any{"percent": req.Percent})
	writeJSON(w, http.StatusCreated, map[string]any{"version": v.Number, "percent": req.Percent})
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
		a.audit1(r, svc, versioning.Action("canary_"+kind), n, map[string]any{})
		writeJSON(w, http.StatusOK, map[string]any{"version": n})
	}
}
