package pages

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

type accountData struct {
	Tokens        []auth.Token
	Secret, Error string
	// TTLs are the token lifetimes the form offers, none over the
	// longest allowed.
	TTLs []ttlChoice
	// Now tells expired tokens from active ones.
	Now time.Time
}

// ttlChoice is a token lifetime the form offers.
type ttlChoice struct {
	Value, Label string
	Selected     bool
}

// ttlChoices are the lifetimes of the token form: those of a few common
// ones that are allowed, the default selected (and added if it is none of
// them), each labelled as auth's errors name lifetimes (auth.FormatTTL).
func ttlChoices(def, maxTTL time.Duration) []ttlChoice {
	const day = 24 * time.Hour
	choice := func(d time.Duration) ttlChoice {
		return ttlChoice{Value: formValue(d), Label: auth.FormatTTL(d), Selected: d == def}
	}
	var out []ttlChoice
	seen := false
	for _, d := range []time.Duration{7 * day, 30 * day, 90 * day, 365 * day} {
		if def < d && !seen {
			out = append(out, choice(def))
			seen = true
		}
		if d > maxTTL {
			break
		}
		seen = seen || d == def
		out = append(out, choice(d))
	}
	if !seen {
		out = append(out, choice(def))
	}
	return out
}

// formValue writes d as time.ParseDuration reads it, in whole hours when
// it is ("2160h").
func formValue(d time.Duration) string {
	if d%time.Hour == 0 {
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return d.String()
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
	d.Now = p.o.Clock.Now()
	d.TTLs = ttlChoices(p.o.Auth.TokenTTLs())
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
	if err != nil || ttl <= 0 {
		p.accountError(w, r, httperrBad("ttl: must be a positive duration"))
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
