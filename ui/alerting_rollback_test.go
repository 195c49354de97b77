package ui_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/model"
)

const (
	rollbackDocV1 = `{"routes": [{"receiver": "pager"}], "receivers": [{"name": "pager", "pagerduty": {"routing_key": "PD-KEY-V1"}}]}`
	rollbackDocV2 = `{"routes": [{"receiver": "team"}], "receivers": [{"name": "pager", "pagerduty": {"routing_key": "PD-KEY-V2"}}, {"name": "team", "webhook": {"url": "https://hooks.example.com/T0/token-v2"}}]}`
)

// saveTwoAlertingVersions saves v1 and v2 by ada and drains the store's
// saved signal, as the engine's loop would have.
func (e *env) saveTwoAlertingVersions() {
	e.t.Helper()
	ctx := context.Background()
	_, err := e.routing.Save(ctx, configstore.SaveRequest{Document: rollbackDocV1, Author: "ada", Comment: "page"})
	require.NoError(e.t, err)
	_, err = e.routing.Save(ctx, configstore.SaveRequest{Document: rollbackDocV2, Base: 1, Author: "ada", Comment: "team"})
	require.NoError(e.t, err)
	e.drainSaved()
}

func (e *env) drainSaved() {
	for {
		select {
		case <-e.routing.Saved():
		default:
			return
		}
	}
}

// requireSavedSignal: the store announced a new version, as a save does;
// the engine of this process applies the newest version on this signal.
func (e *env) requireSavedSignal() {
	e.t.Helper()
	select {
	case <-e.routing.Saved():
	default:
		require.Fail(e.t, "the store did not announce the new version to the engine")
	}
}

// TestAPIAlertingRollbackStoresTheEarlierDocumentAsANewVersion: POST
// /settings/alerting/rollback stores version to's document, its own
// secrets, as version base+1, answers it masked, audits it as a rollback
// and announces it to the engine as a save does.
func TestAPIAlertingRollbackStoresTheEarlierDocumentAsANewVersion(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.saveTwoAlertingVersions()
	sid, csrf := e.session("ada")

	resp, body := e.do(req{method: "POST", path: "/api/v1/settings/alerting/rollback", session: sid, csrf: csrf,
		json: `{"to":1,"base":2,"comment":"team hook is down"}`})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	var got struct {
		Number   int64  `json:"number"`
		Document string `json:"document"`
		Comment  string `json:"comment"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Equal(t, int64(3), got.Number)
	require.Equal(t, "team hook is down", got.Comment)
	require.NotContains(t, body, "PD-KEY")
	require.Contains(t, got.Document, `"receiver": "pager"`)

	v, err := e.routing.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), v.Number)
	require.Equal(t, rollbackDocV1, v.Document, "version 1's document with its own secrets")
	e.requireSavedSignal()

	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: model.ActionAlertConfig})
	require.NoError(t, err)
	require.Len(t, entries, 3)
	require.Equal(t, "ada", entries[2].Actor)
	require.JSONEq(t, `{"version":3,"comment":"team hook is down","rollback_of":1}`, string(entries[2].Detail))

	// The same request again is stale: it names the version saved since
	// and the one it was decided on, and stores nothing.
	resp, body = e.do(req{method: "POST", path: "/api/v1/settings/alerting/rollback", session: sid, csrf: csrf,
		json: `{"to":1,"base":2,"comment":"team hook is down"}`})
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "version 3 was saved by ada")
	require.Contains(t, body, "the version 2 ")
	v, _ = e.routing.Latest(ctx)
	require.Equal(t, int64(3), v.Number)
}

// TestAPIAlertingRollbackRefusesBadInputNamingTheField: a bad body is
// refused with the field named, and nothing is stored.
func TestAPIAlertingRollbackRefusesBadInputNamingTheField(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.saveTwoAlertingVersions()
	sid, csrf := e.session("ada")
	for _, tc := range []struct {
		body, field string
		status      int
		// fields: the problem is listed under fields too (the store's own
		// checks name the field in the error only, as a save's do).
		fields bool
	}{
		{`{"to":0,"base":2,"comment":"c"}`, "to", http.StatusUnprocessableEntity, true},
		{`{"to":1,"base":0,"comment":"c"}`, "base", http.StatusUnprocessableEntity, true},
		{`{"to":1,"base":2}`, "comment", http.StatusUnprocessableEntity, true},
		{`{"to":1,"base":2,"comment":"  "}`, "comment", http.StatusUnprocessableEntity, true},
		{`{"to":"one","base":2,"comment":"c"}`, "to", http.StatusUnprocessableEntity, true},
		{`{"to":1,"base":2,"comment":"c","document":"{}"}`, "document", http.StatusUnprocessableEntity, true},
		{`{"to":2,"base":2,"comment":"c"}`, "to", http.StatusUnprocessableEntity, true},
		{`{"to":9,"base":12,"comment":"c"}`, "to", http.StatusUnprocessableEntity, false},
	} {
		resp, body := e.do(req{method: "POST", path: "/api/v1/settings/alerting/rollback", session: sid, csrf: csrf, json: tc.body})
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.body, body)
		var doc struct {
			Error  string `json:"error"`
			Fields []struct {
				Field string `json:"field"`
			} `json:"fields"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &doc))
		require.Contains(t, doc.Error, tc.field+":", tc.body)
		if tc.fields {
			require.NotEmpty(t, doc.Fields, "%s: %s", tc.body, body)
			require.Equal(t, tc.field, doc.Fields[0].Field, "%s: %s", tc.body, body)
		}
	}
	v, err := e.routing.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), v.Number, "nothing stored")
}

