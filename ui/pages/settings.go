package pages

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/go-chi/chi/v5"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

type settingsData struct {
	Users         []auth.User
	Roles         []versioning.Role
	Policies      []versioning.Policy
	Error, Notice string
}

var allRoles = []versioning.Role{versioning.RoleViewer, versioning.RoleOperator, versioning.RoleApprover, versioning.RoleAdmin}

func (p *Pages) settings(w http.ResponseWriter, r *http.Request) {
	p.renderSettings(w, r, http.StatusOK, "", "")
}

func (p *Pages) renderSettings(w http.ResponseWriter, r *http.Request, status int, errText, notice string) {
	ctx := r.Context()
	users, err := p.o.Auth.Users(ctx)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d := settingsData{Users: users, Roles: allRoles, Error: errText, Notice: notice}
	infos, err := p.o.Rules.Services(ctx)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	for _, in := range infos {
		pol, err := p.o.Rules.Policy(ctx, in.Name)
		if err != nil {
			p.fail(w, r, err)
			return
		}
		d.Policies = append(d.Policies, pol)
	}
	p.render(w, r, status, "settings", "Settings", "settings", d)
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
		_, err = p.o.Auth.CreateUser(r.Context(), name, pw, formRoles(r), true)
	}
	if err != nil {
		p.settingsError(w, r, err)
		return
	}
	p.renderSettings(w, r, http.StatusOK, "", fmt.Sprintf("User %s created. One-time password (shown once): %s", name, pw))
}

func (p *Pages) settingsError(w http.ResponseWriter, r *http.Request, err error) {
	status, _ := httperr.Status(err)
	if status >= 500 {
		p.fail(w, r, err)
		return
	}
	p.renderSettings(w, r, status, httperr.Message(err), "")
}

func (p *Pages) setRoles(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	pr := auth.FromContext(r.Context())
	roles := formRoles(r)
	if name == pr.User.Name && !slices.Contains(roles, versioning.RoleAdmin) {
		p.settingsError(w, r, fmt.Errorf("%w: roles: you cannot remove your own admin role", auth.ErrInvalid))
		return
	}
	if err := p.o.Auth.SetRoles(r.Context(), name, roles); err != nil {
		p.settingsError(w, r, err)
		return
	}
	http.Redirect(w, r, "/settings", http.StatusSeeOther)
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
	n, err := strconv.Atoi(r.PostFormValue("approvals"))
	if err != nil {
		p.settingsError(w, r, httperrBad("approvals: must be a number"))
		return
	}
	pol.ApprovalsRequired = n
	pol.ManualOnly = r.PostFormValue("manual_only") == "yes"
	if _, err := p.o.Rules.SetPolicy(r.Context(), pol, auth.FromContext(r.Context()).Actor()); err != nil {
		p.settingsError(w, r, err)
		return
	}
	http.Redirect(w, r, "/settings", http.StatusSeeOther)
}
