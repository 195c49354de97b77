package pages

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

// AuditActions are the actions the filter offers.
var AuditActions = []versioning.Action{
	versioning.ActionPropose, versioning.ActionApprove, versioning.ActionReject, versioning.ActionWithdraw,
	versioning.ActionActivate, versioning.ActionAutoApply, versioning.ActionPublish, versioning.ActionRollback,
	versioning.ActionEmergency, versioning.ActionPolicy, versioning.ActionRebase, versioning.ActionRevise,
	versioning.ActionUndeliverable, versioning.ActionRequeue, versioning.ActionRenumber, versioning.ActionLogin,
	versioning.ActionLoginFailure, versioning.ActionLogout, versioning.ActionTokenCreate, versioning.ActionTokenRevoke,
	auth.ActionUserCreate, auth.ActionUserRoles, auth.ActionUserDelete, auth.ActionAdminRecover, auth.ActionPasswordChange, model.ActionAlertConfig,
}

type auditData struct {
	Filter  versioning.AuditFilter
	Entries []versioning.AuditEntry
	// Check is what this view verified of the chain: the whole of it, or
	// the entries since the last check (see versioning.AuditChecker).
	Check     versioning.AuditCheck
	VerifyErr string
	// WholeLink asks for a walk of the whole chain now.
	WholeLink string
	// Unverified is why the chain could not be checked (the store did not
	// answer): not a broken chain, which VerifyErr reports.
	Unverified string
	Actions    []versioning.Action
	Older      string
}

// auditPage is how many entries the audit page shows at once, newest
// first; Older pages back.
const auditPage = 100

func (p *Pages) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// One more than a page: whether it comes back says whether an older
	// page holds anything.
	f := versioning.AuditFilter{Service: q.Get("service"), Actor: q.Get("actor"), Action: versioning.Action(q.Get("action")), Newest: true, Limit: auditPage + 1}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			p.fail(w, r, httperrBad("before must be a sequence number"))
			return
		}
		f.BeforeSeq = n
	}
	entries, err := p.o.Rules.Audit(r.Context(), f)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	older := len(entries) > auditPage
	entries = entries[:min(len(entries), auditPage)]
	d := auditData{Filter: f, Entries: entries, Actions: AuditActions}
	// ?verify=whole walks the whole chain now instead of the entries since
	// the last check.
	d.Check, err = p.o.AuditChecker.Check(r.Context(), q.Get("verify") == "whole")
	wq := url.Values{}
	for k, v := range q {
		wq[k] = v
	}
	wq.Set("verify", "whole")
	d.WholeLink = "/audit?" + wq.Encode()
	q.Del("verify")
	var ce *versioning.ChainError
	switch {
	case errors.As(err, &ce):
		d.VerifyErr = fmt.Sprintf("entry %d: %s", ce.Seq, ce.Problem)
	case errors.Is(err, versioning.ErrTampered):
		d.VerifyErr = httperr.Message(err)
	case err != nil:
		d.Unverified = httperr.Message(err)
	}
	if older {
		q.Set("before", strconv.FormatInt(entries[len(entries)-1].Seq, 10))
		d.Older = "/audit?" + url.Values(q).Encode()
	}
	p.render(w, r, http.StatusOK, "audit", "Audit log", "audit", d)
}
