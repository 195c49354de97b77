package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/internal/natsembed"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/canarysource"
)

// approveV2AndV3 approves the seeded proposal v2 and a v3 based on it.
func (e *env) approveV2AndV3() (v2, v3 versioning.Version) {
	e.t.Helper()
	ctx := context.Background()
	bob := versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}
	alice := versioning.Actor{Name: "alice", Roles: roleUsers["alice"]}
	v2, err := e.store.Approve(ctx, "checkout", 2, bob, "ok")
	require.NoError(e.t, err)
	v3, err = e.store.Propose(ctx, versioning.Proposal{BaseVersion: 2, Ruleset: ruleset("checkout", 999), Author: alice, Reason: "other"})
	require.NoError(e.t, err)
	v3, err = e.store.Approve(ctx, "checkout", v3.Number, bob, "ok")
	require.NoError(e.t, err)
	return v2, v3
}

// errorBanner returns the text of the page's error banner ("" for none).
func errorBanner(page string) string {
	m := regexp.MustCompile(`<div class="banner banner-error" role="alert">(.*?)</div>`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// formFields returns the hidden fields of the form posting to action on
// the page.
func formFields(t *testing.T, page, action string) url.Values {
	t.Helper()
	form := regexp.MustCompile(`(?s)<form[^>]*action="` + regexp.QuoteMeta(action) + `">(.*?)</form>`).FindStringSubmatch(page)
	require.NotNil(t, form, "no form posting to %s", action)
	fields := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`).FindAllStringSubmatch(form[1], -1) {
		fields.Set(m[1], m[2])
	}
	return fields
}

// TestCanaryFormsActOnlyOnVersionShown: the rules page's promote and abort
// forms carry the version they show; if the canary was replaced after the
// page was rendered, submitting them changes nothing and says which
// version is staged now (409, the rules page with its error banner).
func TestCanaryFormsActOnlyOnVersionShown(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	v2, v3 := e.approveV2AndV3()
	require.NoError(t, e.roll.StartCanary(ctx, v2, 10))

	sid, _ := e.session("bob")
	resp, page := e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "Promote v2 to everyone")
	promote := formFields(t, page, "/services/checkout/canary/promote")
	abort := formFields(t, page, "/services/checkout/canary/abort")
	require.Equal(t, "2", promote.Get("version"))
	require.Equal(t, "2", abort.Get("version"))

	// Meanwhile an operator replaces the canary with v3.
	_, err := e.roll.Abort(ctx, "checkout", v2.Number)
	require.NoError(t, err)
	require.NoError(t, e.roll.StartCanary(ctx, v3, 10))

	for action, fields := range map[string]url.Values{"promote": promote, "abort": abort} {
		resp, page := e.do(req{method: "POST", path: "/services/checkout/canary/" + action, session: sid, csrf: fields.Get("csrf"), form: fields})
		require.Equal(t, http.StatusConflict, resp.StatusCode, action)
		msg := errorBanner(page)
		require.Contains(t, msg, "version 2", "%s: %s", action, msg)
		require.Contains(t, msg, "version 3", "%s: %s", action, msg)
	}
	require.Zero(t, e.roll.Stable("checkout"), "nothing promoted")
	c, err := e.roll.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, v3.Number, c.Version, "v3 still staged")

	// A form without the version is refused.
	csrf := promote.Get("csrf")
	resp, page = e.do(req{method: "POST", path: "/services/checkout/canary/promote", session: sid, csrf: csrf})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, errorBanner(page), "version: must be")

	// The page as it is now promotes v3.
	_, page = e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	fields := formFields(t, page, "/services/checkout/canary/promote")
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/canary/promote", session: sid, csrf: fields.Get("csrf"), form: fields})
	require.Equal(t, "/services/checkout/rules", resp.Header.Get("Location"))
	require.Equal(t, v3.Number, e.roll.Stable("checkout"))
}

// TestCanaryAPIPromoteAbortNameTheVersion: POST .../canary/promote and
// .../canary/abort require the staged version in the body (422 naming
// "version" without it) and refuse another one with 409 naming both.
func TestCanaryAPIPromoteAbortNameTheVersion(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	_, v3 := e.approveV2AndV3()
	require.NoError(t, e.roll.StartCanary(ctx, v3, 10))
	sid, csrf := e.session("alice")
	post := func(path, body string) (int, map[string]any) {
		resp, b := e.do(req{method: "POST", path: path, json: body, session: sid, csrf: csrf})
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(b), &m), b)
		return resp.StatusCode, m
	}
	for _, action := range []string{"promote", "abort"} {
		path := "/api/v1/services/checkout/canary/" + action
		code, body := post(path, `{}`)
		require.Equal(t, http.StatusUnprocessableEntity, code, "%s without a version: %v", action, body)
		require.Equal(t, "version", body["fields"].([]any)[0].(map[string]any)["field"])
		code, body = post(path, `{"version":2}`)
		require.Equal(t, http.StatusConflict, code, "%s of v2 while v3 is staged: %v", action, body)
		require.Contains(t, body["error"], "version 2")
		require.Contains(t, body["error"], "version 3")
	}
	require.Zero(t, e.roll.Stable("checkout"))
	code, body := post("/api/v1/services/checkout/canary/promote", `{"version":3}`)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.EqualValues(t, 3, body["version"])
	require.Equal(t, v3.Number, e.roll.Stable("checkout"))
}

// canaryEnv is the UI with canary rollouts on a real Publisher (embedded
// JetStream), as cmd/web and the engine wire it.
func canaryEnv(t *testing.T) (*env, *distribution.Publisher) {
	t.Helper()
	ctx := context.Background()
	e := newEnv(t)
	srv, err := natsembed.Start(natsembed.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	nc, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	names, err := watch.NewNames("uicanary")
	require.NoError(t, err)
	pub, err := distribution.NewPublisher(ctx, js, distribution.PublisherOptions{Names: names, Storage: jetstream.MemoryStorage, Timeout: 2 * time.Second})
	require.NoError(t, err)
	src, err := canarysource.New(pub)
	require.NoError(t, err)
	h, err := ui.New(ui.Options{Rules: e.store, Auth: e.auth, Fleet: e.fleet, Alerts: e.alerts, Rollouts: src, Clock: e.clk})
	require.NoError(t, err)
	e.srv.Close()
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e, pub
}

// TestCanaryMistakesAreClientErrors: with the real canary source, ordinary
// mistakes (promote with nothing staged, stage a version older than the
// stable one, a share that is not a number, promote a version replaced
// meanwhile) come back as 4xx saying what is wrong, and as the rules
// page with its error banner, never as 500 "Internal error". The banner
// shows no text from the URL.
func TestCanaryMistakesAreClientErrors(t *testing.T) {
	e, pub := canaryEnv(t)
	e.seed()
	ctx := context.Background()
	v2, v3 := e.approveV2AndV3()
	env, err := rules.NewEnvelope(v2.Number, v2.Ruleset)
	require.NoError(t, err)
	payload, err := json.Marshal(env)
	require.NoError(t, err)
	_, _, err = pub.Publish(ctx, payload) // the relay delivered v2: stable is v2
	require.NoError(t, err)

	sid, csrf := e.session("alice")
	resp, body := e.do(req{method: "POST", path: "/api/v1/services/checkout/canary/promote", json: `{"version":3}`, session: sid, csrf: csrf})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "promote with nothing staged: %s", body)
	require.Contains(t, body, "no staged version")
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/canary", json: `{"version":1,"percent":10}`, session: sid, csrf: csrf})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "canary of v1 while v2 is stable: %s", body)
	require.Contains(t, body, "stable version 2")

	banner := func(resp *http.Response, page string) string {
		t.Helper()
		require.GreaterOrEqual(t, resp.StatusCode, 400)
		require.Less(t, resp.StatusCode, 500)
		require.Contains(t, page, "<h1>Rules of checkout</h1>")
		return errorBanner(page)
	}
	resp, body = e.do(req{method: "POST", path: "/services/checkout/canary/abort", session: sid, csrf: csrf, form: url.Values{"version": {"3"}}})
	require.Contains(t, banner(resp, body), "no staged version")
	resp, body = e.do(req{method: "POST", path: "/services/checkout/canary", session: sid, csrf: csrf, form: url.Values{"version": {"1"}, "percent": {"10"}}})
	require.Contains(t, banner(resp, body), "stable version 2")
	for _, pct := range []string{"NaN", "Inf", "-Inf"} {
		resp, body = e.do(req{method: "POST", path: "/services/checkout/canary", session: sid, csrf: csrf, form: url.Values{"version": {"3"}, "percent": {pct}}})
		require.Contains(t, banner(resp, body), "percent:", pct)
	}
	c, err := pub.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Nil(t, c, "nothing staged")

	// The approver saw v3 staged; it was aborted and v4 staged meanwhile.
	alice := versioning.Actor{Name: "alice", Roles: roleUsers["alice"]}
	bob := versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}
	v4, err := e.store.Propose(ctx, versioning.Proposal{BaseVersion: v3.Number, Ruleset: ruleset("checkout", 400), Author: alice, Reason: "more"})
	require.NoError(t, err)
	v4, err = e.store.Approve(ctx, "checkout", v4.Number, bob, "ok")
	require.NoError(t, err)
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/canary", session: sid, csrf: csrf, form: url.Values{"version": {"3"}, "percent": {"10"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/services/checkout/rules", resp.Header.Get("Location"))
	_, page := e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	fields := formFields(t, page, "/services/checkout/canary/promote")
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/canary/abort", json: `{"version":3}`, session: sid, csrf: csrf})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/canary", json: `{"version":4,"percent":10}`, session: sid, csrf: csrf})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	resp, body = e.do(req{method: "POST", path: "/services/checkout/canary/promote", session: sid, csrf: fields.Get("csrf"), form: fields})
	msg := banner(resp, body)
	require.Contains(t, msg, "version 3")
	require.Contains(t, msg, "version 4 is staged")
	latest, err := pub.Latest(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, v2.Number, latest.Version, "v4 was not promoted")
	_, page = e.do(req{method: "GET", path: "/services/checkout/rules?error=" + url.QueryEscape(msg), session: sid})
	require.Empty(t, errorBanner(page), "no error text from the URL")
}

// TestCanaryWidenRunningVersion: staging the running canary's version again
// with a larger share (the 10 % to 50 % step of a progressive rollout)
// widens it, through the API and the page, on the real publisher, whose
// StartCanary refuses a version staged before.
func TestCanaryWidenRunningVersion(t *testing.T) {
	e, pub := canaryEnv(t)
	e.seed()
	ctx := context.Background()
	_, v3 := e.approveV2AndV3()
	sid, csrf := e.session("otto")
	resp, body := e.do(req{method: "POST", path: "/api/v1/services/checkout/canary", json: `{"version":3,"percent":10}`, session: sid, csrf: csrf})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/canary", json: `{"version":3,"percent":50}`, session: sid, csrf: csrf})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	c, err := pub.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, v3.Number, c.Envelope.Version)
	require.Equal(t, 50.0, c.Selector.Percent)

	resp, _ = e.do(req{method: "POST", path: "/services/checkout/canary", session: sid, csrf: csrf, form: url.Values{"version": {"3"}, "percent": {"75"}}})
	require.Equal(t, "/services/checkout/rules", resp.Header.Get("Location"))
	_, page := e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	require.Contains(t, page, "v3 is staged to 75 % of the instances.")

	// An older version is still refused while v3 runs.
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/canary", json: `{"version":2,"percent":50}`, session: sid, csrf: csrf})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
}

// TestCanaryButtonsFollowRoles: the rules page offers each canary action
// only to the roles its route admits (start and abort: operator, approver,
// admin; promote: approver, admin); for the others the button is disabled
// and the page says why, rather than an enabled button that answers 403 in
// the middle of an incident.
func TestCanaryButtonsFollowRoles(t *testing.T) {
	e := newEnv(t)
	e.seed()
	v2, _ := e.approveV2AndV3()
	button := func(page, action string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)action="` + regexp.QuoteMeta(action) + `">.*?(<button[^>]*>)`).FindStringSubmatch(page)
		require.NotNil(t, m, "no form posting to %s", action)
		return m[1]
	}
	disabled := func(b string) bool { return strings.Contains(b, "disabled") }
	for _, tc := range []struct {
		user  string
		start bool
	}{{"vera", false}, {"otto", true}, {"bob", true}, {"ada", true}} {
		sid, _ := e.session(tc.user)
		_, page := e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
		require.Equal(t, !tc.start, disabled(button(page, "/services/checkout/canary")), "%s: start", tc.user)
		require.Equal(t, !tc.start, strings.Contains(page, "Start canary is disabled: you need one of the roles: operator, approver, admin"), tc.user)
	}
	require.NoError(t, e.roll.StartCanary(context.Background(), v2, 10))
	for _, tc := range []struct {
		user           string
		promote, abort bool
	}{{"vera", false, false}, {"otto", false, true}, {"bob", true, true}, {"ada", true, true}} {
		sid, _ := e.session(tc.user)
		_, page := e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
		require.Equal(t, !tc.promote, disabled(button(page, "/services/checkout/canary/promote")), "%s: promote", tc.user)
		require.Equal(t, !tc.promote, strings.Contains(page, "Promote is disabled: you need one of the roles: approver, admin"), tc.user)
		require.Equal(t, !tc.abort, disabled(button(page, "/services/checkout/canary/abort")), "%s: abort", tc.user)
	}
}
