package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

func TestAPIRulesLifecycle(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, csrf := e.session("otto")
	post := func(path, body string) (int, map[string]any) {
		resp, b := e.do(req{method: "POST", path: path, session: sid, csrf: csrf, json: body})
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(b), &m), b)
		return resp.StatusCode, m
	}
	code, body := post("/api/v1/services/checkout/versions", `{"base_version":1,"reason":"r","ruleset":{"service":"checkout","routes":[{"name":"api","match":{"path_prefix":"/api"},"rate_limit":{"rate":-1}}]}}`)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, "ruleset.routes[0].rate_limit.rate", body["fields"].([]any)[0].(map[string]any)["field"])

	code, body = post("/api/v1/services/checkout/versions", `{"reason":"r","ruleset":{"service":"checkout"},"surprise":1}`)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body["fields"].([]any)[0].(map[string]any)["problem"], "surprise")

	code, body = post("/api/v1/services/checkout/versions", `{"base_version":1,"reason":"r","ruleset":{"service":"checkout"}}{}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, "one object only")
	require.Contains(t, body["fields"].([]any)[0].(map[string]any)["problem"], "one JSON object")

	code, body = post("/api/v1/services/checkout/versions", `{"base_version":0,"reason":"stale","ruleset":{"service":"checkout"}}`)
	require.Equal(t, http.StatusConflict, code, "%v", body)

	code, body = post("/api/v1/services/checkout/versions/2/rebase", `{}`)
	require.Equal(t, http.StatusForbidden, code, "only the author or an admin: %v", body)

	code, body = post("/api/v1/services/checkout/rollback", `{"to":2,"reason":"r"}`)
	require.Equal(t, http.StatusConflict, code, "v2 never went live: %v", body)

	resp, b := e.do(req{method: "GET", path: "/api/v1/services/checkout/diff?from=1&to=2", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, b, `"path":"routes[api].rate_limit.rate"`)
	resp, b = e.do(req{method: "GET", path: "/api/v1/services/checkout/diff?from=x&to=2", session: sid})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, b)
	resp, _ = e.do(req{method: "GET", path: "/api/v1/services/checkout/versions/99", session: sid})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, b = e.do(req{method: "GET", path: "/api/v1/services/checkout/versions?state=proposed", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, b, `"number":2`)
	require.NotContains(t, b, `"number":1,`)
	resp, b = e.do(req{method: "GET", path: "/api/v1/services/checkout/versions?state=bogus", session: sid})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, b)
	require.Contains(t, b, `"field":"state"`)
	resp, b = e.do(req{method: "GET", path: "/api/v1/services/nobody/versions", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.Contains(t, b, `"versions":[]`, "no versions is an empty list, not null")

	resp, b = e.do(req{method: "GET", path: "/api/v1/audit/verify", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, b, `"ok":true`)
	resp, b = e.do(req{method: "GET", path: "/api/v1/audit?action=propose&order=oldest", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, b, `"action":"propose"`)
	require.NotContains(t, b, `"action":"approve"`)
	resp, b = e.do(req{method: "GET", path: "/api/v1/audit?action=Bogus%20action&order=sideways", session: sid})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, b)
	require.Contains(t, b, `"field":"action"`)
	require.Contains(t, b, `"field":"order"`)

	e.alerts.Fire(model.Alert{ID: "a1", Tier: model.P1, Service: "checkout"})
	code, body = post("/api/v1/alerts/a1/ack", `{}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "otto", body["acked_by"])
	code, _ = post("/api/v1/alerts/zzz/ack", `{}`)
	require.Equal(t, http.StatusNotFound, code)
	code, body = post("/api/v1/services/checkout/canary", `{"version":2,"percent":10}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, "v2 is only proposed")
	require.Contains(t, body["fields"].([]any)[0].(map[string]any)["problem"], "only approved versions")
	code, body = post("/api/v1/services/checkout/canary", `{"version":1,"percent":10}`)
	require.Equal(t, http.StatusCreated, code, "%v", body)
	resp, b = e.do(req{method: "GET", path: "/api/v1/services/checkout/canary", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, b, `"canary":{"version":1,"percent":10}`)
	code, _ = post("/api/v1/services/checkout/canary/promote", `{"version":1}`)
	require.Equal(t, http.StatusForbidden, code, "operators do not promote")
	code, body = post("/api/v1/services/checkout/canary/abort", `{"version":1}`)
	require.Equal(t, http.StatusOK, code, "%v", body)

	code, body = post("/api/v1/silences", `{"service":"checkout","for":"1m","comment":""}`)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body["error"], "comment")
}

// TestOpenAPIDocumentsEveryRoute: the served OpenAPI file parses and lists
// every API path.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	e := newEnv(t)
	resp, b := e.do(req{method: "GET", path: "/api/v1/openapi.yaml"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(b), &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	for path, methods := range map[string][]string{
		"/overview": {"get"}, "/services/{service}/versions": {"get", "post"}, "/services/{service}/versions/{n}": {"get"},
		"/services/{service}/versions/{n}/approve": {"post"}, "/services/{service}/versions/{n}/reject": {"post"},
		"/services/{service}/versions/{n}/withdraw": {"post"}, "/services/{service}/diff": {"get"},
		"/services/{service}/versions/{n}/rebase": {"post"},
		"/services/{service}/rollback":            {"post"}, "/alerts": {"get"}, "/alerts/{id}/ack": {"post"}, "/silences": {"get", "post"},
		"/silences/{id}": {"delete"}, "/alerts/{id}/history": {"get"},
		"/audit": {"get"}, "/audit/verify": {"get"}, "/openapi.yaml": {"get"},
		"/services/{service}/canary": {"get", "post"}, "/services/{service}/canary/promote": {"post"}, "/services/{service}/canary/abort": {"post"},
		"/services/{service}/policy": {"get", "put"}, "/services/{service}/emergency": {"post"},
		"/settings/alerting": {"get", "put"}, "/settings/alerting/versions": {"get"},
		"/settings/alerting/rollback": {"post"},
	} {
		for _, m := range methods {
			require.Contains(t, doc.Paths[path], m, "%s %s undocumented", m, path)
		}
	}
}

func FuzzProposeBody(f *testing.F) {
	e := newEnvTB(f)
	e.seed()
	ctx := context.Background()
	otto, err := e.auth.User(ctx, "otto")
	if err != nil {
		f.Fatal(err)
	}
	tok, _, err := e.auth.CreateToken(ctx, principal(otto), "otto", "fuzz", []versioning.Role{versioning.RoleOperator}, 0)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"reason":"r","ruleset":{"service":"checkout"}}`, `{"base_version":1,"reason":"r","ruleset":{"service":"checkout"}}`,
		`[`, `{"ruleset":null}`, `{"reason":"r","ruleset":{"service":"other"}}`, strings.Repeat(`{"a":`, 100)} {
		f.Add(s)
	}
	h := e.srv.Config.Handler
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/api/v1/services/checkout/versions", strings.NewReader(body))
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
	})
}

