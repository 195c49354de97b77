package pages

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

type timelineData struct {
	Service    string
	Versions   []versioning.Version
	From, To   int64
	HasRollout bool
	Canary     *model.CanaryState
	// CanaryWhy and PromoteWhy say why the viewer may not start or abort
	// a canary, or promote it ("" when they may): the buttons are disabled.
	CanaryWhy, PromoteWhy string
	// Error is why the page's own canary form was refused, shown to the
	// person who sent it; never text from the URL.
	Error string
	// Start holds the values of the canary start form: the newest version
	// and 10 %, or, after a refused start, what its sender typed (from the
	// POSTed form, never from the URL) to correct.
	Start canaryStart
	// Unreadable says why the versions could not be read ("" when they
	// were): the page then lists none, and says so rather than "no
	// versions yet".
	Unreadable string
	// Undeliverable says, by version, why the relay could not deliver it.
	Undeliverable map[int64]string
	// Older links to the page of older versions when there are any.
	Older string
}

// timelinePage is how many versions the timeline shows at once, newest
// first; Older pages back.
const timelinePage = 200

func (p *Pages) timeline(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d, banners, err := p.timelineData(r, svc, r.URL.Query())
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.renderTimeline(w, r, http.StatusOK, d, banners)
}

// timelineData is the rules page of svc: the page of versions q asks for
// ("state", "before"), the canary and the banners over them. The page's
// Error is for a failed form of its own (canary start, promote, abort),
// never text from the URL, which anyone could write into a link.
func (p *Pages) timelineData(r *http.Request, svc string, q url.Values) (timelineData, []Banner, error) {
	// One more than a page: whether it comes back says whether an older
	// page holds anything (a link to an empty page would send an SRE
	// looking for versions that do not exist).
	f := versioning.ListFilter{Service: svc, Limit: timelinePage + 1}
	if st := q.Get("state"); st != "" {
		f.States = []versioning.State{versioning.State(st)}
	}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			return timelineData{}, nil, httperrBad("before must be a version number")
		}
		f.Before = n
	}
	vs, err := p.o.Rules.List(r.Context(), f)
	if err != nil {
		return timelineData{}, nil, err
	}
	older := len(vs) > timelinePage
	vs = vs[:min(len(vs), timelinePage)]
	d := timelineData{Service: svc, Versions: vs}
	if older {
		next := url.Values{}
		if st := q.Get("state"); st != "" {
			next.Set("state", st)
		}
		next.Set("before", strconv.FormatInt(vs[len(vs)-1].Number, 10))
		d.Older = "/services/" + svc + "/rules?" + next.Encode()
	}
	if len(vs) > 0 {
		d.To = vs[0].Number
		d.From = max(vs[0].Number-1, 1)
	}
	d.Start = canaryStart{Version: strconv.FormatInt(d.To, 10), Percent: "10"}
	detail, banners := p.serviceDetail(r, svc)
	for _, u := range detail.Undeliverable {
		if d.Undeliverable == nil {
			d.Undeliverable = map[int64]string{}
		}
		d.Undeliverable[u.Version] = u.String()
	}
	if p.o.Rollouts != nil {
		d.HasRollout = true
		pr := auth.FromContext(r.Context())
		d.CanaryWhy = changeWhy(pr)
		if !pr.Has(promoteRoles...) {
			d.PromoteWhy = "you need one of the roles: approver, admin"
		}
		if d.Canary, err = p.o.Rollouts.Canary(r.Context(), svc); err != nil {
			banners = append(banners, Banner{"warn", "The canary state is unavailable: " + httperr.Message(err)})
		}
	}
	return d, banners, nil
}

func (p *Pages) renderTimeline(w http.ResponseWriter, r *http.Request, status int, d timelineData, banners []Banner) {
	p.render(w, r, status, "timeline", "Rules of "+d.Service, "overview", d, banners...)
}

type versionData struct {
	Version     versioning.Version
	Changes     []versioning.Change
	ApproveWhy  string
	RejectWhy   string
	CanWithdraw bool
	// Stale: another version went live since the proposal's base.
	Stale        bool
	ActiveNumber int64
	Evidence     bool
	EvidenceHTML template.HTML
	// Revised is set when an approval was refused because the proposal was
	// revised after the approver opened it: the page then shows the
	// current revision and says so.
	Revised *revisedNotice
}

