package pages

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
	"governor.dev/governor/ui/model"
)

type settingsData struct {
	Users         []auth.User
	Roles         []versioning.Role
	Policies      []policyRow
	Alerting      alertingData
	Error, Notice string
}

// policyRow is one service's approval policy and auto-apply band as the
// form shows it: the stored values, or what was submitted with the errors.
type policyRow struct {
	versioning.Policy
	// Custom: the policy sets its own band; otherwise the engine's
	// configured band applies, shown as ConfigBand when known.
	Custom                    bool
	Approvals                 string
	MaxChange, Floor, Ceiling string
	ConfigBand                *versioning.AutoApplyBand
	ConfigManual              bool
	// DefaultText describes the engine's configured band.
	DefaultText string
	Errors      map[string]string
	FieldErrs   []rules.FieldError
}

// alertingData is the alerting configuration section.
type alertingData struct {
	Enabled bool
	// Number is the version in force (0: none saved; the bootstrap applies).
	Number  int64
	Current alertingVersion
	// Document is the version in force, masked, or the document a failed
	// save submitted.
	Document string
	Comment  string
	Summary  *configstore.Summary
	History  []alertingVersion
	Error    string
	// Invalid marks the document field as the cause of Error.
	Invalid bool
	// Viewed is an earlier version opened from the history, ViewedDocument
	// its document masked.
	Viewed         *alertingVersion
	ViewedDocument string
}

// alertingVersion is a saved alerting version as the pages show it: its
// number, who saved it, when and why. It never holds the document, whose
// receivers carry secrets (routing keys, webhook URLs, SMTP passwords):
// template data gets a document only through configstore.Mask or
// MaskChanged, so that no template, as written now or edited later, can
// show a secret.
type alertingVersion struct {
	Number    int64
	Author    string
	Comment   string
	CreatedAt time.Time
}

func versionInfo(v configstore.Version) alertingVersion {
	return alertingVersion{Number: v.Number, Author: v.Author, Comment: v.Comment, CreatedAt: v.CreatedAt}
}

var allRoles = []versioning.Role{versioning.RoleViewer, versioning.RoleOperator, versioning.RoleApprover, versioning.RoleAdmin}

func (p *Pages) settings(w http.ResponseWriter, r *http.Request) {
	p.renderSettings(w, r, http.StatusOK, settingsState{})
}

// settingsState carries what a failed form submitted back to the page.
type settingsState struct {
	errText, notice string
	policy          *policyRow
	alerting        *alertingData
}

func (p *Pages) renderSettings(w http.ResponseWriter, r *http.Request, status int, st settingsState) {
	ctx := r.Context()
	users, err := p.o.Auth.Users(ctx)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d := settingsData{Users: users, Roles: allRoles, Error: st.errText, Notice: st.notice}
	infos, err := p.o.Rules.Services(ctx)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	for _, in := range infos {
		if st.policy != nil && st.policy.Service == in.Name {
			d.Policies = append(d.Policies, *st.policy)
			continue
		}
		pol, err := p.o.Rules.Policy(ctx, in.Name)
		if err != nil {
			p.fail(w, r, err)
			return
		}
		d.Policies = append(d.Policies, p.policyRow(pol))
	}
	if st.alerting != nil {
		d.Alerting = *st.alerting
	} else if d.Alerting, err = p.alertingSection(r); err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, status, "settings", "Settings", "settings", d)
}

