package pages

import (
	"fmt"
	"net/http"
	"strconv"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

// canaryStart is what the canary start form holds, as typed.
type canaryStart struct {
	Version, Percent string
}

// canaryDone answers a canary form. A refused action (err) comes back as
// the rules page with the refusal and its status, for the person who sent
// the form only (nothing of it goes into a URL), with typed, when not nil,
// in the start form. A done one (done says
// what it did) is written to the audit log; when the entry cannot be
// written, the rules page says that the action took effect but is missing
// from the log, with a 500: the person must not take the action for
// recorded, nor repeat it.
func (p *Pages) canaryDone(w http.ResponseWriter, r *http.Request, svc string, typed *canaryStart, action versioning.Action, version int64, detail map[string]any, done string, err error) {
	if err != nil {
		status, _ := httperr.Status(err)
		if status >= 500 && status != http.StatusServiceUnavailable {
			p.fail(w, r, err)
			return
		}
		p.canaryPage(w, r, svc, status, httperr.Message(err), typed)
		return
	}
	if err := model.RecordCanary(r.Context(), p.o.Rules, auth.FromContext(r.Context()).Actor(), action, svc, version, detail); err != nil {
		p.o.Logger.Error("pages: canary audit entry not written", "service", svc, "action", action, "err", err)
		p.canaryPage(w, r, svc, http.StatusInternalServerError, done+", "+httperr.NotRecorded(err)+
			" (reloading this page would send the form again).", nil)
		return
	}
	http.Redirect(w, r, "/services/"+svc+"/rules", http.StatusSeeOther)
}

// canaryPage renders the rules page of svc with msg in its error box and,
// when typed is not nil, typed in the start form. When the versions cannot
// be read (the database that refused the audit entry is often down for
// both), the page still says msg, and why it lists no versions.
func (p *Pages) canaryPage(w http.ResponseWriter, r *http.Request, svc string, status int, msg string, typed *canaryStart) {
	d, banners, err := p.timelineData(r, svc, nil)
	if err != nil {
		p.o.Logger.Error("pages: rules page not read after a canary form", "service", svc, "err", err)
		d, banners = timelineData{Service: svc, Unreadable: httperr.Message(err)}, nil
	}
	d.Error = msg
	if typed != nil {
		d.Start = *typed
	}
	p.renderTimeline(w, r, status, d, banners)
}

func (p *Pages) startCanary(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil || p.o.Rollouts == nil {
		p.fail(w, r, firstErr(err, httperrUnavailable()))
		return
	}
	// What was typed goes back into the form if the start is refused:
	// from the request body only (PostFormValue), never from the URL.
	typed := &canaryStart{Version: r.PostFormValue("version"), Percent: r.PostFormValue("percent")}
	n, err := strconv.ParseInt(typed.Version, 10, 64)
	if err != nil || n < 1 {
		p.canaryDone(w, r, svc, typed, "", 0, nil, "", httperrBad("version: must be a version number"))
		return
	}
	pct, err := strconv.ParseFloat(typed.Percent, 64)
	if err != nil {
		p.canaryDone(w, r, svc, typed, "", 0, nil, "", httperrBad("percent: must be a number"))
		return
	}
	v, err := p.o.Rules.Get(r.Context(), svc, n)
	if err == nil && !v.State.WentLive() {
		err = httperrBad(fmt.Sprintf("version: v%d is %s; only approved versions are staged", n, v.State))
	}
	if err == nil {
		err = p.o.Rollouts.StartCanary(r.Context(), v, pct)
	}
	p.canaryDone(w, r, svc, typed, model.ActionCanaryStart, n, map[string]any{"percent": pct},
		fmt.Sprintf("Canary v%d was staged to %s %% of the instances", n, strconv.FormatFloat(pct, 'f', -1, 64)), err)
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
	p.canaryDone(w, r, svc, nil, model.ActionCanaryPromote, n, map[string]any{}, fmt.Sprintf("Canary v%d was promoted to everyone", n), err)
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
	p.canaryDone(w, r, svc, nil, model.ActionCanaryAbort, n, map[string]any{}, fmt.Sprintf("Canary v%d was aborted", n), err)
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
