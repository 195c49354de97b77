package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/model"
)

// endpoint is one state-changing route and a user whose roles pass its door.
type endpoint struct {
	// method defaults to POST.
	method string
	path   string
	form   url.Values
	json   string
	user   string
	// anyRole: every logged-in user passes the door (no viewer case).
	anyRole bool
}

var stateChanging = []endpoint{
	{path: "/logout", user: "vera", anyRole: true},
	{path: "/account/password", form: url.Values{"current": {testPassword}, "next": {"another long password"}}, user: "vera", anyRole: true},
	{path: "/account/tokens", form: url.Values{"label": {"ci"}, "scope": {"viewer"}, "ttl": {"1h"}}, user: "vera", anyRole: true},
	{path: "/account/tokens/none/revoke", user: "vera", anyRole: true},
	{path: "/services/checkout/propose", form: url.Values{"ruleset": {"service: checkout\n"}, "reason": {"r"}, "base": {"1"}}, user: "otto"},
	{path: "/services/checkout/rules/2/approve", user: "bob"},
	{path: "/services/checkout/rules/2/reject", user: "bob"},
	{path: "/services/checkout/rules/2/withdraw", user: "alice"},
	{path: "/services/checkout/rules/2/rebase", user: "alice"},
	{path: "/services/checkout/rollback/1", form: url.Values{"reason": {"r"}, "confirm": {"yes"}}, user: "otto"},
	{path: "/services/checkout/canary", form: url.Values{"version": {"1"}, "percent": {"10"}}, user: "otto"},
	{path: "/services/checkout/canary/promote", form: url.Values{"version": {"1"}}, user: "bob"},
	{path: "/services/checkout/canary/abort", form: url.Values{"version": {"1"}}, user: "otto"},
	{path: "/alerts/a1/ack", user: "otto"},
	{path: "/alerts/silence", form: url.Values{"service": {"checkout"}, "for": {"1h"}, "comment": {"c"}}, user: "otto"},
	{path: "/alerts/silences/s1/expire", form: url.Values{"version": {"0123456789abcdef"}}, user: "otto"},
	{path: "/settings/users", form: url.Values{"name": {"newbie"}, "role": {"viewer"}}, user: "ada"},
	{path: "/settings/users/otto/roles", form: url.Values{"role": {"viewer"}}, user: "ada"},
	{path: "/settings/policies/checkout", form: url.Values{"approvals": {"2"}}, user: "ada"},
	{path: "/api/v1/services/checkout/versions", json: `{"base_version":1,"reason":"r","ruleset":{"service":"checkout"}}`, user: "otto"},
	{path: "/api/v1/services/checkout/versions/2/approve", json: `{"comment":"ok"}`, user: "bob"},
	{path: "/api/v1/services/checkout/versions/2/reject", json: `{}`, user: "bob"},
	{path: "/api/v1/services/checkout/versions/2/withdraw", json: `{}`, user: "alice"},
	{path: "/api/v1/services/checkout/versions/2/rebase", json: `{}`, user: "alice"},
	{path: "/api/v1/services/checkout/rollback", json: `{"to":1,"reason":"r"}`, user: "otto"},
	{path: "/api/v1/alerts/a1/ack", json: `{}`, user: "otto"},
	{path: "/api/v1/services/checkout/canary", json: `{"version":1,"percent":10}`, user: "otto"},
	{path: "/api/v1/services/checkout/canary/promote", json: `{"version":1}`, user: "bob"},
	{path: "/api/v1/services/checkout/canary/abort", json: `{"version":1}`, user: "otto"},
	{path: "/api/v1/silences", json: `{"service":"checkout","for":"1h","comment":"c"}`, user: "otto"},
	{path: "/api/v1/silences", json: `{"matchers":"{service=\"checkout\"}","ends_at":"2099-01-01T00:00:00Z","comment":"c"}`, user: "otto"},
	{method: "DELETE", path: "/api/v1/silences/s1", json: `{}`, user: "otto"},
	{path: "/settings/alerting", form: url.Values{"document": {testBootstrap}, "comment": {"c"}, "base": {"0"}}, user: "ada"},
	{path: "/services/checkout/emergency", form: url.Values{"ruleset": {"service: checkout\n"}, "reason": {"r"}, "confirm": {"yes"}}, user: "ada"},
	{path: "/settings/alerting/rollback/1", form: url.Values{"base": {"2"}, "comment": {"c"}, "confirm": {"yes"}}, user: "ada"},
	{path: "/api/v1/settings/alerting/rollback", json: `{"to":1,"base":2,"comment":"c"}`, user: "ada"},
	{method: "PUT", path: "/api/v1/settings/alerting", json: `{"document":` + strconv.Quote(testBootstrap) + `,"comment":"c"}`, user: "ada"},
	{method: "PUT", path: "/api/v1/services/checkout/policy", json: `{"band":{"max_change_per_hour":0.2}}`, user: "ada"},
	{path: "/api/v1/services/checkout/emergency", json: `{"reason":"r","ruleset":{"service":"checkout"}}`, user: "ada"},
}

