package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// liveV2 seeds checkout and approves v2 (rate 150) over v1 (rate 100).
func liveV2(e *env) {
	e.seed()
	_, err := e.store.Approve(context.Background(), "checkout", 2, versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}, "")
	require.NoError(e.t, err)
}

// A rollback confirmed on a preview whose active version was replaced
// meanwhile applies nothing: the page comes back as a fresh preview against
// the version active now, saying so, with the reason kept.
func TestRollbackFormConflict(t *testing.T) {
	e := newEnv(t)
	liveV2(e)
	ctx := context.Background()
	sid, csrf := e.session("otto")

	resp, body := e.do(req{method: "GET", path: "/services/checkout/rollback/1", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<input type="hidden" name="from" value="2">`, "the form carries the version the preview is against")
	require.Contains(t, body, `<td class="old"><code>150</code></td><td class="new"><code>100</code></td>`)

	// Meanwhile an admin publishes v3 (rate 200).
	_, err := e.store.EmergencyPublish(ctx, versioning.Proposal{Ruleset: ruleset("checkout", 200),
		Author: versioning.Actor{Name: "ada", Roles: roleUsers["ada"]}, Reason: "fire"})
	require.NoError(t, err)

	resp, body = e.do(req{method: "POST", path: "/services/checkout/rollback/1", session: sid, csrf: csrf,
		form: url.Values{"from": {"2"}, "reason": {"errors up"}, "confirm": {"yes"}}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "Nothing was rolled back: v3 went live after this preview was computed against v2. "+
		"The changes below are against v3 now; review them and roll back again.")
	require.Contains(t, body, `<input type="hidden" name="from" value="3">`, "a fresh preview")
	require.Contains(t, body, `<td class="old"><code>200</code></td><td class="new"><code>100</code></td>`)
	require.Contains(t, body, `value="errors up"`, "the reason is kept")
	a, err := e.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(3), a.Number, "nothing applied")
	all, err := e.store.List(ctx, versioning.ListFilter{Service: "checkout"})
	require.NoError(t, err)
	require.Len(t, all, 3)

	resp, body = e.do(req{method: "POST", path: "/services/checkout/rollback/1", session: sid, csrf: csrf,
		form: url.Values{"from": {"x"}, "reason": {"errors up"}, "confirm": {"yes"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "from: must be a version number")

	// Confirmed again on the fresh preview: applied.
	resp, _ = e.do(req{method: "POST", path: "/services/checkout/rollback/1", session: sid, csrf: csrf,
		form: url.Values{"from": {"3"}, "reason": {"errors up"}, "confirm": {"yes"}}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/services/checkout/rules/4", resp.Header.Get("Location"))
	a, err = e.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(3), a.Parent)
	require.Equal(t, int64(1), a.RollbackOf)
}

func TestAPIRollbackFrom(t *testing.T) {
	e := newEnv(t)
	liveV2(e)
	ctx := context.Background()
	sid, csrf := e.session("otto")
	post := func(body string) (int, map[string]any) {
		resp, b := e.do(req{method: "POST", path: "/api/v1/services/checkout/rollback", session: sid, csrf: csrf, json: body})
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(b), &m), b)
		return resp.StatusCode, m
	}

	code, body := post(`{"to":1,"reason":"r","from":1}`)
	require.Equal(t, http.StatusConflict, code, "%v", body)
	require.Equal(t, "versioning: conflict: roll back checkout to version 1: version 2 is active, not the expected version 1", body["error"])
	a, err := e.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), a.Number, "nothing applied")

	code, body = post(`{"to":0,"reason":"r","from":-1}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, "%v", body)
	require.Len(t, body["fields"], 2)
	require.Equal(t, "from", body["fields"].([]any)[1].(map[string]any)["field"])

	code, body = post(`{"to":1,"reason":"r","from":2}`)
	require.Equal(t, http.StatusCreated, code, "%v", body)
	require.EqualValues(t, 3, body["number"])
	require.EqualValues(t, 2, body["parent"])
	require.EqualValues(t, 1, body["rollback_of"])

	// Without from, the rollback applies over whatever is active.
	code, body = post(`{"to":2,"reason":"r"}`)
	require.Equal(t, http.StatusCreated, code, "%v", body)
	require.EqualValues(t, 3, body["parent"])
}

// TestRollbackWithoutConfirmationKeepsTheReason: a rollback posted without
// the confirmation comes back asking for it with the reason as typed, not
// an empty field to type again.
func TestRollbackWithoutConfirmationKeepsTheReason(t *testing.T) {
	e := newEnv(t)
	liveV2(e)
	sid, csrf := e.session("otto")
	resp, body := e.do(req{method: "POST", path: "/services/checkout/rollback/1", session: sid, csrf: csrf,
		form: url.Values{"from": {"2"}, "reason": {"errors up"}}})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "Confirm that you reviewed the changes.")
	require.Contains(t, body, `value="errors up"`, "the reason is kept")
	a, err := e.store.Active(context.Background(), "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), a.Number, "nothing applied")
}

// TestAPIRollbackToAVersionThatNoLongerValidatesIsRefused: the API does
// not roll back to a version whose ruleset fails today's validation (the
// instances would refuse it): 422 naming "to" and the ruleset's field,
// nothing written.
func TestAPIRollbackToAVersionThatNoLongerValidatesIsRefused(t *testing.T) {
	e := newEnv(t)
	liveV2(e)
	ctx := context.Background()
	for _, q := range []string{
		`DROP TRIGGER rule_versions_revise_only_open`,
		`DROP TRIGGER rule_versions_immutable`,
		`UPDATE rule_versions SET content = replace(content, '"rate":100', '"rate":-1') WHERE service = 'checkout' AND number = 1`,
	} {
		_, err := e.db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	sid, csrf := e.session("otto")
	resp, b := e.do(req{method: "POST", path: "/api/v1/services/checkout/rollback", session: sid, csrf: csrf, json: `{"to":1,"reason":"errors up","from":2}`})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, b)
	var body struct {
		Fields []struct{ Field, Problem string } `json:"fields"`
	}
	require.NoError(t, json.Unmarshal([]byte(b), &body))
	require.Len(t, body.Fields, 1, b)
	require.Equal(t, "to", body.Fields[0].Field)
	require.Contains(t, body.Fields[0].Problem, "version 1 of checkout no longer passes validation")
	require.Contains(t, body.Fields[0].Problem, "routes[0].rate_limit.rate")
	a, err := e.store.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), a.Number, "nothing was rolled back")
}