// bandText says a band in words: "10% of the ceiling per hour, floor
// 50 req/s, no ceiling".
func bandText(b versioning.AutoApplyBand, manual bool) string {
	bound := func(name string, v float64) string {
		if v == 0 {
			return "no " + name
		}
		return name + " " + fmtNum(v) + " req/s"
	}
	s := fmtNum(b.MaxChangePerHour*100) + "% of the ceiling per hour, " + bound("floor", b.Floor) + ", " + bound("ceiling", b.Ceiling)
	if manual {
		s += "; manual (never applies itself)"
	}
	return s
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func (p *Pages) policyRow(pol versioning.Policy) policyRow {
	row := policyRow{Policy: pol, Approvals: strconv.Itoa(pol.ApprovalsRequired)}
	if p.o.ConfigBand != nil {
		b, manual := p.o.ConfigBand(pol.Service)
		row.ConfigBand, row.ConfigManual = &b, manual
		row.DefaultText = bandText(b, manual)
	} else {
		row.DefaultText = "the band in the engine's configuration (bands.default or bands.services)"
	}
	if pol.Band != nil {
		row.Custom = true
		row.MaxChange, row.Floor, row.Ceiling = fmtNum(pol.Band.MaxChangePerHour), fmtNum(pol.Band.Floor), fmtNum(pol.Band.Ceiling)
	} else if row.ConfigBand != nil {
		row.MaxChange, row.Floor, row.Ceiling = fmtNum(row.ConfigBand.MaxChangePerHour), fmtNum(row.ConfigBand.Floor), fmtNum(row.ConfigBand.Ceiling)
	}
	return row
}

// alertingSection reads the saved alerting configuration: the newest
// version masked, its receivers and routes, and the history.
func (p *Pages) alertingSection(r *http.Request) (alertingData, error) {
	if p.o.AlertRouting == nil {
		return alertingData{}, nil
	}
	d := alertingData{Enabled: true}
	v, err := p.o.AlertRouting.Latest(r.Context())
	switch {
	case err == nil:
		d.Number, d.Current = v.Number, versionInfo(v)
		if d.Document, err = configstore.Mask(v.Document); err != nil {
			return d, err
		}
		if c, err := v.Config(); err == nil {
			s := configstore.Summarize(c)
			d.Summary = &s
		}
	case errors.Is(err, alerts.ErrNotFound):
		d.Document = p.o.AlertBootstrap
		if d.Document != "" {
			if masked, err := configstore.Mask(d.Document); err == nil {
				d.Document = masked
			}
		}
	default:
		return d, err
	}
	history, err := p.o.AlertRouting.List(r.Context(), 20)
	if err != nil {
		return d, err
	}
	for _, h := range history {
		d.History = append(d.History, versionInfo(h))
	}
	if q := r.URL.Query().Get("alerting_version"); q != "" && r.Method == http.MethodGet {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 1 {
			return d, httperrBad("alerting_version must be a version number")
		}
		v, err := p.o.AlertRouting.Get(r.Context(), n)
		if err != nil {
			return d, err
		}
		if d.ViewedDocument, err = configstore.Mask(v.Document); err != nil {
			return d, err
		}
		viewed := versionInfo(v)
		d.Viewed = &viewed
	}
	return d, nil
}

func formRoles(r *http.Request) []versioning.Role {
	_ = r.ParseForm()
	var out []versioning.Role
	for _, s := range r.PostForm["role"] {
		out = append(out, versioning.Role(s))
	}
	return out
}

func (p *Pages) createUser(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("name")
	pw, err := p.o.Auth.NewOneTimePassword()
	if err == nil {
		_, err = p.o.Auth.CreateUserAs(r.Context(), auth.FromContext(r.Context()), name, pw, formRoles(r), true)
	}
	if err != nil {
		p.settingsError(w, r, err)
		return
	}
	p.renderSettings(w, r, http.StatusOK, settingsState{notice: fmt.Sprintf("User %s created. One-time password (shown once): %s", name, pw)})
}

func (p *Pages) settingsError(w http.ResponseWriter, r *http.Request, err error) {
	status, _ := httperr.Status(err)
	if status >= 500 {
		p.fail(w, r, err)
		return
	}
	p.renderSettings(w, r, status, settingsState{errText: httperr.Message(err)})
}

func (p *Pages) setRoles(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	pr := auth.FromContext(r.Context())
	roles := formRoles(r)
	if name == pr.User.Name && !slices.Contains(roles, versioning.RoleAdmin) {
		p.settingsError(w, r, fmt.Errorf("%w: roles: you cannot remove your own admin role", auth.ErrInvalid))
		return
	}
	if err := p.o.Auth.SetRolesAs(r.Context(), pr, name, roles); err != nil {
		p.settingsError(w, r, err)
		return
	}
	http.Redirect(w, r, "/settings", http.StatusSeeOther)
}

// policyForm reads the policy form into pol; the problems are named by
// the store's field names (approvals_required, band.floor, ...).
func policyForm(r *http.Request, pol versioning.Policy, row *policyRow) (versioning.Policy, []rules.FieldError) {
	var errs []rules.FieldError
	row.Approvals = strings.TrimSpace(r.PostFormValue("approvals"))
	if n, err := strconv.Atoi(row.Approvals); err != nil {
		errs = append(errs, rules.FieldError{Field: "approvals_required", Problem: "must be a whole number"})
	} else {
		pol.ApprovalsRequired = n
	}
	pol.ManualOnly = r.PostFormValue("manual_only") == "yes"
	row.Custom = r.PostFormValue("band") == "custom"
	row.MaxChange = strings.TrimSpace(r.PostFormValue("max_change_per_hour"))
	row.Floor = strings.TrimSpace(r.PostFormValue("floor"))
	row.Ceiling = strings.TrimSpace(r.PostFormValue("ceiling"))
	if !row.Custom {
		pol.Band = nil
		return pol, errs
	}
	var b versioning.AutoApplyBand
	for _, f := range []struct {
		name, raw string
		dst       *float64
	}{{"band.max_change_per_hour", row.MaxChange, &b.MaxChangePerHour}, {"band.floor", row.Floor, &b.Floor}, {"band.ceiling", row.Ceiling, &b.Ceiling}} {
		if f.raw == "" {
			continue // 0: no bound
		}
		v, err := strconv.ParseFloat(f.raw, 64)
		if err != nil {
			errs = append(errs, rules.FieldError{Field: f.name, Problem: fmt.Sprintf("%q is not a number", f.raw)})
			continue
		}
		*f.dst = v
	}
	pol.Band = &b
	return pol, errs
}

func (p *Pages) setPolicy(w http.ResponseWriter, r *http.Request) {
	svc, err := serviceParam(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pol, err := p.o.Rules.Policy(r.Context(), svc)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	row := p.policyRow(pol)
	next, errs := policyForm(r, pol, &row)
	// The form's revision is the one the admin saw: a change saved since
	// is a conflict, not something to revert silently.
	if rev, err := strconv.ParseInt(r.PostFormValue("revision"), 10, 64); err == nil && rev > 0 {
		next.Revision = rev
	}
	if len(errs) == 0 {
		_, err = p.o.Rules.SetPolicy(r.Context(), next, auth.FromContext(r.Context()).Actor())
		if err == nil {
			http.Redirect(w, r, "/settings#policy-"+svc, http.StatusSeeOther)
			return
		}
		if status, _ := httperr.Status(err); status >= 500 {
			p.fail(w, r, err)
			return
		}
		if errs = httperr.Fields(err); errs == nil {
			errs = []rules.FieldError{{Field: "policy", Problem: httperr.Message(err)}}
		}
	}
	row.Policy.ManualOnly = next.ManualOnly
	row.FieldErrs = errs
	row.Errors = map[string]string{}
	for _, e := range errs {
		row.Errors[e.Field] = e.Problem
	}
	p.renderSettings(w, r, http.StatusUnprocessableEntity, settingsState{
		errText: fmt.Sprintf("The policy of %s was not saved: fix the fields marked below.", svc), policy: &row})
}

// saveAlerting stores a new version of the alerting document. The admin
// edits the masked document; masks keep the saved secrets.
func (p *Pages) saveAlerting(w http.ResponseWriter, r *http.Request) {
	if p.o.AlertRouting == nil {
		p.fail(w, r, fmt.Errorf("%w: the alerting configuration is not stored here", httperr.ErrUnavailable))
		return
	}
	pr := auth.FromContext(r.Context())
	base, _ := strconv.ParseInt(r.PostFormValue("base"), 10, 64)
	doc, comment := r.PostFormValue("document"), strings.TrimSpace(r.PostFormValue("comment"))
	// The store records the audit entry in the save's transaction.
	actor := pr.Actor()
	_, err := saveAlerting(r, p.o.AlertRouting, p.o.AlertBootstrap, configstore.SaveRequest{Document: doc, Base: base,
		Author: actor.Name, Roles: actor.Roles, Comment: comment})
	if err != nil {
		status, _ := httperr.Status(err)
		if status >= 500 {
			p.fail(w, r, err)
			return
		}
		d, rerr := p.alertingSection(r)
		if rerr != nil {
			p.fail(w, r, rerr)
			return
		}
		d.Document, d.Comment, d.Error = doc, comment, httperr.Message(err)
		d.Invalid = errors.Is(err, alerts.ErrInvalid)
		p.renderSettings(w, r, status, settingsState{errText: "The alerting configuration was not saved: see below.", alerting: &d})
		return
	}
	http.Redirect(w, r, "/settings#alerting", http.StatusSeeOther)
}

// saveAlerting saves a version; the first one (base 0) keeps the secrets
// of the configuration file's document where it holds masks.
func saveAlerting(r *http.Request, st model.AlertRouting, bootstrap string, req configstore.SaveRequest) (configstore.Version, error) {
	if req.Base == 0 && bootstrap != "" {
		doc, err := configstore.Unmask(req.Document, bootstrap)
		if err != nil {
			return configstore.Version{}, err
		}
		req.Document = doc
	}
	return st.Save(r.Context(), req)
}
