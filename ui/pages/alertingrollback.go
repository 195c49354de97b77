package pages

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

// alertingRollbackData is the page that rolls the alerting configuration
// back to an earlier version: what changes against the version in force,
// then a reason and the confirmation (as a rule rollback).
type alertingRollbackData struct {
	// Target and Current hold no document (alertingVersion): the changes
	// are all the page shows of the documents, masked.
	Target alertingVersion
	// Current is the version in force the changes are computed against;
	// the form sends its number back as "base", and the rollback applies
	// only while it is still the newest.
	Current alertingVersion
	// SameDocument: the target's document is the one in force.
	SameDocument bool
	Changes      []versioning.Change
	// Why disables the form.
	Why, Error string
	// Invalid names the form field Error is about ("comment", "confirm").
	Invalid string
	// Comment is the reason already typed, kept when the form comes back.
	Comment string
}

func (p *Pages) alertingRollbackData(r *http.Request) (alertingRollbackData, error) {
	if p.o.AlertRouting == nil {
		return alertingRollbackData{}, fmt.Errorf("%w: the alerting configuration is not stored here", httperr.ErrUnavailable)
	}
	n, err := intParam(r, "n")
	if err != nil {
		return alertingRollbackData{}, err
	}
	target, err := p.o.AlertRouting.Get(r.Context(), n)
	if err != nil {
		return alertingRollbackData{}, err
	}
	current, err := p.o.AlertRouting.Latest(r.Context())
	if err != nil {
		// The target exists, so a version is in force.
		return alertingRollbackData{}, err
	}
	d := alertingRollbackData{Target: versionInfo(target), Current: versionInfo(current), SameDocument: target.Document == current.Document}
	if d.Changes, err = documentDiff(current.Document, target.Document); err != nil {
		return d, err
	}
	if target.Number == current.Number {
		d.Why = fmt.Sprintf("version %d is in force", target.Number)
	}
	return d, nil
}

func (p *Pages) renderAlertingRollback(w http.ResponseWriter, r *http.Request, status int, d alertingRollbackData) {
	p.render(w, r, status, "alertingrollback", "Roll back the alerting configuration", "settings", d)
}

func (p *Pages) alertingRollbackForm(w http.ResponseWriter, r *http.Request) {
	d, err := p.alertingRollbackData(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.renderAlertingRollback(w, r, http.StatusOK, d)
}

// rollbackAlerting stores the target's document as a new version. The
// store announces it as it announces a save, so the engine applies it the
// same way.
func (p *Pages) rollbackAlerting(w http.ResponseWriter, r *http.Request) {
	d, err := p.alertingRollbackData(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d.Comment = strings.TrimSpace(r.PostFormValue("comment"))
	if r.PostFormValue("confirm") != "yes" {
		d.Error, d.Invalid = "Confirm that you reviewed the changes.", "confirm"
		p.renderAlertingRollback(w, r, http.StatusUnprocessableEntity, d)
		return
	}
	base, perr := strconv.ParseInt(r.PostFormValue("base"), 10, 64)
	if perr != nil || base < 1 {
		p.fail(w, r, httperrBad("base must be the version the preview was computed against"))
		return
	}
	actor := auth.FromContext(r.Context()).Actor()
	_, err = p.o.AlertRouting.Rollback(r.Context(), configstore.RollbackRequest{To: d.Target.Number, Base: base,
		Author: actor.Name, Roles: actor.Roles, Comment: d.Comment})
	if err == nil {
		http.Redirect(w, r, "/settings#alerting", http.StatusSeeOther)
		return
	}
	status, _ := httperr.Status(err)
	if status >= 500 {
		p.fail(w, r, err)
		return
	}
	switch {
	case errors.Is(err, configstore.ErrConflict):
		// Back to a fresh preview: against the version in force now.
		comment := d.Comment
		if d, err = p.alertingRollbackData(r); err != nil {
			p.fail(w, r, err)
			return
		}
		d.Comment = comment
		if p.sameAlertingRollback(d, base, actor) {
			// A second submission of a form already applied (a double
			// click, a resent POST): its rollback is in force.
			http.Redirect(w, r, "/settings#alerting", http.StatusSeeOther)
			return
		}
		d.Error = fmt.Sprintf("Nothing was rolled back: version %d was saved after this preview was computed against version %d. "+
			"The changes below are against version %d now; review them and roll back again.", d.Current.Number, base, d.Current.Number)
	case errors.Is(err, alerts.ErrInvalid):
		d.Error = strings.TrimPrefix(httperr.Message(err), alerts.ErrInvalid.Error()+": ")
		if strings.HasPrefix(d.Error, "comment:") {
			d.Invalid = "comment"
		}
	default:
		d.Error = httperr.Message(err)
	}
	p.renderAlertingRollback(w, r, status, d)
}

// sameAlertingRollback tells a rollback form submitted again after it was
// applied: the version in force is base+1, saved by the same person with
// the target's document.
func (p *Pages) sameAlertingRollback(d alertingRollbackData, base int64, by versioning.Actor) bool {
	c := d.Current
	return c.Number == base+1 && d.SameDocument && versioning.SamePerson(c.Author, by.Name)
}

// documentDiff lists the differences from the alerting document a to b
// (versioning.DiffJSON: receivers by name, routes by position), masked, so
// no secret shows; a secret of b that differs from a's behind the same mask
// says so (configstore.MaskChanged).
func documentDiff(a, b string) ([]versioning.Change, error) {
	ma, err := configstore.Mask(a)
	if err != nil {
		return nil, err
	}
	mb, err := configstore.MaskChanged(b, a, "(another secret)")
	if err != nil {
		return nil, err
	}
	var ta, tb any
	for _, d := range []struct {
		text string
		v    *any
	}{{ma, &ta}, {mb, &tb}} {
		dec := json.NewDecoder(strings.NewReader(d.text))
		dec.UseNumber()
		if err := dec.Decode(d.v); err != nil {
			return nil, fmt.Errorf("pages: alerting document: %w", err)
		}
	}
	return versioning.DiffJSON(ta, tb), nil
}
