package pages

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

// Audit actions of canary rollouts (recorded through RecordAudit).
const (
	ActionCanaryStart   versioning.Action = "canary_start"
	ActionCanaryPromote versioning.Action = "canary_promote"
	ActionCanaryAbort   versioning.Action = "canary_abort"
)

func (p *Pages) canaryDone(w http.ResponseWriter, r *http.Request, svc string, action versioning.Action, version int64, detail map[string]any, err error) {
	if err != nil {
		status, _ := httperr.Status(err)
		if status >= 500 && status != http.StatusServiceUnavailable {
			p.fail(w, r, err)
			return
		}
		http.Redirect(w, r, "/services/"+svc+"/rules?error="+url.QueryEscape(httperr.Message(err)), http.StatusSeeOther)
		return
	}
	raw, _ := json.Marshal(detail)
	if _, err := p.o.Rules.RecordAudit(r.Context(), versioning.AuditRecord{Actor: auth.FromContext(r.Context()).Actor(), Action: action,
		Service: svc, Version: version, Detail: raw}); err != nil {
		p.o.Logger.Error("pages: canary audit entry not written", "service", svc, "action", action, "err", err)
	}
	http.Redirect(w, r, "/services/"+svc+"/rules", http.StatusSeeOther)
}

func (p *Pages) startCanary(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil || p.o.Rollouts == nil {
		p.fail(w, r, firstErr(err, httperrUnavailable()))
		return
	}
	n, err := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	if err != nil || n < 1 {
		p.canaryDone(w, r, svc, "", 0, nil, httperrBad("version: must be a version number"))
		return
	}
	pct, err := strconv.ParseFloat(r.PostFormValue("percent"), 64)
	if err != nil {
		p.canaryDone(w, r, svc, "", 0, nil, httperrBad("percent: must be a number"))
		return
	}
	v, err := p.o.Rules.Get(r.Context(), svc, n)
	if err == nil && !v.State.WentLive() {
		err = httperrBad(fmt.Sprintf("version: v%d is %s; only approved versions are staged", n, v.State))
	}
	if err == nil {
		err = p.o.Rollouts.StartCanary(r.Context(), v, pct)
	}
	p.canaryDone(w, r, svc, ActionCanaryStart, n, map[string]any{"percent": pct}, err)
}

func (p *Pages) promoteCanary(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil || p.o.Rollouts == nil {
		p.fail(w, r, firstErr(err, httperrUnavailable()))
		return
	}
	n, err := stagedVersion(r)
	if err == nil {
		n, err = p.o.Rollouts.Promote(r.Context(), svc, n)
	}
	p.canaryDone(w, r, svc, ActionCanaryPromote, n, map[string]any{}, err)
}

func (p *Pages) abortCanary(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil || p.o.Rollouts == nil {
		p.fail(w, r, firstErr(err, httperrUnavailable()))
		return
	}
	n, err := stagedVersion(r)
	if err == nil {
		n, err = p.o.Rollouts.Abort(r.Context(), svc, n)
	}
	p.canaryDone(w, r, svc, ActionCanaryAbort, n, map[string]any{}, err)
}

// stagedVersion is the version the promote and abort forms showed (field
// "version"): the action applies to it only, never to a canary staged since.
func stagedVersion(r *http.Request) (int64, error) {
	n, err := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	if err != nil || n < 1 {
		return 0, httperrBad("version: must be the staged version number")
	}
	return n, nil
}

func httperrUnavailable() error {
	return fmt.Errorf("%w: canary rollouts are not configured", httperr.ErrUnavailable)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