// TestStateChangesRefused: every state-changing endpoint refuses anonymous
// users, wrong roles, missing or wrong CSRF tokens, cross-origin browser
// requests and expired sessions, and none of the refused requests changes
// anything.
func TestStateChangesRefused(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.alerts.Fire(model.Alert{ID: "a1", Tier: model.P1, Service: "checkout", Summary: "p99 over target"})
	ctx := context.Background()
	before, err := e.store.Audit(ctx, versioning.AuditFilter{Limit: 1000})
	require.NoError(t, err)

	for _, ep := range stateChanging {
		t.Run(ep.path, func(t *testing.T) {
			method := ep.method
			if method == "" {
				method = "POST"
			}
			r := req{method: method, path: ep.path, form: ep.form, json: ep.json}

			resp, body := e.do(r)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "anonymous: %s", body)

			if !ep.anyRole {
				sid, csrf := e.session("vera")
				r2 := r
				r2.session, r2.csrf = sid, csrf
				resp, body = e.do(r2)
				require.Equal(t, http.StatusForbidden, resp.StatusCode, "viewer: %s", body)
				require.Contains(t, body, "roles")
			}

			sid, csrf := e.session(ep.user)
			r3 := r
			r3.session = sid
			resp, body = e.do(r3)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token: %s", body)
			require.Contains(t, body, "CSRF")

			r3.csrf = csrf + "x"
			resp, body = e.do(r3)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "wrong CSRF token: %s", body)

			r3.csrf = csrf
			r3.header = map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
			resp, body = e.do(r3)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "cross-origin: %s", body)

			e.clk.Advance(12*time.Hour + time.Second)
			r3.header = nil
			resp, body = e.do(r3)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "expired session: %s", body)
		})
	}

	after, err := e.store.Audit(ctx, versioning.AuditFilter{Limit: 1000})
	require.NoError(t, err)
	for _, en := range after[len(before):] {
		require.Contains(t, []versioning.Action{versioning.ActionLogin}, en.Action, "a refused request wrote %s", en.Action)
	}
	vs, err := e.store.List(ctx, versioning.ListFilter{Service: "checkout"})
	require.NoError(t, err)
	require.Len(t, vs, 2)
	require.Equal(t, versioning.StateProposed, vs[0].State)
	firing, _ := e.alerts.Firing(ctx)
	require.Empty(t, firing[0].AckedBy)
	_, err = e.routing.Latest(ctx)
	require.ErrorIs(t, err, alerts.ErrNotFound, "a refused request saved an alerting configuration")
	pol, err := e.store.Policy(ctx, "checkout")
	require.NoError(t, err)
	require.Nil(t, pol.Band, "a refused request set a band")
}

// TestBearerTokens: a token acts with its scopes only and needs no CSRF
// token; a bad token is refused, never treated as anonymous.
func TestBearerTokens(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	bob, err := e.auth.User(ctx, "bob")
	require.NoError(t, err)
	p := principal(bob)
	viewerTok, _, err := e.auth.CreateToken(ctx, p, "bob", "read", []versioning.Role{versioning.RoleApprover}, 0)
	require.NoError(t, err)

	resp, body := e.do(req{method: "GET", path: "/api/v1/services/checkout/versions/2", bearer: viewerTok})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"state":"proposed"`)

	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/versions/2/approve", json: `{"comment":"lgtm"}`, bearer: viewerTok})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"active":true`)

	resp, body = e.do(req{method: "GET", path: "/api/v1/overview", bearer: viewerTok + "x"})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
	resp, _ = e.do(req{method: "GET", path: "/api/v1/overview", header: map[string]string{"Authorization": "Basic Ym9iOnB3"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
