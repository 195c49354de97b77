package ui_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// TestAPIDecodeErrorsNameTheField: a value of the wrong type or a field the
// operation does not have is reported under that field's name, not "body".
func TestAPIDecodeErrorsNameTheField(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, csrf := e.session("ada")
	for _, tc := range []struct {
		method, path, body, field, problem string
	}{
		{"POST", "/api/v1/services/checkout/rollback", `{"to":"1","reason":"x"}`, "to", "must be an integer, not a JSON string"},
		{"POST", "/api/v1/services/checkout/rollback", `{"to":1.5,"reason":"x"}`, "to", "must be an integer"},
		{"POST", "/api/v1/services/checkout/rollback", `{"to":1,"reason":"x","bogus":1}`, "bogus", "is not a field of this operation"},
		{"POST", "/api/v1/services/checkout/canary", `{"version":1,"percent":"10"}`, "percent", "must be a number"},
		{"PUT", "/api/v1/services/checkout/policy", `{"manual_only":"yes"}`, "manual_only", "must be true or false"},
		{"PUT", "/api/v1/services/checkout/policy", `{"approver_roles":"admin"}`, "approver_roles", "must be an array"},
		{"PUT", "/api/v1/services/checkout/policy", `{"band":{"floor":"x"}}`, "band.floor", "must be a number"},
		{"PUT", "/api/v1/services/checkout/policy", `{"band":{"roof":1}}`, "band.roof", "not a field"},
		{"POST", "/api/v1/services/checkout/rollback", `[1]`, "body", "not valid JSON"},
		{"POST", "/api/v1/services/checkout/rollback", `{"to":`, "body", "not valid JSON"},
	} {
		resp, body := e.do(req{method: tc.method, path: tc.path, session: sid, csrf: csrf, json: tc.body})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%s: %s", tc.body, body)
		require.Contains(t, body, `"field":"`+tc.field+`"`, tc.body)
		require.Contains(t, body, tc.problem, tc.body)
	}
}

// TestAPIOneTimePasswordIsForbiddenNotRedirected: a session whose password
// must be changed gets a 403 error document from the API, as anonymous
// callers get a 401 one, never a redirect to an HTML page.
func TestAPIOneTimePasswordIsForbiddenNotRedirected(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pw, err := e.auth.NewOneTimePassword()
	require.NoError(t, err)
	_, err = e.auth.CreateUser(ctx, "root", pw, []versioning.Role{versioning.RoleAdmin}, true)
	require.NoError(t, err)
	s, _, err := e.auth.Login(ctx, "root", pw, "127.0.0.1")
	require.NoError(t, err)
	for _, path := range []string{"/api/v1/overview", "/api/v1/settings/alerting"} {
		resp, body := e.do(req{method: "GET", path: path, session: s.ID})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Contains(t, body, "choose a new password first")
	}
	resp, _ := e.do(req{method: "GET", path: "/", session: s.ID})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "pages still send the person to the password form")
}
