package pages

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

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
