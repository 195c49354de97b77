package ui_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	_ "modernc.org/sqlite"

	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/auth"
	"governor.dev/governor/ui/model"
)

// env is a UI on an in-memory rules store, with users of every role.
type env struct {
	t      testing.TB
	srv    *httptest.Server
	store  versioning.Store
	auth   *auth.Manager
	clk    *clock.Fake
	alerts *model.MemoryAlerts
	fleet  *model.StaticFleet
	db     *sql.DB
	roll   *model.MemoryRollouts
	// routing holds the saved alerting configurations.
	routing *configstore.Store
}

const testPassword = "correct horse battery"

// testBootstrap stands for the engine's alerting configuration file.
const testBootstrap = `{"receivers": [{"name": "oncall", "pagerduty": {"routing_key": "BOOTSTRAP-KEY"}}]}`

// testConfigBand stands for the engine's configured bands: 10% per hour,
// search manual.
func testConfigBand(service string) (versioning.AutoApplyBand, bool) {
	return versioning.AutoApplyBand{MaxChangePerHour: 0.1}, service == "search"
}

var roleUsers = map[string][]versioning.Role{
	"vera":  {versioning.RoleViewer},
	"otto":  {versioning.RoleOperator},
	"alice": {versioning.RoleOperator, versioning.RoleApprover},
	"bob":   {versioning.RoleApprover},
	"ada":   {versioning.RoleAdmin},
}

func newEnv(t *testing.T) *env { return newEnvTB(t) }

func newEnvTB(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	// One database file for the rules store and the accounts, as in
	// production: the alerting configuration's audit entries are written
	// with its versions and read through the rules store.
	path := filepath.Join(t.TempDir(), "governor.db")
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return newEnvOn(t, clk, st, db, migrations.SQLite)
}

// newEnvPostgres is the same UI on a real PostgreSQL database shared by the
// rules store and the accounts, as in production.
func newEnvPostgres(t *testing.T) *env {
	t.Helper()
	url := testenv.Postgres(t)
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	st, err := postgres.Open(ctx, postgres.Options{URL: url, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return newEnvOn(t, clk, st, db, migrations.Postgres)
}

func newEnvOn(t testing.TB, clk *clock.Fake, st versioning.Store, db *sql.DB, dialect migrations.Dialect) *env {
	ctx := context.Background()
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: dialect, Auditor: st, Clock: clk, BcryptCost: bcrypt.MinCost, LoginBurst: 100})
	require.NoError(t, err)
	for name, roles := range roleUsers {
		_, err := am.CreateUser(ctx, name, testPassword, roles, false)
		require.NoError(t, err)
	}
	cs, err := configstore.New(ctx, db, dialect, configstore.Options{Clock: clk})
	require.NoError(t, err)
	e := &env{t: t, store: st, auth: am, clk: clk, alerts: model.NewMemoryAlerts(clk), fleet: &model.StaticFleet{}, db: db, roll: model.NewMemoryRollouts(), routing: cs}
	h, err := ui.New(ui.Options{Rules: st, Auth: am, Fleet: e.fleet, Alerts: e.alerts, Rollouts: e.roll, Clock: clk, LiveInterval: time.Second,
		AlertRouting: cs, AlertBootstrap: testBootstrap, ConfigBand: testConfigBand})
	require.NoError(t, err)
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// session logs in directly and returns the cookie value and CSRF token.
func (e *env) session(name string) (string, string) {
	s, _, err := e.auth.Login(context.Background(), name, testPassword, "127.0.0.1")
	require.NoError(e.t, err)
	return s.ID, s.CSRF
}

type req struct {
	method, path string
	session      string
	csrf         string
	form         url.Values
	json         string
	bearer       string
	header       map[string]string
}

func (e *env) do(r req) (*http.Response, string) {
	e.t.Helper()
	var body io.Reader
	switch {
	case r.json != "":
		body = strings.NewReader(r.json)
	case r.form != nil || r.csrf != "":
		f := url.Values{}
		for k, v := range r.form {
			f[k] = v
		}
		if r.csrf != "" && r.json == "" {
			f.Set("csrf", r.csrf)
		}
		body = strings.NewReader(f.Encode())
	}
	hr, err := http.NewRequest(r.method, e.srv.URL+r.path, body)
	require.NoError(e.t, err)
	if r.json != "" {
		hr.Header.Set("Content-Type", "application/json")
		if r.csrf != "" {
			hr.Header.Set(auth.CSRFHeader, r.csrf)
		}
	} else if body != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.session != "" {
		hr.AddCookie(&http.Cookie{Name: auth.CookieName, Value: r.session})
	}
	if r.bearer != "" {
		hr.Header.Set("Authorization", "Bearer "+r.bearer)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(hr)
	require.NoError(e.t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	_ = resp.Body.Close()
	return resp, string(b)
}

func ruleset(service string, rate float64) *rules.Ruleset {
	return &rules.Ruleset{Service: service, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/api"}, RateLimit: &rules.RateLimit{Rate: rate}}}}
}

// seed gives service "checkout" an active v1 (rate 100) and an open
// proposal v2 (rate 150) by alice.
func (e *env) seed() {
	ctx := context.Background()
	alice := versioning.Actor{Name: "alice", Roles: roleUsers["alice"]}
	bob := versioning.Actor{Name: "bob", Roles: roleUsers["bob"]}
	v1, err := e.store.Propose(ctx, versioning.Proposal{Ruleset: ruleset("checkout", 100), Author: alice, Reason: "first limits"})
	require.NoError(e.t, err)
	_, err = e.store.Approve(ctx, "checkout", v1.Number, bob, "ok")
	require.NoError(e.t, err)
	_, err = e.store.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: ruleset("checkout", 150), Author: alice, Reason: "promo day",
		Evidence: []byte(`{"load_score":[0.5,0.7,0.9],"controller":{"p":0.4}}`)})
	require.NoError(e.t, err)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
