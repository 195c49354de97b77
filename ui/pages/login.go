package pages

import (
	"errors"
	"net/http"

	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/internal/httperr"
)

type loginData struct{ Name, Next, Error string }

func (p *Pages) loginForm(w http.ResponseWriter, r *http.Request) {
	if auth.FromContext(r.Context()) != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	p.render(w, r, http.StatusOK, "login", "Log in", "", loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

func (p *Pages) login(w http.ResponseWriter, r *http.Request) {
	name, pw, next := r.PostFormValue("name"), r.PostFormValue("password"), safeNext(r.PostFormValue("next"))
	s, u, err := p.o.Auth.Login(r.Context(), name, pw, p.o.Auth.ClientAddr(r))
	if err != nil {
		status, _ := httperr.Status(err)
		msg := httperr.Message(err)
		if errors.Is(err, auth.ErrUnauthenticated) {
			msg = "Wrong user name or password."
		}
		p.render(w, r, status, "login", "Log in", "", loginData{Name: name, Next: next, Error: msg})
		return
	}
	// A session this browser held (another user's, or the same user's
	// before) ends: its cookie, wherever it was copied, no longer works.
	if prev := auth.FromContext(r.Context()); prev != nil && prev.Session != nil {
		if err := p.o.Auth.Logout(r.Context(), prev); err != nil {
			p.o.Logger.Warn("ui: the session replaced by a login was not ended", "user", prev.User.Name, "err", err)
		}
	}
	auth.SetCookie(w, s, p.o.Clock.Now())
	if u.MustChange {
		next = auth.PasswordPath
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (p *Pages) logout(w http.ResponseWriter, r *http.Request) {
	if err := p.o.Auth.Logout(r.Context(), auth.FromContext(r.Context())); err != nil {
		p.fail(w, r, err)
		return
	}
	auth.ClearCookie(w)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// passwordData is the password form: the user's API tokens that are still
// valid (which a password change leaves valid unless RevokeTokens is
// checked) and the form's state.
type passwordData struct {
	Error        string
	Tokens       []auth.Token
	RevokeTokens bool
}

func (p *Pages) passwordForm(w http.ResponseWriter, r *http.Request) {
	p.renderPassword(w, r, http.StatusOK, passwordData{RevokeTokens: true})
}

// renderPassword shows the password form with the user's active API
// tokens, those a change would leave valid unless revoked with it.
func (p *Pages) renderPassword(w http.ResponseWriter, r *http.Request, status int, d passwordData) {
	toks, err := p.o.Auth.Tokens(r.Context(), auth.FromContext(r.Context()).User.Name)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	now := p.o.Clock.Now()
	for _, t := range toks {
		if t.Active(now) {
			d.Tokens = append(d.Tokens, t)
		}
	}
	p.render(w, r, status, "password", "Change password", "", d)
}

func (p *Pages) changePassword(w http.ResponseWriter, r *http.Request) {
	pr := auth.FromContext(r.Context())
	if pr.Session == nil {
		p.fail(w, r, auth.ErrForbidden)
		return
	}
	// Every session of the user ends, this one included: it goes on
	// under a new id, set here, and a copy of the old cookie is useless.
	// With the box checked the user's API tokens are revoked with it (one
	// may have been minted from a stolen session); the box is offered even
	// when no token is listed, as one may be minted after the form is shown.
	revoke := r.PostFormValue("revoke_tokens") != ""
	var s *auth.Session
	var err error
	if revoke {
		s, _, err = p.o.Auth.ChangePasswordRevokingTokens(r.Context(), pr.User.Name, r.PostFormValue("current"), r.PostFormValue("next"), pr.Session)
	} else {
		s, err = p.o.Auth.ChangePassword(r.Context(), pr.User.Name, r.PostFormValue("current"), r.PostFormValue("next"), pr.Session)
	}
	if err != nil {
		status, _ := httperr.Status(err)
		p.renderPassword(w, r, status, passwordData{Error: httperr.Message(err), RevokeTokens: revoke})
		return
	}
	auth.SetCookie(w, s, p.o.Clock.Now())
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
