package ui_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

func f64(v float64) *float64 { return &v }

func TestLoginFlowSetsSecureCookieAndRotates(t *testing.T) {
	e := newEnv(t)
	resp, _ := e.do(req{method: "GET", path: "/"})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login?next=%2F", resp.Header.Get("Location"))

	resp, body := e.do(req{method: "POST", path: "/login", form: url.Values{"name": {"otto"}, "password": {"nope nope nope"}}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, "Wrong user name or password.")

	var ids []string
	for range 2 {
		resp, _ = e.do(req{method: "POST", path: "/login", form: url.Values{"name": {"otto"}, "password": {testPassword}, "next": {"//evil.example/x"}}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/", resp.Header.Get("Location"), "an off-site next is ignored")
		c := resp.Cookies()[0]
		require.Equal(t, auth.CookieName, c.Name)
		require.True(t, c.Secure)
		require.True(t, c.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, c.SameSite)
		ids = append(ids, c.Value)
	}
	require.NotEqual(t, ids[0], ids[1], "a new session id at every login")

	resp, body = e.do(req{method: "GET", path: "/", session: ids[1]})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "otto · operator")
	csrf := csrfRe.FindStringSubmatch(body)[1]
	resp, _ = e.do(req{method: "POST", path: "/logout", session: ids[1], csrf: csrf})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = e.do(req{method: "GET", path: "/", session: ids[1]})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "logged out")
}

func TestOneTimePasswordMustBeChanged(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pw, err := e.auth.NewOneTimePassword()
	require.NoError(t, err)
	_, err = e.auth.CreateUser(ctx, "root", pw, []versioning.Role{versioning.RoleAdmin}, true)
	require.NoError(t, err)
	resp, _ := e.do(req{method: "POST", path: "/login", form: url.Values{"name": {"root"}, "password": {pw}}})
	require.Equal(t, auth.PasswordPath, resp.Header.Get("Location"))
	sid := resp.Cookies()[0].Value
	resp, _ = e.do(req{method: "GET", path: "/settings", session: sid})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, auth.PasswordPath, resp.Header.Get("Location"))
	resp, body := e.do(req{method: "GET", path: auth.PasswordPath, session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	csrf := csrfRe.FindStringSubmatch(body)[1]
	resp, _ = e.do(req{method: "POST", path: auth.PasswordPath, session: sid, csrf: csrf, form: url.Values{"current": {pw}, "next": {"my own long password"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	// The change replaced the session: the old ID is gone, the new cookie works.
	old := sid
	for _, c := range resp.Cookies() {
		if c.Name == auth.CookieName {
			sid = c.Value
		}
	}
	require.NotEqual(t, old, sid, "the password change must set a new session cookie")
	resp, _ = e.do(req{method: "GET", path: "/settings", session: old})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = e.do(req{method: "GET", path: "/settings", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestFourEyesThroughThePages(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, csrf := e.session("alice")
	resp, body := e.do(req{method: "GET", path: "/services/checkout/rules/2", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `<button type="submit" disabled aria-describedby="approve-why">Approve</button>`, body)
	require.Contains(t, body, "you proposed this version; four eyes: another approver must approve it")
	require.Contains(t, body, "routes[api].rate_limit.rate", "the page shows the diff against the parent")

	resp, body = e.do(req{method: "POST", path: "/services/checkout/rules/2/approve", session: sid, csrf: csrf, form: url.Values{"checksum": {e.checksum("checkout", 2)}}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "self-approval refused")

	sid, csrf = e.session("bob")
	resp, body = e.do(req{method: "GET", path: "/services/checkout/rules/2", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `<button type="submit" >Approve</button>`, body)
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/rules/2/approve", session: sid, csrf: csrf, form: url.Values{"comment": {"lgtm"}, "checksum": {e.checksum("checkout", 2)}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	v, err := e.store.Active(context.Background(), "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), v.Number)
	require.Equal(t, "lgtm", v.Approvals[0].Comment)

	_, body = e.do(req{method: "GET", path: "/services/checkout/rules/2", session: sid})
	require.NotContains(t, body, ">Approve</button>", "no decision form once decided")
}

func TestRollbackPreviewAndConfirm(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	_, err := e.store.Approve(ctx, "checkout", 2, versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}, "")
	require.NoError(t, err)
	sid, csrf := e.session("otto")

	resp, body := e.do(req{method: "GET", path: "/services/checkout/rollback/1", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "routes[api].rate_limit.rate")
	require.Contains(t, body, `<td class="old"><code>150</code></td><td class="new"><code>100</code></td>`)

	resp, body = e.do(req{method: "POST", path: "/services/checkout/rollback/1", session: sid, csrf: csrf, form: url.Values{"reason": {"errors up"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "not confirmed")
	require.Contains(t, body, "Confirm that you reviewed the changes.")
	resp, body = e.do(req{method: "POST", path: "/services/checkout/rollback/1", session: sid, csrf: csrf, form: url.Values{"confirm": {"yes"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "reason required")
	require.Contains(t, body, "reason")

	resp, _ = e.do(req{method: "POST", path: "/services/checkout/rollback/1", session: sid, csrf: csrf, form: url.Values{"reason": {"errors up"}, "confirm": {"yes"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/services/checkout/rules/3", resp.Header.Get("Location"))
	v, err := e.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(1), v.RollbackOf)
	require.Equal(t, 100.0, v.Ruleset.Routes[0].RateLimit.Rate)

	_, body = e.do(req{method: "GET", path: "/services/checkout/rollback/3", session: sid})
	require.Contains(t, body, "v3 is already active")
}

func TestProposeShowsFieldErrors(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, csrf := e.session("otto")
	resp, body := e.do(req{method: "GET", path: "/services/checkout/propose", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "rate: 100", "the form starts from the active ruleset (v1)")
	_ = body
	bad := "service: checkout\nroutes:\n  - name: api\n    match: {path_prefix: /api}\n    rate_limit: {rate: -5}\n"
	resp, body = e.do(req{method: "POST", path: "/services/checkout/propose", session: sid, csrf: csrf, form: url.Values{"ruleset": {bad}, "reason": {"more"}, "base": {"1"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `aria-invalid="true"`)
	require.Regexp(t, `<code>ruleset.routes\[0\].rate_limit.rate</code>: `, body)
	require.Contains(t, body, "rate: -5", "the input is kept")

	good := strings.Replace(bad, "-5", "200", 1)
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/propose", session: sid, csrf: csrf, form: url.Values{"ruleset": {good}, "reason": {"more"}, "base": {"1"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

func fleetOf(svcs ...model.ServiceStatus) []model.ServiceStatus { return svcs }

func TestOverviewSortedByAttention(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.fleet.Set(fleetOf(
		model.ServiceStatus{Name: "calm", LoadScore: f64(0.2), Rollout: model.Rollout{Synced: 40}},
		model.ServiceStatus{Name: "hot", LoadScore: f64(0.9), Overloaded: true, Rollout: model.Rollout{Synced: 37, Stale: 2, Nacked: 1}},
		model.ServiceStatus{Name: "checkout", LoadScore: f64(0.4), RequestRate: f64(1234), P99: f64(0.25), Rollout: model.Rollout{Synced: 40}},
		model.ServiceStatus{Name: "paged", LoadScore: f64(0.1)},
	), nil)
	e.alerts.Fire(model.Alert{ID: "x", Tier: model.P0, Service: "paged", Summary: "down"})
	sid, _ := e.session("vera")
	resp, body := e.do(req{method: "GET", path: "/", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	order := regexp.MustCompile(`<td><a href="/services/([a-z]+)">`).FindAllStringSubmatch(body, -1)
	var names []string
	for _, m := range order {
		names = append(names, m[1])
	}
	require.Equal(t, []string{"paged", "hot", "checkout", "calm"}, names)
	require.Contains(t, body, "37/40 SYNCED, 2 STALE, 1 NACKED")
	require.Contains(t, body, "1.2k req/s")
	require.Contains(t, body, "250 ms")
	require.Contains(t, body, `<span class="tier tier-P0">P0</span> 1`)

	resp, body = e.do(req{method: "GET", path: "/api/v1/overview", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `"name":"paged"`)
}

func TestOverviewStreamsUpdates(t *testing.T) {
	e := newEnv(t)
	e.fleet.Set(fleetOf(model.ServiceStatus{Name: "checkout", LoadScore: f64(0.3)}), nil)
	sid, _ := e.session("vera")
	hr, err := http.NewRequest("GET", e.srv.URL+"/events/overview", nil)
	require.NoError(t, err)
	hr.AddCookie(&http.Cookie{Name: auth.CookieName, Value: sid})
	resp, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	rd := bufio.NewReader(resp.Body)
	next := func() (string, string) {
		var event string
		var data []string
		for {
			line, err := rd.ReadString('\n')
			require.NoError(t, err)
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				return event, strings.Join(data, "\n")
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			}
		}
	}
	ev, data := next()
	require.Equal(t, "summary", ev)
	require.Contains(t, data, "1 services")
	ev, data = next()
	require.Equal(t, "rows", ev)
	require.Contains(t, data, "0.30")

	e.fleet.Set(fleetOf(model.ServiceStatus{Name: "checkout", LoadScore: f64(0.85), Overloaded: true}), nil)
	for e.clk.Pending() == 0 {
		runtime.Gosched() // the stream arms its timer right after flushing
	}
	e.clk.Advance(time.Second)
	_, _ = next()
	ev, data = next()
	require.Equal(t, "rows", ev)
	require.Contains(t, data, "0.85")
	require.Contains(t, data, "overloaded")

	// Logging out ends the stream at its next update.
	p, err := e.auth.SessionPrincipal(context.Background(), sid)
	require.NoError(t, err)
	require.NoError(t, e.auth.Logout(context.Background(), p))
	for e.clk.Pending() == 0 {
		runtime.Gosched()
	}
	e.clk.Advance(time.Second)
	ev, _ = next()
	require.Equal(t, "end", ev)
	_, err = rd.ReadString('\n')
	require.ErrorIs(t, err, io.EOF)
}

var inlineScript = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|\son[a-z]+=|\sstyle=|javascript:`)

// TestEveryPageRendersUnderStrictCSP: each page renders for an admin with
// the security headers, without inline scripts, styles or event handlers,
// and with no stack trace when a backend fails.
func TestEveryPageRendersUnderStrictCSP(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.fleet.Set(fleetOf(model.ServiceStatus{Name: "checkout", LoadScore: f64(0.5), Trend: []model.Point{{Value: 0.2}, {Value: 0.5}},
		Terms: []model.Term{{Name: "cpu", Value: 0.5, Weight: 0.4, Contribution: 0.2}}}), nil)
	e.alerts.Fire(model.Alert{ID: "a1", Tier: model.P1, Service: "checkout", Summary: "p99"})
	sid, _ := e.session("ada")
	for _, path := range []string{"/", "/services/checkout", "/services/checkout?range=7d", "/services/checkout/rules", "/services/checkout/rules/1",
		"/services/checkout/rules/2", "/services/checkout/diff?from=1&to=2", "/services/checkout/propose", "/services/checkout/rollback/1",
		"/recommendations", "/alerts", "/audit", "/audit?action=approve", "/settings", "/services/checkout/emergency", auth.PasswordPath, "/account"} {
		t.Run(path, func(t *testing.T) {
			resp, body := e.do(req{method: "GET", path: path, session: sid})
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			require.Equal(t, ui.CSP, resp.Header.Get("Content-Security-Policy"))
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
			require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
			require.Nil(t, inlineScript.FindStringIndex(body), "inline code: %q", inlineScript.FindString(body))
		})
	}
	e.fleet.SetInstances("checkout", []model.Instance{{Name: "i-1", State: "SYNCED", Running: 2, Target: 2},
		{Name: "i-7", State: "NACKED", Running: 1, Target: 2, NackError: "checksum mismatch"}})
	_, body := e.do(req{method: "GET", path: "/services/checkout", session: sid})
	require.Contains(t, body, "<td>i-7</td><td><strong>NACKED</strong></td>")
	require.Less(t, strings.Index(body, "<td>i-7</td>"), strings.Index(body, "<td>i-1</td>"), "refusals first")
	require.Contains(t, body, "checksum mismatch")
	_, body = e.do(req{method: "GET", path: "/recommendations", session: sid})
	require.Contains(t, body, "promo day")
	require.Contains(t, body, `<svg class="chart"`, "numeric evidence is charted")
	_, body = e.do(req{method: "GET", path: "/audit", session: sid})
	require.Regexp(t, "Whole chain verified (now|at)", body)
}

func TestBackendsDownShowBanners(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.fleet.Set(nil, errors.New("prometheus: dial tcp 127.0.0.1:9090: connection refused"))
	sid, _ := e.session("vera")
	resp, body := e.do(req{method: "GET", path: "/", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "metrics unavailable")
	require.Contains(t, body, `href="/services/checkout"`, "the rules still show")

	require.NoError(t, e.store.Close()) // the database goes away
	resp, body = e.do(req{method: "GET", path: "/", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "rules database unavailable")
	resp, body = e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, body, "A backend is unavailable")
	require.NotContains(t, body, "goroutine")
	require.NotContains(t, body, "sql:")
}

func TestAccountTokens(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, csrf := e.session("alice")
	resp, body := e.do(req{method: "POST", path: "/account/tokens", session: sid, csrf: csrf, form: url.Values{"label": {"ci"}, "scope": {"approver"}, "ttl": {"720h"}}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	secret := regexp.MustCompile(`<code>(gov_[^<]+)</code>`).FindStringSubmatch(body)[1]
	resp, body = e.do(req{method: "GET", path: "/api/v1/services/checkout/versions/2", bearer: secret})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/rollback", bearer: secret, json: `{"to":1,"reason":"r"}`})
	require.Equal(t, http.StatusConflict, resp.StatusCode, "an approver may roll back; v1 is active already: %s", body)

	resp, body = e.do(req{method: "POST", path: "/account/tokens", session: sid, csrf: csrf, form: url.Values{"label": {"x"}, "scope": {"admin"}, "ttl": {"720h"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "does not hold role")

	toks, err := e.auth.Tokens(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, toks, 1)
	resp, _ = e.do(req{method: "POST", path: "/account/tokens/" + toks[0].ID + "/revoke", session: sid, csrf: csrf})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = e.do(req{method: "GET", path: "/api/v1/overview", bearer: secret})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	sid2, csrf2 := e.session("bob")
	resp, _ = e.do(req{method: "POST", path: "/account/tokens/" + toks[0].ID + "/revoke", session: sid2, csrf: csrf2})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "not bob's token")
}

func TestSettingsUsersRolesAndPolicies(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	sid, csrf := e.session("ada")
	resp, body := e.do(req{method: "POST", path: "/settings/users", session: sid, csrf: csrf, form: url.Values{"name": {"nina"}, "role": {"viewer", "operator"}}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	pw := regexp.MustCompile(`One-time password \(shown once\): (\S+)<`).FindStringSubmatch(body)[1]
	u, err := e.auth.User(ctx, "nina")
	require.NoError(t, err)
	require.True(t, u.MustChange)
	ns, _, err := e.auth.Login(ctx, "nina", pw, "x")
	require.NoError(t, err)
	resp, _ = e.do(req{method: "GET", path: "/", session: ns.ID})
	require.Equal(t, auth.PasswordPath, resp.Header.Get("Location"), "a one-time password leads to the password page")
	resp, _ = e.do(req{method: "POST", path: "/logout", session: ns.ID, csrf: ns.CSRF})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a user with a one-time password may log out")
	_, err = e.auth.SessionPrincipal(ctx, ns.ID)
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "the session ended")
	_, _, err = e.auth.Login(ctx, "nina", pw, "x")
	require.NoError(t, err)

	resp, body = e.do(req{method: "POST", path: "/settings/users", session: sid, csrf: csrf, form: url.Values{"name": {"bad name"}, "role": {"viewer"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "name: must be")

	resp, _ = e.do(req{method: "POST", path: "/settings/users/nina/roles", session: sid, csrf: csrf, form: url.Values{"role": {"approver"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	u, _ = e.auth.User(ctx, "nina")
	require.Equal(t, []versioning.Role{versioning.RoleApprover}, u.Roles)
	resp, body = e.do(req{method: "POST", path: "/settings/users/ada/roles", session: sid, csrf: csrf, form: url.Values{"role": {"viewer"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "cannot remove your own admin role")

	resp, _ = e.do(req{method: "POST", path: "/settings/policies/checkout", session: sid, csrf: csrf, form: url.Values{"approvals": {"2"}, "manual_only": {"yes"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	pol, err := e.store.Policy(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, 2, pol.ApprovalsRequired)
	require.True(t, pol.ManualOnly)
	resp, body = e.do(req{method: "POST", path: "/settings/policies/checkout", session: sid, csrf: csrf, form: url.Values{"approvals": {"11"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "approvals_required")
}

// TestDatabaseOutageKeepsPagesReadable: with the database gone, a recently
// validated session can still read the overview (metrics and alerts, with
// banners) but cannot change anything; an unknown session gets a clear 503.
func TestDatabaseOutageKeepsPagesReadable(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.fleet.Set(fleetOf(model.ServiceStatus{Name: "checkout", LoadScore: f64(0.42)}), nil)
	e.alerts.Fire(model.Alert{ID: "a1", Tier: model.P1, Service: "checkout"})
	sid, csrf := e.session("otto")
	resp, _ := e.do(req{method: "GET", path: "/", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, e.store.Close())
	require.NoError(t, e.db.Close())
	resp, body := e.do(req{method: "GET", path: "/", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "The database is unavailable")
	require.Contains(t, body, "rules database unavailable")
	require.Contains(t, body, "0.42", "live data still shows")

	resp, body = e.do(req{method: "POST", path: "/alerts/a1/ack", session: sid, csrf: csrf})
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotContains(t, body, "sql:")
	firing, _ := e.alerts.Firing(context.Background())
	require.Empty(t, firing[0].AckedBy)

	e.clk.Advance(6 * time.Minute)
	resp, body = e.do(req{method: "GET", path: "/", session: sid})
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the grace period is over")
	require.Contains(t, body, "A backend is unavailable")
}

func TestCanaryStartPromoteAbort(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	sid, csrf := e.session("otto")
	resp, body := e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "No canary is running.")

	resp, body = e.do(req{method: "POST", path: "/services/checkout/canary", session: sid, csrf: csrf, form: url.Values{"version": {"2"}, "percent": {"10"}}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, errorBanner(body), "v2 is proposed", "v2 is only proposed")
	resp, body = e.do(req{method: "POST", path: "/services/checkout/canary", session: sid, csrf: csrf, form: url.Values{"version": {"1"}, "percent": {"100"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, errorBanner(body), "percent: ")
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/canary", session: sid, csrf: csrf, form: url.Values{"version": {"1"}, "percent": {"10"}}})
	require.Equal(t, "/services/checkout/rules", resp.Header.Get("Location"))
	_, body = e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	require.Contains(t, body, "v1 is staged to 10 % of the instances.")

	resp, _ = e.do(req{method: "POST", path: "/services/checkout/canary/promote", session: sid, csrf: csrf, form: url.Values{"version": {"1"}}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "an operator may not promote")
	sidB, csrfB := e.session("bob")
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/canary/promote", session: sidB, csrf: csrfB, form: url.Values{"version": {"1"}}})
	require.Equal(t, "/services/checkout/rules", resp.Header.Get("Location"))
	require.Equal(t, int64(1), e.roll.Stable("checkout"))

	resp, body = e.do(req{method: "POST", path: "/services/checkout/canary/abort", session: sid, csrf: csrf, form: url.Values{"version": {"1"}}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "nothing to abort")
	require.NotEmpty(t, errorBanner(body), "nothing to abort")
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Service: "checkout", Newest: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, versioning.Action("canary_promote"), entries[0].Action)
	require.Equal(t, "bob", entries[0].Actor)
	require.Equal(t, versioning.Action("canary_start"), entries[1].Action)
}

type fakeCharts struct{ err error }

func (f fakeCharts) Charts(_ context.Context, svc string, span time.Duration) ([]model.Chart, error) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	return []model.Chart{{Title: "p99 latency", Unit: "ms", Points: []model.Point{{At: t0.Add(-span), Value: 120}, {At: t0, Value: 180}}}}, f.err
}

func TestServiceCharts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		charts fakeCharts
		banner bool
	}{{"ok", fakeCharts{}, false}, {"source down", fakeCharts{err: errors.New("refused")}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed()
			h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: e.fleet, Charts: tc.charts, Clock: e.clk})
			require.NoError(t, err)
			sid, _ := e.session("vera")
			r := httptest.NewRequest("GET", "/services/checkout?range=6h", nil)
			r.AddCookie(&http.Cookie{Name: auth.CookieName, Value: sid})
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, http.StatusOK, w.Code)
			body := w.Body.String()
			require.Contains(t, body, "Signals over 6h")
			require.Contains(t, body, "p99 latency <span class=\"muted\">(ms)</span>")
			require.Contains(t, body, "<title>2026-03-01 09:00:00 UTC: 180 ms</title>")
			require.Equal(t, tc.banner, strings.Contains(body, "signal charts are missing"))
		})
	}
}

func TestRecommendationsDecide(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, _ := e.session("alice")
	_, body := e.do(req{method: "GET", path: "/recommendations", session: sid})
	require.Contains(t, body, "Approve is disabled: you proposed this version; four eyes")
	sid, csrf := e.session("bob")
	_, body = e.do(req{method: "GET", path: "/recommendations", session: sid})
	require.NotContains(t, body, "Approve is disabled")
	resp, _ := e.do(req{method: "POST", path: "/services/checkout/rules/2/reject", session: sid, csrf: csrf, form: url.Values{"comment": {"too aggressive"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	v, err := e.store.Get(context.Background(), "checkout", 2)
	require.NoError(t, err)
	require.Equal(t, versioning.StateRejected, v.State)
	require.Equal(t, "too aggressive", v.DecisionComment)
	_, body = e.do(req{method: "GET", path: "/recommendations", session: sid})
	require.Contains(t, body, "Nothing awaits a decision.")
}

// TestPostgresStack: four eyes, rollback, tokens and the audit chain through
// the UI on PostgreSQL.
func TestPostgresStack(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	e := newEnvPostgres(t)
	e.seed()
	ctx := context.Background()
	sid, csrf := e.session("alice")
	resp, body := e.do(req{method: "POST", path: "/services/checkout/rules/2/approve", session: sid, csrf: csrf, form: url.Values{"checksum": {e.checksum("checkout", 2)}}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "self-approval refused")
	sidB, csrfB := e.session("bob")
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/rules/2/approve", session: sidB, csrf: csrfB, form: url.Values{"checksum": {e.checksum("checkout", 2)}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/rollback/1", session: sid, csrf: csrf, form: url.Values{"reason": {"back"}, "confirm": {"yes"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	active, err := e.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(1), active.RollbackOf)
	resp, body = e.do(req{method: "GET", path: "/audit", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Whole chain verified now:")
	require.Contains(t, body, "<td>login</td>")
}

func TestStaleProposalRebase(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	// Another change goes live over v2's base.
	otto := versioning.Actor{Name: "otto", Roles: roleUsers["otto"]}
	v3, err := e.store.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: ruleset("checkout", 120), Author: otto, Reason: "other change"})
	require.NoError(t, err)
	_, err = e.store.Approve(ctx, "checkout", v3.Number, versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}, "")
	require.NoError(t, err)
	sid, csrf := e.session("alice")
	_, body := e.do(req{method: "GET", path: "/services/checkout/rules/2", session: sid})
	require.Contains(t, body, "This proposal is based on v1 but v3 is live now.")
	sidB, _ := e.session("bob")
	_, body = e.do(req{method: "GET", path: "/services/checkout/rules/2", session: sidB})
	require.Contains(t, body, "Approve is disabled: it is based on v1 but v3 is live now; rebase it first")
	resp, _ := e.do(req{method: "POST", path: "/services/checkout/rules/2/rebase", session: sid, csrf: csrf})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/services/checkout/rules/4", resp.Header.Get("Location"))
	v, err := e.store.Get(ctx, "checkout", 4)
	require.NoError(t, err)
	require.Equal(t, int64(3), v.Parent)
	require.Equal(t, versioning.StateProposed, v.State)
}
