package pages

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

type accountData struct {
	Tokens        []auth.Token
	Secret, Error string
}

func (p *Pages) account(w http.ResponseWriter, r *http.Request) {
	p.renderAccount(w, r, http.StatusOK, accountData{})
}

func (p *Pages) renderAccount(w http.ResponseWriter, r *http.Request, status int, d accountData) {
	toks, err := p.o.Auth.Tokens(r.Context(), auth.FromContext(r.Context()).User.Name)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	d.Tokens = toks
	p.render(w, r, status, "account", "Your account", "account", d)
}

func (p *Pages) accountError(w http.ResponseWriter, r *http.Request, err error) {
	status, _ := httperr.Status(err)
	if status >= 500 {
		p.fail(w, r, err)
		return
	}
	p.renderAccount(w, r, status, accountData{Error: httperr.Message(err)})
}

// errTokenBySession: a bearer token must not mint or revoke tokens (a
// read-only token would grant itself its user's other roles, or revoke the
// user's other tokens, and bearer requests skip CSRF): that takes the user
// at a browser, logged in.
var errTokenBySession = fmt.Errorf("%w: API tokens are created and revoked from a logged-in browser session, not with an API token", auth.ErrForbidden)

func (p *Pages) createToken(w http.ResponseWriter, r *http.Request) {
	pr := auth.FromContext(r.Context())
	if pr.Session == nil {
		p.fail(w, r, errTokenBySession)
		return
	}
	_ = r.ParseForm()
	var scopes []versioning.Role
	for _, s := range r.PostForm["scope"] {
		scopes = append(scopes, versioning.Role(s))
	}
	ttl, err := time.ParseDuration(r.PostFormValue("ttl"))
	if err != nil {
		p.accountError(w, r, httperrBad("ttl: must be a duration"))
		return
	}
	secret, _, err := p.o.Auth.CreateToken(r.Context(), pr, pr.User.Name, r.PostFormValue("label"), scopes, ttl)
	if err != nil {
		p.accountError(w, r, err)
		return
	}
	p.renderAccount(w, r, http.StatusCreated, accountData{Secret: secret})
}

func (p *Pages) revokeToken(w http.ResponseWriter, r *http.Request) {
	pr := auth.FromContext(r.Context())
	if pr.Session == nil {
		p.fail(w, r, errTokenBySession)
		return
	}
	if err := p.o.Auth.RevokeToken(r.Context(), pr, chi.URLParam(r, "id")); err != nil {
		p.accountError(w, r, err)
		return
	}
	http.Redirect(w, r, "/account", http.StatusSeeOther)
}