var historyRollbackRe = regexp.MustCompile(`href="/settings/alerting/rollback/(\d+)"`)

// TestSettingsAlertingRollbackPreviewConfirm: older versions in the
// history offer a roll back; its page shows what changes against the
// version in force, masked, and needs a reason and the confirmation; a
// preview gone stale is shown again against the version saved since;
// the rollback is stored as a new version, announced to the engine as a
// save is; the form sent twice rolls back once.
func TestSettingsAlertingRollbackPreviewConfirm(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.saveTwoAlertingVersions()
	sid, csrf := e.session("ada")

	_, body := e.do(req{method: "GET", path: "/settings", session: sid})
	require.Equal(t, [][]string{{`href="/settings/alerting/rollback/1"`, "1"}}, historyRollbackRe.FindAllStringSubmatch(body, -1),
		"only the older version offers a roll back")
	require.Contains(t, body, "Roll back to this version")

	resp, body := e.do(req{method: "GET", path: "/settings/alerting/rollback/1", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Roll the alerting configuration back to version 1")
	require.Contains(t, body, "What changes")
	require.Contains(t, body, "receivers[team]")
	require.Contains(t, body, "routes[0].receiver")
	require.Contains(t, body, "receivers[pager].pagerduty.routing_key", "a secret that differs behind the same mask")
	require.Contains(t, body, "&lt;masked&gt; (another secret)")
	require.Contains(t, body, `name="base" value="2"`)
	require.Contains(t, body, "I have reviewed the changes above")
	require.NotContains(t, body, "PD-KEY")
	require.NotContains(t, body, "token-v2")

	resp, body = e.do(req{method: "GET", path: "/settings/alerting/rollback/2", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Roll back is disabled: version 2 is in force")
	resp, _ = e.do(req{method: "GET", path: "/settings/alerting/rollback/9", session: sid})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	form := url.Values{"base": {"2"}, "comment": {"team hook is down"}}
	resp, body = e.do(req{method: "POST", path: "/settings/alerting/rollback/1", session: sid, csrf: csrf, form: form})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "Confirm that you reviewed the changes.")
	require.Contains(t, body, `value="team hook is down"`, "the reason typed is kept")

	form.Set("confirm", "yes")
	form.Set("comment", "")
	resp, body = e.do(req{method: "POST", path: "/settings/alerting/rollback/1", session: sid, csrf: csrf, form: form})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "comment: say why")
	require.Contains(t, body, `aria-invalid="true"`)

	// Another version saved since the preview: nothing is rolled back and
	// the changes are shown against it.
	masked, err := configstore.Mask(rollbackDocV2)
	require.NoError(t, err)
	_, err = e.routing.Save(ctx, configstore.SaveRequest{Document: strings.Replace(masked, `"team"}]`, `"pager"}]`, 1), Base: 2, Author: "ada", Comment: "v3"})
	require.NoError(t, err)
	e.drainSaved()
	form.Set("comment", "team hook is down")
	resp, body = e.do(req{method: "POST", path: "/settings/alerting/rollback/1", session: sid, csrf: csrf, form: form})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, html.UnescapeString(body), "Nothing was rolled back: version 3 was saved after this preview was computed against version 2")
	require.Contains(t, body, `name="base" value="3"`)
	v, _ := e.routing.Latest(ctx)
	require.Equal(t, int64(3), v.Number)

	form.Set("base", "3")
	resp, _ = e.do(req{method: "POST", path: "/settings/alerting/rollback/1", session: sid, csrf: csrf, form: form})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/settings#alerting", resp.Header.Get("Location"))
	v, err = e.routing.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), v.Number)
	require.Equal(t, rollbackDocV1, v.Document)
	e.requireSavedSignal()

	// Sent again (a double click): it was applied, nothing more is stored.
	resp, _ = e.do(req{method: "POST", path: "/settings/alerting/rollback/1", session: sid, csrf: csrf, form: form})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	v, _ = e.routing.Latest(ctx)
	require.Equal(t, int64(4), v.Number)
}