// revisedNotice tells an approver that the ruleset they reviewed is no
// longer the proposal's: Revision is the one to review now.
type revisedNotice struct {
	Service  string
	Number   int64
	Revision int
}

func (p *Pages) loadVersion(r *http.Request) (versioning.Version, error) {
	svc, err := serviceParam(r)
	if err != nil {
		return versioning.Version{}, err
	}
	n, err := intParam(r, "n")
	if err != nil {
		return versioning.Version{}, err
	}
	return p.o.Rules.Get(r.Context(), svc, n)
}

func (p *Pages) version(w http.ResponseWriter, r *http.Request) {
	v, err := p.loadVersion(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.renderVersion(w, r, http.StatusOK, v)
}

func (p *Pages) renderVersion(w http.ResponseWriter, r *http.Request, status int, v versioning.Version, banners ...Banner) {
	p.renderVersionWith(w, r, status, v, nil, banners...)
}

// renderVersionWith is renderVersion with a last change to the page data.
func (p *Pages) renderVersionWith(w http.ResponseWriter, r *http.Request, status int, v versioning.Version, edit func(*versionData), banners ...Banner) {
	ctx := r.Context()
	pr := auth.FromContext(ctx)
	d := versionData{Version: v, Evidence: len(v.Evidence) > 0, EvidenceHTML: p.evidenceHTML(v.Evidence)}
	if v.Parent > 0 {
		if parent, err := p.o.Rules.Get(ctx, v.Service, v.Parent); err == nil {
			d.Changes = versioning.Diff(parent.Ruleset, v.Ruleset)
		}
	} else {
		d.Changes = versioning.Diff(nil, v.Ruleset)
	}
	pol, err := p.o.Rules.Policy(ctx, v.Service)
	if err != nil {
		pol = versioning.DefaultPolicy(v.Service)
		banners = append(banners, Banner{"warn", "The approval policy could not be read; the default is assumed."})
	}
	d.ApproveWhy, d.RejectWhy = DecisionWhy(v, pol, pr)
	if v.State == versioning.StateProposed {
		if active, err := p.o.Rules.Active(ctx, v.Service); err == nil && active.Number != v.Parent {
			d.Stale, d.ActiveNumber = true, active.Number
			if d.ApproveWhy == "" {
				d.ApproveWhy = fmt.Sprintf("it is based on v%d but v%d is live now; rebase it first", v.Parent, active.Number)
			}
		}
	}
	d.CanWithdraw = v.State == versioning.StateProposed && pr != nil && (versioning.SamePerson(pr.User.Name, v.Author) || pr.Has(versioning.RoleAdmin))
	if edit != nil {
		edit(&d)
	}
	p.render(w, r, status, "version", fmt.Sprintf("%s v%d", v.Service, v.Number), "overview", d, banners...)
}

// DecisionWhy explains why the approve and reject buttons are disabled for
// pr ("" when enabled): the same rules the store enforces, said in words.
func DecisionWhy(v versioning.Version, pol versioning.Policy, pr *auth.Principal) (approve, reject string) {
	if v.State != versioning.StateProposed {
		s := "the version is " + string(v.State) + ", not awaiting a decision"
		return s, s
	}
	if pr == nil {
		return "you are not logged in", "you are not logged in"
	}
	if !pr.Has(pol.ApproverRoles...) {
		s := "this service's policy lets only these roles decide: " + versioning.JoinRoles(pol.ApproverRoles)
		approve, reject = s, s
	}
	if versioning.SamePerson(pr.User.Name, v.Author) {
		approve = "you proposed this version; four eyes: another approver must approve it"
	}
	for _, a := range v.Approvals {
		if versioning.SamePerson(a.Approver, pr.User.Name) {
			approve = fmt.Sprintf("you already approved it; %d of %d approvals so far", len(v.Approvals), pol.ApprovalsRequired)
		}
	}
	return approve, reject
}

type decision int

const (
	decisionApprove decision = iota
	decisionReject
	decisionWithdraw
	decisionRebase
)

func (p *Pages) decide(d decision) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := p.loadVersion(r)
		if err != nil {
			p.fail(w, r, err)
			return
		}
		pr := auth.FromContext(r.Context())
		comment := r.PostFormValue("comment")
		var out versioning.Version
		switch d {
		case decisionApprove:
			// The form carries the checksum of the ruleset it showed: the
			// approval is of that content, never of a later revision.
			reviewed := r.PostFormValue("checksum")
			out, err = p.o.Rules.ApproveChecksum(r.Context(), v.Service, v.Number, reviewed, pr.Actor(), comment)
			if errors.Is(err, versioning.ErrConflict) && reviewed != "" {
				// Revised since the page was opened (or a stale base, said
				// by the store's message below): show the current revision.
				if cur, gerr := p.o.Rules.Get(r.Context(), v.Service, v.Number); gerr == nil && cur.Checksum != reviewed {
					p.renderVersionWith(w, r, http.StatusConflict, cur, func(d *versionData) {
						d.Revised = &revisedNotice{Service: cur.Service, Number: cur.Number, Revision: cur.Revision}
					})
					return
				}
			}
		case decisionReject:
			out, err = p.o.Rules.Reject(r.Context(), v.Service, v.Number, pr.Actor(), comment)
		case decisionRebase:
			out, err = p.o.Rules.Rebase(r.Context(), v.Service, v.Number, pr.Actor())
		default:
			out, err = p.o.Rules.Withdraw(r.Context(), v.Service, v.Number, pr.Actor(), comment)
		}
		if err != nil {
			status, _ := httperr.Status(err)
			if status >= 500 {
				p.fail(w, r, err)
				return
			}
			if cur, ok := p.alreadyDecided(r, v, d, pr.User.Name, err); ok {
				// A second click (or a resent form) of a decision the
				// first one made: it stands, as the person meant.
				http.Redirect(w, r, fmt.Sprintf("/services/%s/rules/%d", cur.Service, cur.Number), http.StatusSeeOther)
				return
			}
			p.renderVersion(w, r, status, v, Banner{"error", httperr.Message(err)})
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/services/%s/rules/%d", out.Service, out.Number), http.StatusSeeOther)
	}
}

