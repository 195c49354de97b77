package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// TestHeadAnswersLikeGetWithoutBody: HEAD on a GET route (API or page)
// answers as GET would, without a body; an anonymous HEAD on a page is
// sent to the login page as a GET is.
func TestHeadAnswersLikeGetWithoutBody(t *testing.T) {
	e := newEnv(t)
	sid, _ := e.session("vera")
	for _, tc := range []struct{ path, contentType string }{
		{"/api/v1/audit", "application/json"},
		{"/audit", "text/html; charset=utf-8"},
		{"/", "text/html; charset=utf-8"},
		{"/events/overview", "text/event-stream"},
	} {
		resp, body := e.do(req{method: "HEAD", path: tc.path, session: sid})
		require.Equal(t, http.StatusOK, resp.StatusCode, tc.path)
		require.Equal(t, tc.contentType, resp.Header.Get("Content-Type"), tc.path)
		require.Empty(t, body, tc.path)
	}
	resp, _ := e.do(req{method: "HEAD", path: "/audit"})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login?next=%2Faudit", resp.Header.Get("Location"))
}

// TestWrongMethodOnPageIs405WithAllow: a page asked with a method it does
// not take answers 405 with the methods it does take (not 400).
func TestWrongMethodOnPageIs405WithAllow(t *testing.T) {
	e := newEnv(t)
	sid, csrf := e.session("vera")
	resp, body := e.do(req{method: "PUT", path: "/audit", session: sid, csrf: csrf})
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, body)
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	require.Contains(t, body, "PUT is not allowed on /audit; allowed: GET, HEAD")
	resp, _ = e.do(req{method: "DELETE", path: "/login"})
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "GET, HEAD, POST", resp.Header.Get("Allow"))
}

// TestSettingsErrorsShowNoInternalPrefix: the settings page shows the
// problem with a user's roles, not the error's package prefix.
func TestSettingsErrorsShowNoInternalPrefix(t *testing.T) {
	e := newEnv(t)
	sid, csrf := e.session("ada")
	resp, body := e.do(req{method: "POST", path: "/settings/users/ada/roles", session: sid, csrf: csrf, form: url.Values{"role": {"viewer"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, ">roles: you cannot remove your own admin role<")
	require.NotContains(t, body, "auth: invalid input")
}

// TestAuditActorFilterIgnoresCase: user names are unique ignoring case
// (migration 00301), so filtering the audit log by "alice" finds what
// "Alice" did, from the API and the page.
func TestAuditActorFilterIgnoresCase(t *testing.T) {
	e := newEnv(t)
	_, err := e.store.RecordAudit(context.Background(), versioning.AuditRecord{Actor: versioning.Actor{Name: "Alice"}, Action: "canary_start", Service: "checkout"})
	require.NoError(t, err)
	sid, _ := e.session("vera")
	resp, body := e.do(req{method: "GET", path: "/api/v1/audit?actor=alice&action=canary_start", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"actor":"Alice"`)
	resp, body = e.do(req{method: "GET", path: "/audit?actor=ALICE&action=canary_start", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "canary_start")
}
