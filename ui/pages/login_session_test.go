package pages

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
)

// TestLoginEndsTheSessionItReplaces: logging in on a browser that holds a
// session (another user's, say) ends that session; its cookie no longer
// works anywhere it may have been copied.
func TestLoginEndsTheSessionItReplaces(t *testing.T) {
	h := newHarness(t, nil)
	old, csrf := h.session("alice")
	resp, body := h.do("GET", "/audit", old, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = h.do("POST", "/login", old, csrf, url.Values{"name": {"bob"}, "password": {harnessPassword}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	resp, _ = h.do("GET", "/audit", old, "", nil)
	require.NotEqual(t, http.StatusOK, resp.StatusCode, "the replaced session still works")
}

// TestPasswordChangeReplacesTheSessionCookie: a password change sets the
// cookie of a new session; the old id and the user's other sessions (a
// stolen cookie) no longer work.
func TestPasswordChangeReplacesTheSessionCookie(t *testing.T) {
	h := newHarness(t, nil)
	stolen, _ := h.session("alice")
	sid, csrf := h.session("alice")
	resp, body := h.do("POST", auth.PasswordPath, sid, csrf, url.Values{"current": {harnessPassword}, "next": {"a brand new password"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	var fresh string
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName {
			fresh = c.Value
		}
	}
	require.NotEmpty(t, fresh, "the response sets the new session's cookie")
	require.NotEqual(t, sid, fresh)
	for _, old := range []string{sid, stolen} {
		resp, _ = h.do("GET", "/audit", old, "", nil)
		require.NotEqual(t, http.StatusOK, resp.StatusCode, "a session from before the change still works")
	}
	resp, body = h.do("GET", "/audit", fresh, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// tokenFor creates a token of user's labelled label living ttl.
func (h *harness) tokenFor(user, label string, ttl time.Duration) (string, auth.Token) {
	h.t.Helper()
	ctx := context.Background()
	u, err := h.auth.User(ctx, user)
	require.NoError(h.t, err)
	secret, tok, err := h.auth.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, user, label, []versioning.Role{versioning.RoleOperator}, ttl)
	require.NoError(h.t, err)
	return secret, tok
}

// TestPasswordPageListsActiveTokensAndOffersRevoking: the password page
// lists the API tokens that would survive the change (active ones only:
// not revoked, not expired) and offers revoking them, checked by default.
func TestPasswordPageListsActiveTokensAndOffersRevoking(t *testing.T) {
	h := newHarness(t, nil)
	h.tokenFor("otto", "ci-deploy", 48*time.Hour)
	h.tokenFor("otto", "short-lived", time.Hour)
	_, gone := h.tokenFor("otto", "already-revoked", 48*time.Hour)
	u, err := h.auth.User(context.Background(), "otto")
	require.NoError(t, err)
	require.NoError(t, h.auth.RevokeToken(context.Background(), &auth.Principal{User: u, Roles: u.Roles}, gone.ID))
	h.clk.Advance(2 * time.Hour)
	sid, _ := h.session("otto")
	resp, body := h.do("GET", auth.PasswordPath, sid, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `<input id="revoke-tokens" name="revoke_tokens" type="checkbox" value="1" checked>`)
	require.Contains(t, body, "Also revoke my API tokens")
	require.Contains(t, body, "ci-deploy")
	require.Contains(t, body, "2026-03-03 09:00:00 UTC", "the expiry is shown")
	require.NotContains(t, body, "short-lived", "an expired token is not listed")
	require.NotContains(t, body, "already-revoked", "a revoked token is not listed")

	sid, _ = h.session("alice")
	_, body = h.do("GET", auth.PasswordPath, sid, "", nil)
	require.Contains(t, body, "No active API tokens.")
	require.Contains(t, body, `name="revoke_tokens"`, "offered even with none listed: one may be minted before the form is sent")
}

// TestPasswordChangeFormRevokesTokensWhenChecked: with the box checked the
// user's tokens stop working; unchecked, they keep working.
func TestPasswordChangeFormRevokesTokensWhenChecked(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	stolen, _ := h.tokenFor("otto", "minted-by-thief", 24*time.Hour)
	sid, csrf := h.session("otto")
	resp, body := h.do("POST", auth.PasswordPath, sid, csrf, url.Values{"current": {harnessPassword}, "next": {"a brand new password"}, "revoke_tokens": {"1"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	_, err := h.auth.TokenPrincipal(ctx, stolen)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)

	kept, _ := h.tokenFor("alice", "ci", 24*time.Hour)
	sid, csrf = h.session("alice")
	resp, body = h.do("POST", auth.PasswordPath, sid, csrf, url.Values{"current": {harnessPassword}, "next": {"a brand new password"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	_, err = h.auth.TokenPrincipal(ctx, kept)
	require.NoError(t, err)
}

// TestPasswordChangeFormRefusedKeepsChoiceAndTokens: a refused change
// revokes nothing and shows the form again with the error, the token list
// and the box as the user left it.
func TestPasswordChangeFormRefusedKeepsChoiceAndTokens(t *testing.T) {
	h := newHarness(t, nil)
	secret, _ := h.tokenFor("otto", "ci-deploy", 24*time.Hour)
	sid, csrf := h.session("otto")
	resp, body := h.do("POST", auth.PasswordPath, sid, csrf, url.Values{"current": {"a wrong guess here"}, "next": {"a brand new password"}, "revoke_tokens": {"1"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "current password: wrong password")
	require.Contains(t, body, "ci-deploy")
	require.Contains(t, body, `value="1" checked>`)
	_, err := h.auth.TokenPrincipal(context.Background(), secret)
	require.NoError(t, err)

	resp, body = h.do("POST", auth.PasswordPath, sid, csrf, url.Values{"current": {"a wrong guess here"}, "next": {"a brand new password"}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `value="1">`, "unchecked stays unchecked")
}

// A browser resolves "/\host" and "/<TAB>/host" as "//host" (WHATWG URL:
// '\' is '/' in http(s), tabs are removed), and http.Redirect cleans
// "/x/../\host" into "/\host": a logged-in user following a link with such a
// next must stay on this site.
func TestLoginNextStaysOnSiteInABrowser(t *testing.T) {
	h := newHarness(t, nil)
	id, _ := h.session("otto")
	for _, next := range []string{"/x/../\\evil.example", "/\t/evil.example", "/\\evil.example"} {
		req, err := http.NewRequest(http.MethodGet, h.srv.URL+"/login?next="+url.QueryEscape(next), nil)
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: id})
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, next)
		require.Equal(t, "/", resp.Header.Get("Location"), "next=%q", next)
	}
}
