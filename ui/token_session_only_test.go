package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// TestAPITokenCannotCreateOrRevokeTokens: API tokens are created and
// revoked only from a logged-in browser session. A read-only token of a
// user who also holds approver must not mint itself an approver token
// (bearer requests skip CSRF), nor revoke its user's other tokens.
func TestAPITokenCannotCreateOrRevokeTokens(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	carol, err := e.auth.CreateUser(ctx, "carol", testPassword, []versioning.Role{versioning.RoleViewer, versioning.RoleApprover}, false)
	require.NoError(t, err)
	readTok, _, err := e.auth.CreateToken(ctx, principal(carol), "carol", "dashboards", []versioning.Role{versioning.RoleViewer}, time.Hour)
	require.NoError(t, err)
	ciTok, ci, err := e.auth.CreateToken(ctx, principal(carol), "carol", "ci", []versioning.Role{versioning.RoleApprover}, 0)
	require.NoError(t, err)

	resp, body := e.do(req{method: "POST", path: "/account/tokens", bearer: readTok,
		form: url.Values{"label": {"escalated"}, "scope": {"approver"}, "ttl": {"0s"}}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.Contains(t, body, "browser session")
	require.Empty(t, regexp.MustCompile(`gov_[A-Za-z0-9]+_[A-Za-z0-9_-]+`).FindString(body), "a token was minted")
	resp, body = e.do(req{method: "POST", path: "/account/tokens", bearer: readTok,
		form: url.Values{"label": {"same"}, "scope": {"viewer"}, "ttl": {"1m"}}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "not even a narrower one: %s", body)

	resp, body = e.do(req{method: "POST", path: "/account/tokens/" + ci.ID + "/revoke", bearer: readTok})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	_, err = e.auth.TokenPrincipal(ctx, ciTok)
	require.NoError(t, err, "the other token still works")
	toks, err := e.auth.Tokens(ctx, "carol")
	require.NoError(t, err)
	require.Len(t, toks, 2, "no token created")

	// The read-only token still only reads.
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/versions/2/approve", json: `{}`, bearer: readTok})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	resp, _ = e.do(req{method: "GET", path: "/account", bearer: readTok})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// From her browser session carol creates and revokes tokens as before.
	sid, csrf := e.session("carol")
	resp, body = e.do(req{method: "POST", path: "/account/tokens", session: sid, csrf: csrf,
		form: url.Values{"label": {"deploy"}, "scope": {"approver"}, "ttl": {"1h"}}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	resp, _ = e.do(req{method: "POST", path: "/account/tokens/" + ci.ID + "/revoke", session: sid, csrf: csrf})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}