// alreadyDecided reports whether err, the store's refusal of name's
// decision d on the version v, refuses a second click or a resent form of a
// decision that stands, and then returns the version to show: v read
// again, holding the decision as the form made it (its comment; for an
// approval, of the checksum it showed), or, for a rebase, the version the
// rebase made, unchanged since (model.AlreadyRebased).
func (p *Pages) alreadyDecided(r *http.Request, v versioning.Version, d decision, name string, err error) (versioning.Version, bool) {
	var kind string
	switch d {
	case decisionApprove:
		kind = model.DecisionApprove
	case decisionReject:
		kind = model.DecisionReject
	case decisionWithdraw:
		kind = model.DecisionWithdraw
	case decisionRebase:
		return model.AlreadyRebased(r.Context(), p.o.Rules, v.Service, v.Number, name, err)
	default:
		return versioning.Version{}, false
	}
	cur, gerr := p.o.Rules.Get(r.Context(), v.Service, v.Number)
	return cur, gerr == nil && model.AlreadyDecided(cur, kind, name, r.PostFormValue("comment"), r.PostFormValue("checksum"))
}

type diffData struct {
	Service  string
	From, To int64
	Changes  []versioning.Change
}

func (p *Pages) diff(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	from, err1 := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
	to, err2 := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64)
	if err1 != nil || err2 != nil || from < 1 || to < 1 {
		p.fail(w, r, httperrBad("from and to must be version numbers"))
		return
	}
	a, err := p.o.Rules.Get(r.Context(), svc, from)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	b, err := p.o.Rules.Get(r.Context(), svc, to)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, "diff", fmt.Sprintf("%s v%d → v%d", svc, from, to), "overview",
		diffData{Service: svc, From: from, To: to, Changes: versioning.Diff(a.Ruleset, b.Ruleset)})
}