func FuzzBearerToken(f *testing.F) {
	e := newEnvTB(f)
	for _, s := range []string{"", "gov_", "gov_a_b", "gov__", "gov_x_" + strings.Repeat("y", 300), "Bearer x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, bearer string) {
		p, err := e.auth.TokenPrincipal(context.Background(), bearer)
		if err == nil || p != nil {
			t.Fatalf("%q authenticated", bearer)
		}
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	})
}

// TestOversizedBodyRefused: a body over the limit answers 413 naming the
// limit, from the API and from a page's form alike (not 422 as bad input,
// nor 403 as if the form's CSRF token were missing).
func TestOversizedBodyRefused(t *testing.T) {
	e := newEnv(t)
	e.seed()
	sid, csrf := e.session("otto")
	big := `{"reason":"` + strings.Repeat("x", 3<<20) + `"}`
	resp, body := e.do(req{method: "POST", path: "/api/v1/services/checkout/versions", session: sid, csrf: csrf, json: big})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	require.Contains(t, body, "too large: at most 2097152 bytes (2 MiB)")
	resp, body = e.do(req{method: "POST", path: "/services/checkout/propose", session: sid, csrf: csrf,
		form: url.Values{"reason": {strings.Repeat("x", 3<<20)}}})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Contains(t, body, "too large: at most 2097152 bytes (2 MiB)")
}

// TestAuditVerifyRouteSaysWhatItVerified: GET /api/v1/audit/verify walks
// the whole chain by default and with whole=true; with whole=false it
// verifies the entries since the last check; it says which it did.
func TestAuditVerifyRouteSaysWhatItVerified(t *testing.T) {
	e := newEnv(t)
	sid, _ := e.session("vera")
	resp, b := e.do(req{method: "GET", path: "/api/v1/audit/verify", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.Contains(t, b, `"whole":true`)
	resp, b = e.do(req{method: "GET", path: "/api/v1/audit/verify?whole=false", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.Contains(t, b, `"ok":true`)
	require.Contains(t, b, `"whole":false`)
	require.Contains(t, b, `"new":0`)
	resp, b = e.do(req{method: "GET", path: "/api/v1/audit/verify", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.Contains(t, b, `"whole":true`, "a call without whole=false walks the whole chain every time")
	resp, b = e.do(req{method: "GET", path: "/api/v1/audit/verify?whole=always", session: sid})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, b)
	require.Contains(t, b, `"field":"whole"`)
}
