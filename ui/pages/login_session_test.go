package pages

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
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
