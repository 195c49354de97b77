package ui_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/model"
)

// TestSettingsBandsInlineErrors: a service's band is edited on the settings
// page; the engine's band is shown while none is set; bad values come back
// next to their fields with the input kept, nothing saved.
func TestSettingsBandsInlineErrors(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	sid, csrf := e.session("ada")

	_, body := e.do(req{method: "GET", path: "/settings", session: sid})
	require.Contains(t, body, `id="policy-checkout"`)
	require.Contains(t, body, "engine default: 10% of the ceiling per hour, no floor, no ceiling")

	resp, body := e.do(req{method: "POST", path: "/settings/policies/checkout", session: sid, csrf: csrf, form: url.Values{
		"approvals": {"1"}, "band": {"custom"}, "max_change_per_hour": {"0.25"}, "floor": {"oops"}, "ceiling": {"500"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "<code>band.floor</code>: &#34;oops&#34; is not a number")
	require.Regexp(t, `name="floor" type="text" inputmode="decimal" value="oops" aria-invalid="true"`, body)
	require.Contains(t, body, `value="0.25"`, "the other inputs are kept")

	resp, body = e.do(req{method: "POST", path: "/settings/policies/checkout", session: sid, csrf: csrf, form: url.Values{
		"approvals": {"1"}, "band": {"custom"}, "max_change_per_hour": {"0.25"}, "floor": {"900"}, "ceiling": {"500"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "<code>band.floor</code>:", "the store's field error is shown inline")
	pol, err := e.store.Policy(ctx, "checkout")
	require.NoError(t, err)
	require.Nil(t, pol.Band, "nothing saved")

	resp, _ = e.do(req{method: "POST", path: "/settings/policies/checkout", session: sid, csrf: csrf, form: url.Values{
		"approvals": {"1"}, "band": {"custom"}, "max_change_per_hour": {"0.25"}, "floor": {"50"}, "ceiling": {"500"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	pol, err = e.store.Policy(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, &versioning.AutoApplyBand{MaxChangePerHour: 0.25, Floor: 50, Ceiling: 500}, pol.Band)
	_, body = e.do(req{method: "GET", path: "/settings", session: sid})
	require.Regexp(t, `value="custom" checked`, body)
	require.Contains(t, body, "last changed by ada")

	// Back to the engine's band.
	resp, _ = e.do(req{method: "POST", path: "/settings/policies/checkout", session: sid, csrf: csrf, form: url.Values{"approvals": {"1"}, "band": {"default"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	pol, _ = e.store.Policy(ctx, "checkout")
	require.Nil(t, pol.Band)
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionPolicy, Newest: true, Limit: 2})
	require.NoError(t, err)
	require.Len(t, entries, 2, "each change is audited")
	require.Equal(t, "ada", entries[0].Actor)

	// The API: read with the configured band, set and clear.
	resp, body = e.do(req{method: "GET", path: "/api/v1/services/search/policy", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"config_manual":true`)
	resp, body = e.do(req{method: "PUT", path: "/api/v1/services/checkout/policy", session: sid, csrf: csrf, json: `{"band":{"max_change_per_hour":0.2,"ceiling":-1}}`})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `"field":"band.ceiling"`)
	resp, body = e.do(req{method: "PUT", path: "/api/v1/services/checkout/policy", session: sid, csrf: csrf, json: `{"band":{"max_change_per_hour":0.2,"ceiling":300},"manual_only":true}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"band":{"max_change_per_hour":0.2,"floor":0,"ceiling":300}`)
	require.Contains(t, body, `"manual_only":true`)
	resp, body = e.do(req{method: "PUT", path: "/api/v1/services/checkout/policy", session: sid, csrf: csrf, json: `{"band":null}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotContains(t, body, `"band":`)
}

var baseRe = regexp.MustCompile(`name="base" value="(\d+)"`)
var docRe = regexp.MustCompile(`(?s)<textarea id="alerting-document" name="document"[^>]*>(.*?)</textarea>`)

// TestSettingsAlertingEditor: the bootstrap document is shown masked until
// the first save; a bad document is refused with the field named and the
// input kept; saving the masked document keeps the secrets; the tables
// and the history say who changed what; every save is audited.
func TestSettingsAlertingEditor(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sid, csrf := e.session("ada")

	_, body := e.do(req{method: "GET", path: "/settings", session: sid})
	require.Contains(t, body, "No version has been saved")
	require.NotContains(t, body, "BOOTSTRAP-KEY")
	require.Contains(t, body, "&lt;masked&gt;")
	require.Equal(t, "0", baseRe.FindStringSubmatch(body)[1])

	bad := `{"routes": [{"receiver": "nobody"}], "receivers": [{"name": "pager", "pagerduty": {"routing_key": "<masked>"}}]}`
	resp, body := e.do(req{method: "POST", path: "/settings/alerting", session: sid, csrf: csrf, form: url.Values{"document": {bad}, "comment": {"route"}, "base": {"0"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "receivers[0].pagerduty.routing_key: the value is masked", "no saved secret to keep for pager")
	require.Contains(t, body, `aria-invalid="true" aria-describedby="alerting-error"`)
	// The configuration file's receiver keeps its secret through the mask.
	bad = strings.Replace(bad, `"pager"`, `"oncall"`, 1)
	resp, body = e.do(req{method: "POST", path: "/settings/alerting", session: sid, csrf: csrf, form: url.Values{"document": {bad}, "comment": {"route"}, "base": {"0"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, html.EscapeString(`routes[0]: receiver "nobody" is not defined`))
	require.NotContains(t, body, "BOOTSTRAP-KEY", "the input shown again is the masked one")

	doc := `{
  "routes": [{"receiver": "pager", "severities": ["P0"], "continue": true}, {"receiver": "team", "matchers": "{service=\"checkout\"}"}, {"receiver": "pager"}],
  "receivers": [
    {"name": "pager", "pagerduty": {"routing_key": "PD-SECRET-1"}},
    {"name": "team", "webhook": {"url": "https://hooks.example.com/T0/secret-token"}}
  ]
}`
	broken := strings.Replace(doc, `"nobody"`, `"x"`, 1)
	broken = strings.Replace(broken, `"receiver": "team"`, `"receiver": "tea"`, 1)
	resp, body = e.do(req{method: "POST", path: "/settings/alerting", session: sid, csrf: csrf, form: url.Values{"document": {broken}, "comment": {"route"}, "base": {"0"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, html.EscapeString(`routes[1]: receiver "tea" is not defined`))
	require.Contains(t, html.UnescapeString(docRe.FindStringSubmatch(body)[1]), `"receiver": "tea"`, "the input is kept")

	resp, _ = e.do(req{method: "POST", path: "/settings/alerting", session: sid, csrf: csrf, form: url.Values{"document": {doc}, "comment": {"page the team"}, "base": {"0"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, body = e.do(req{method: "GET", path: "/settings", session: sid})
	require.Contains(t, body, "Version 1 is in force, saved by ada")
	require.NotContains(t, body, "PD-SECRET-1")
	require.NotContains(t, body, "secret-token")
	require.Contains(t, body, "<td>team</td><td>webhook</td><td class=\"wrap\"><code>&lt;masked:hooks.example.com&gt;</code></td>")
	require.Contains(t, body, "<td>pager</td><td>P0</td>")
	require.Contains(t, body, "<td class=\"wrap\">page the team</td>")

	// Save the masked document with one change: the secrets are kept.
	masked := html.UnescapeString(docRe.FindStringSubmatch(body)[1])
	edited := strings.Replace(masked, `{"receiver": "pager"}]`, `{"receiver": "team"}]`, 1)
	resp, _ = e.do(req{method: "POST", path: "/settings/alerting", session: sid, csrf: csrf, form: url.Values{"document": {edited}, "comment": {"default to the team"}, "base": {"1"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	v, err := e.routing.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), v.Number)
	require.Contains(t, v.Document, "PD-SECRET-1")
	require.Contains(t, v.Document, "secret-token")

	// A stale form is refused with who saved since.
	resp, body = e.do(req{method: "POST", path: "/settings/alerting", session: sid, csrf: csrf, form: url.Values{"document": {doc}, "comment": {"late"}, "base": {"1"}}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "version 2 was saved by ada")

	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: model.ActionAlertConfig})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, int64(2), entries[1].Version)
	require.JSONEq(t, `{"version":2,"comment":"default to the team"}`, string(entries[1].Detail))

	// An earlier version opens from the history, masked.
	resp, body = e.do(req{method: "GET", path: "/settings?alerting_version=1", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<strong>Version 1</strong>, saved by ada`)
	require.Contains(t, body, html.EscapeString(`{"receiver": "pager"}]`), "v1 still routes the rest to pager")
	require.NotContains(t, body, "PD-SECRET-1")
	resp, _ = e.do(req{method: "GET", path: "/settings?alerting_version=9", session: sid})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	// The API: masked reads, history, a save that names the bad field.
	resp, body = e.do(req{method: "GET", path: "/api/v1/settings/alerting", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotContains(t, body, "PD-SECRET-1")
	var got struct {
		Source  string `json:"source"`
		Version struct {
			Number   int64  `json:"number"`
			Document string `json:"document"`
		} `json:"version"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Equal(t, "saved", got.Source)
	require.Equal(t, int64(2), got.Version.Number)
	resp, body = e.do(req{method: "GET", path: "/api/v1/settings/alerting/versions", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `"author":"ada"`)
	require.NotContains(t, body, "secret-token")
	resp, body = e.do(req{method: "PUT", path: "/api/v1/settings/alerting", session: sid, csrf: csrf,
		json: `{"base":2,"comment":"c","document":{"receivers":[{"name":"a","webhook":{"url":"ftp://x"}}]}}`})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "receivers[0] (a)")
	resp, body = e.do(req{method: "PUT", path: "/api/v1/settings/alerting", session: sid, csrf: csrf,
		json: `{"base":2,"comment":"via api","document":` + strconv.Quote(got.Version.Document) + `}`})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.Contains(t, body, `"number":3`)
	v, _ = e.routing.Latest(ctx)
	require.Contains(t, v.Document, "PD-SECRET-1")

	// A repeat interval below the group interval is saved, with a warning
	// shown to whoever saved it.
	warned := strings.Replace(masked, `"routes":`, `"timing": {"group_interval": "10m"}, "routes":`, 1)
	resp, _ = e.do(req{method: "POST", path: "/settings/alerting", session: sid, csrf: csrf, form: url.Values{"document": {warned}, "comment": {"slower groups"}, "base": {"3"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, body = e.do(req{method: "GET", path: "/settings", session: sid})
	require.Contains(t, body, "accepted, with warnings")
	require.Contains(t, body, "timing.repeat.P0")
	resp, body = e.do(req{method: "GET", path: "/api/v1/settings/alerting", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"warnings":["timing.repeat.P0`)
}

// TestEmergencyPublishPreviewConfirm: the page starts from the active
// ruleset; an invalid ruleset shows field errors; a valid one shows the
// diff and needs the reason and the confirmation; a ruleset edited after
// the preview is previewed again; publishing skips approval and is
// audited as an emergency.
func TestEmergencyPublishPreviewConfirm(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	sid, csrf := e.session("ada")

	resp, body := e.do(req{method: "GET", path: "/services/checkout/emergency", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "rate: 100", "starts from the active v1")
	require.Contains(t, body, "Preview the changes")

	bad := "service: checkout\nroutes:\n  - name: api\n    match: {path_prefix: /api}\n    rate_limit: {rate: -5}\n"
	resp, body = e.do(req{method: "POST", path: "/services/checkout/emergency", session: sid, csrf: csrf, form: url.Values{"ruleset": {bad}, "reason": {"fire"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Regexp(t, `<code>[a-z.]*routes\[0\].rate_limit.rate</code>: `, body)
	require.Contains(t, body, "rate: -5")

	good := strings.Replace(bad, "-5", "20", 1)
	resp, body = e.do(req{method: "POST", path: "/services/checkout/emergency", session: sid, csrf: csrf, form: url.Values{"ruleset": {good}, "reason": {"fire"}}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<td class="old"><code>100</code></td><td class="new"><code>20</code></td>`)
	require.Contains(t, body, "Publish now")
	sum := regexp.MustCompile(`name="previewed" value="([^"]+)"`).FindStringSubmatch(body)[1]

	resp, body = e.do(req{method: "POST", path: "/services/checkout/emergency", session: sid, csrf: csrf,
		form: url.Values{"ruleset": {good}, "reason": {"fire"}, "step": {"publish"}, "previewed": {sum}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "not confirmed")
	require.Contains(t, body, "Confirm that you reviewed the changes")

	other := strings.Replace(good, "20", "30", 1)
	resp, body = e.do(req{method: "POST", path: "/services/checkout/emergency", session: sid, csrf: csrf,
		form: url.Values{"ruleset": {other}, "reason": {"fire"}, "step": {"publish"}, "previewed": {sum}, "confirm": {"yes"}}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "edited after the preview: previewed again")
	require.Contains(t, body, "The ruleset changed since the preview")
	active, err := e.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(1), active.Number, "nothing published yet")

	resp, body = e.do(req{method: "POST", path: "/services/checkout/emergency", session: sid, csrf: csrf,
		form: url.Values{"ruleset": {good}, "step": {"publish"}, "previewed": {sum}, "confirm": {"yes"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "reason required")
	require.Contains(t, body, "<code>reason</code>")

	resp, _ = e.do(req{method: "POST", path: "/services/checkout/emergency", session: sid, csrf: csrf,
		form: url.Values{"ruleset": {good}, "reason": {"fire"}, "step": {"publish"}, "previewed": {sum}, "confirm": {"yes"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	active, err = e.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, "/services/checkout/rules/"+strconv.FormatInt(active.Number, 10), resp.Header.Get("Location"))
	require.Equal(t, 20.0, active.Ruleset.Routes[0].RateLimit.Rate)
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionEmergency})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "ada", entries[0].Actor)

	// The API: a dry run shows the changes, a publish needs a reason.
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/emergency", session: sid, csrf: csrf,
		json: `{"dry_run":true,"ruleset":{"service":"checkout","routes":[{"name":"api","match":{"path_prefix":"/api"},"rate_limit":{"rate":40}}]}}`})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"changes":[`)
	require.Contains(t, body, "40")
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/emergency", session: sid, csrf: csrf,
		json: `{"ruleset":{"service":"checkout","routes":[{"name":"api","match":{"path_prefix":"/api"},"rate_limit":{"rate":40}}]}}`})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "reason")
	resp, body = e.do(req{method: "POST", path: "/api/v1/services/checkout/emergency", session: sid, csrf: csrf,
		json: `{"reason":"still burning","ruleset":{"service":"checkout","routes":[{"name":"api","match":{"path_prefix":"/api"},"rate_limit":{"rate":40}}]}}`})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.Contains(t, body, `"active":true`)

	_, body = e.do(req{method: "GET", path: "/services/checkout/rules", session: sid})
	require.Contains(t, body, `href="/services/checkout/emergency"`, "admins find it on the rules page")
	_, body = e.do(req{method: "GET", path: "/audit?action=alert_config", session: sid})
	require.Contains(t, body, `<option selected>alert_config</option>`)

	// Not for operators, even on the read side of the form.
	osid, _ := e.session("otto")
	resp, _ = e.do(req{method: "GET", path: "/services/checkout/emergency", session: osid})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	_, body = e.do(req{method: "GET", path: "/services/checkout/rules", session: osid})
	require.NotContains(t, body, "/emergency")
}

// FuzzAlertingBody: any body of PUT /api/v1/settings/alerting is either
// saved or refused with a 4xx JSON error, never a 5xx, and a saved
// document never echoes a secret.
func FuzzAlertingBody(f *testing.F) {
	e := newEnvTB(f)
	ctx := context.Background()
	ada, err := e.auth.User(ctx, "ada")
	if err != nil {
		f.Fatal(err)
	}
	tok, _, err := e.auth.CreateToken(ctx, principal(ada), "ada", "fuzz", []versioning.Role{versioning.RoleAdmin}, 0)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"comment":"c","document":` + strconv.Quote(testBootstrap) + `}`,
		`{"comment":"c","document":{"receivers":[{"name":"a","slack":{"url":"<masked>"}}]}}`,
		`{"comment":"c","base":-1,"document":"{"}`, `[`, strings.Repeat(`{"document":`, 50)} {
		f.Add(s)
	}
	h := e.srv.Config.Handler
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("PUT", "/api/v1/settings/alerting", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated && (w.Code < 400 || w.Code >= 500) {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		var doc map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatalf("not JSON: %s", w.Body)
		}
		if w.Code == http.StatusCreated && strings.Contains(w.Body.String(), "BOOTSTRAP-KEY") {
			t.Fatalf("a secret in the response: %s", w.Body)
		}
	})
}

// TestSettingsAlertingFirstSaveKeepsFileSecrets: the first save of the
// configuration file's document, as shown (masked), keeps its secrets.
func TestSettingsAlertingFirstSaveKeepsFileSecrets(t *testing.T) {
	e := newEnv(t)
	sid, csrf := e.session("ada")
	_, body := e.do(req{method: "GET", path: "/settings", session: sid})
	shown := html.UnescapeString(docRe.FindStringSubmatch(body)[1])
	require.Contains(t, shown, `"routing_key": "<masked>"`)
	resp, _ := e.do(req{method: "POST", path: "/settings/alerting", session: sid, csrf: csrf, form: url.Values{"document": {shown}, "comment": {"adopt the file"}, "base": {"0"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	v, err := e.routing.Latest(context.Background())
	require.NoError(t, err)
	require.Equal(t, testBootstrap, v.Document)
}
