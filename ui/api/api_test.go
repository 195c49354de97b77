package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/api"
	"governor.dev/governor/ui/auth"
)

// newRouter is the API mounted at /api/v1 over an in-memory rules store,
// every request made by an admin holding every role (the doors and CSRF
// are tested with the whole UI in package ui).
func newRouter(t *testing.T) http.Handler {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	a, err := api.New(api.Options{Rules: st, Clock: clk})
	require.NoError(t, err)
	p := &auth.Principal{User: auth.User{Name: "ada"}, Roles: []versioning.Role{versioning.RoleAdmin, versioning.RoleOperator, versioning.RoleApprover, versioning.RoleViewer}}
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	})
	r.Route("/api/v1", a.Routes)
	return r
}

func serve(h http.Handler, r *http.Request) (*httptest.ResponseRecorder, map[string]any) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var doc map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &doc)
	return w, doc
}

// TestDecisionBodyMayBeEmptyOfUnknownLength: the body of approve, reject
// and withdraw is optional, also when the client announces no length (a
// chunked or HTTP/2 request): it is not refused as invalid JSON ("EOF").
func TestDecisionBodyMayBeEmptyOfUnknownLength(t *testing.T) {
	h := newRouter(t)
	for _, kind := range []string{"approve", "reject", "withdraw"} {
		r := httptest.NewRequest("POST", "/api/v1/services/checkout/versions/1/"+kind, io.NopCloser(strings.NewReader("")))
		r.ContentLength = -1
		w, doc := serve(h, r)
		require.Equal(t, http.StatusNotFound, w.Code, "the store is asked (no such version): %s", w.Body)
		require.Contains(t, doc["error"], "no versions")

		r = httptest.NewRequest("POST", "/api/v1/services/checkout/versions/1/"+kind, io.NopCloser(strings.NewReader(`{"comment":1}`)))
		r.ContentLength = -1
		w, _ = serve(h, r)
		require.Equal(t, http.StatusUnprocessableEntity, w.Code, "a body that is there is still checked")
		require.Contains(t, w.Body.String(), `"field":"comment"`)
	}
}

// TestRequiredBodyMissingSaysSo: a POST without the body it needs is told
// that the body is empty, not "EOF".
func TestRequiredBodyMissingSaysSo(t *testing.T) {
	w, doc := serve(newRouter(t), httptest.NewRequest("POST", "/api/v1/services/checkout/rollback", nil))
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	require.Equal(t, []any{map[string]any{"field": "body", "problem": "is empty; this operation needs a JSON object"}}, doc["fields"])
}

// TestWrongMethodIs405WithAllow: a method the path does not take answers
// 405 with the methods it does take, as a JSON error document.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	h := newRouter(t)
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/api/v1/services/checkout/versions", "GET, HEAD, POST"},
		{"PUT", "/api/v1/overview", "GET, HEAD"},
		{"POST", "/api/v1/services/checkout/versions/3", "GET, HEAD"},
		{"DELETE", "/api/v1/settings/alerting", "GET, HEAD, PUT"},
	} {
		w, doc := serve(h, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, http.StatusMethodNotAllowed, w.Code, tc.path)
		require.Equal(t, tc.allow, w.Header().Get("Allow"), tc.path)
		require.Equal(t, "application/json", w.Header().Get("Content-Type"))
		require.Contains(t, doc["error"], "method "+tc.method+" is not allowed")
		require.EqualValues(t, http.StatusMethodNotAllowed, doc["status"])
	}
	w, _ := serve(h, httptest.NewRequest("GET", "/api/v1/nothing", nil))
	require.Equal(t, http.StatusNotFound, w.Code, "an unknown path is still 404")
}