type proposeData struct {
	Service, YAML, Reason, Why, Error string
	Base                              int64
	Fields                            []rules.FieldError
}

func changeWhy(pr *auth.Principal) string {
	if !pr.Has(changeRoles...) {
		return "you need one of the roles: operator, approver, admin"
	}
	return ""
}

func (p *Pages) proposeForm(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d := proposeData{Service: svc, Why: changeWhy(auth.FromContext(r.Context()))}
	active, err := p.o.Rules.Active(r.Context(), svc)
	switch {
	case err == nil:
		d.Base = active.Number
		d.YAML = fmtYAML(active.Ruleset)
	case errors.Is(err, versioning.ErrNotFound):
		d.YAML = "service: " + svc + "\n"
	default:
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, "propose", "Propose a change to "+svc, "overview", d)
}

func (p *Pages) propose(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pr := auth.FromContext(r.Context())
	d := proposeData{Service: svc, YAML: r.PostFormValue("ruleset"), Reason: r.PostFormValue("reason")}
	d.Base, _ = strconv.ParseInt(r.PostFormValue("base"), 10, 64)
	var v versioning.Version
	rs, err := versioning.DecodeRuleset(versioning.FormatYAML, []byte(d.YAML))
	if err == nil {
		v, err = p.o.Rules.Propose(r.Context(), versioning.Proposal{
			Service: svc, BaseVersion: d.Base, Ruleset: rs, Author: pr.Actor(), Reason: d.Reason, Source: versioning.SourceUser,
		})
	}
	if err != nil {
		status, _ := httperr.Status(err)
		if status >= 500 {
			p.fail(w, r, err)
			return
		}
		d.Fields = httperr.Fields(err)
		if d.Fields == nil {
			d.Error = httperr.Message(err)
		} else {
			d.Error = "The proposal was not stored: fix the fields below."
		}
		p.render(w, r, status, "propose", "Propose a change to "+svc, "overview", d)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/services/%s/rules/%d", v.Service, v.Number), http.StatusSeeOther)
}

type rollbackData struct {
	Service string
	Target  versioning.Version
	// Active is the version the preview's changes are computed against;
	// the form sends its number back as "from", and the rollback applies
	// only while it is still active.
	Active     *versioning.Version
	Changes    []versioning.Change
	Why, Error string
	// Invalid names the form field Error is about ("reason", "confirm";
	// "" for none): it is marked invalid and takes the focus.
	Invalid string
	// Reason is the reason already typed, kept when the form comes back.
	Reason string
	// NoLongerValid says why Target's ruleset fails the validation of
	// today ("" when it passes): the instances would refuse it, so it is
	// not rolled back to.
	NoLongerValid string
}

// noLongerValid says why the ruleset of v, a version that went live,
// fails today's validation (a limit tightened since): "" when it passes.
func noLongerValid(v versioning.Version) string {
	err := v.Ruleset.Validate()
	if err == nil {
		return ""
	}
	msg := "v" + strconv.FormatInt(v.Number, 10) + " no longer passes validation ("
	if fs := httperr.Fields(err); len(fs) > 0 {
		msg += fs[0].Field + ": " + fs[0].Problem
		if len(fs) > 1 {
			msg += fmt.Sprintf("; and %d more", len(fs)-1)
		}
	} else {
		msg += err.Error()
	}
	return msg + "); propose a corrected version instead"
}

func (p *Pages) rollbackData(r *http.Request) (rollbackData, error) {
	target, err := p.loadVersion(r)
	if err != nil {
		return rollbackData{}, err
	}
	d := rollbackData{Service: target.Service, Target: target, Why: changeWhy(auth.FromContext(r.Context()))}
	var activeRules *rules.Ruleset
	active, err := p.o.Rules.Active(r.Context(), target.Service)
	switch {
	case err == nil:
		d.Active, activeRules = &active, active.Ruleset
	case !errors.Is(err, versioning.ErrNotFound):
		return d, err
	}
	d.Changes = versioning.Diff(activeRules, target.Ruleset)
	switch {
	case !target.State.WentLive():
		d.Why = "v" + strconv.FormatInt(target.Number, 10) + " never went live, so it is no rollback target"
	case target.Active:
		d.Why = "v" + strconv.FormatInt(target.Number, 10) + " is already active"
	default:
		if d.NoLongerValid = noLongerValid(target); d.NoLongerValid != "" {
			d.Why = d.NoLongerValid
		}
	}
	return d, nil
}

func (p *Pages) rollbackForm(w http.ResponseWriter, r *http.Request) {
	d, err := p.rollbackData(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, "rollback", "Roll back "+d.Service, "overview", d)
}

func (p *Pages) rollback(w http.ResponseWriter, r *http.Request) {
	d, err := p.rollbackData(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d.Reason = strings.TrimSpace(r.PostFormValue("reason"))
	if d.NoLongerValid != "" {
		d.Error = "Nothing was rolled back: " + d.NoLongerValid + "."
		p.render(w, r, http.StatusUnprocessableEntity, "rollback", "Roll back "+d.Service, "overview", d)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		d.Error, d.Invalid = "Confirm that you reviewed the changes.", "confirm"
		p.render(w, r, http.StatusUnprocessableEntity, "rollback", "Roll back "+d.Service, "overview", d)
		return
	}
	by := auth.FromContext(r.Context()).Actor()
	var v versioning.Version
	if f := r.PostFormValue("from"); f == "" {
		// A form without the version its preview was computed against
		// (a script's post): roll back over whatever is active.
		v, err = p.o.Rules.Rollback(r.Context(), d.Service, d.Target.Number, by, d.Reason)
	} else if from, perr := strconv.ParseInt(f, 10, 64); perr != nil {
		err = &versioning.InputError{Errors: []rules.FieldError{{Field: "from", Problem: "must be a version number"}}}
	} else {
		v, err = p.o.Rules.RollbackFrom(r.Context(), d.Service, from, d.Target.Number, by, d.Reason)
	}
	if err != nil {
		status, _ := httperr.Status(err)
		if status >= 500 {
			p.fail(w, r, err)
			return
		}
		var ce *versioning.ConflictError
		switch {
		case errors.As(err, &ce):
			if v, ok := p.sameRollback(r, d, ce, by); ok {
				// A second submission of a form already applied (a
				// double click, a resent POST): its rollback is live.
				http.Redirect(w, r, fmt.Sprintf("/services/%s/rules/%d", v.Service, v.Number), http.StatusSeeOther)
				return
			}
			// Back to a fresh preview: against the version active now.
			reason := d.Reason
			if d, err = p.rollbackData(r); err != nil {
				p.fail(w, r, err)
				return
			}
			d.Reason = reason
			now := ce.Active
			if d.Active != nil {
				now = d.Active.Number
			}
			d.Error = fmt.Sprintf("Nothing was rolled back: v%d went live after this preview was computed against v%d. "+
				"The changes below are against v%d now; review them and roll back again.", ce.Active, ce.Expected, now)
		case len(httperr.Fields(err)) > 0:
			fs := httperr.Fields(err)
			d.Error = fs[0].Field + ": " + fs[0].Problem
			if fs[0].Field == "reason" {
				d.Invalid = "reason"
			}
		default:
			d.Error = httperr.Message(err)
		}
		p.render(w, r, status, "rollback", "Roll back "+d.Service, "overview", d)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/services/%s/rules/%d", v.Service, v.Number), http.StatusSeeOther)
}

// sameRollback tells a rollback form submitted again after it was applied:
// the version active now (ce.Active) is the rollback by the same person to
// the same target, made on top of the version the form was computed
// against (ce.Expected). Its second submission must not read "nothing was
// rolled back" and invite a third.
func (p *Pages) sameRollback(r *http.Request, d rollbackData, ce *versioning.ConflictError, by versioning.Actor) (versioning.Version, bool) {
	v, err := p.o.Rules.Get(r.Context(), d.Service, ce.Active)
	if err != nil || !v.Active {
		return versioning.Version{}, false
	}
	return v, v.RollbackOf == d.Target.Number && v.Parent == ce.Expected && versioning.SamePerson(v.Author, by.Name)
}
