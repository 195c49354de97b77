package pages

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui/auth"
)

const harnessPassword = "correct horse battery"

var harnessUsers = map[string][]versioning.Role{
	"otto":  {versioning.RoleOperator},
	"alice": {versioning.RoleOperator, versioning.RoleApprover},
	"bob":   {versioning.RoleApprover},
}

// harness serves the pages over a SQLite rules store and accounts, behind
// the auth middleware, as package ui mounts them.
type harness struct {
	t     *testing.T
	store versioning.Store
	auth  *auth.Manager
	db    *sql.DB
	clk   *clock.Fake
	srv   *httptest.Server
}

func newHarness(t *testing.T, edit func(*Options)) *harness {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "governor.db")
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: st, Clock: clk, BcryptCost: bcrypt.MinCost, LoginBurst: 100})
	require.NoError(t, err)
	for name, roles := range harnessUsers {
		_, err := am.CreateUser(ctx, name, harnessPassword, roles, false)
		require.NoError(t, err)
	}
	o := Options{Rules: st, Auth: am, Clock: clk}
	if edit != nil {
		edit(&o)
	}
	p, err := New(o)
	require.NoError(t, err)
	r := chi.NewRouter()
	r.Use(am.Middleware(p.OnError))
	p.Routes(r)
	h := &harness{t: t, store: st, auth: am, db: db, clk: clk, srv: httptest.NewServer(r)}
	t.Cleanup(h.srv.Close)
	return h
}

func (h *harness) session(name string) (id, csrf string) {
	s, _, err := h.auth.Login(context.Background(), name, harnessPassword, "127.0.0.1")
	require.NoError(h.t, err)
	return s.ID, s.CSRF
}

// do sends a request with the session's cookie (and, with form, a POST
// body carrying csrf); it does not follow redirects.
func (h *harness) do(method, path, session, csrf string, form url.Values) (*http.Response, string) {
	h.t.Helper()
	var body io.Reader
	if form != nil {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		f.Set("csrf", csrf)
		body = strings.NewReader(f.Encode())
	}
	req, err := http.NewRequest(method, h.srv.URL+path, body)
	require.NoError(h.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: session})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(h.t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	_ = resp.Body.Close()
	return resp, string(b)
}

func harnessRuleset(service string, rate float64) *rules.Ruleset {
	return &rules.Ruleset{Service: service, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/api"}, RateLimit: &rules.RateLimit{Rate: rate}}}}
}

// liveV2 gives service "checkout" v1 (rate 100) and v2 (rate 150), v2
// active.
func (h *harness) liveV2() {
	ctx := context.Background()
	alice := versioning.Actor{Name: "alice", Roles: harnessUsers["alice"]}
	bob := versioning.Actor{Name: "bob", Roles: harnessUsers["bob"]}
	v1, err := h.store.Propose(ctx, versioning.Proposal{Ruleset: harnessRuleset("checkout", 100), Author: alice, Reason: "first limits"})
	require.NoError(h.t, err)
	_, err = h.store.Approve(ctx, "checkout", v1.Number, bob, "ok")
	require.NoError(h.t, err)
	v2, err := h.store.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: harnessRuleset("checkout", 150), Author: alice, Reason: "promo day"})
	require.NoError(h.t, err)
	_, err = h.store.Approve(ctx, "checkout", v2.Number, bob, "ok")
	require.NoError(h.t, err)
}
