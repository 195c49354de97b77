package auth_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	_ "modernc.org/sqlite"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/auth"
)

type env struct {
	db    *sql.DB
	m     *auth.Manager
	clk   *clock.Fake
	store versioning.Store
}

func newEnv(t *testing.T) env {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	m, err := auth.New(ctx, auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: st, Clock: clk, BcryptCost: bcrypt.MinCost, LoginRate: 6, LoginBurst: 3})
	require.NoError(t, err)
	return env{db: db, m: m, clk: clk, store: st}
}

var (
	operator = []versioning.Role{versioning.RoleOperator}
	approver = []versioning.Role{versioning.RoleApprover}
)

func TestOptionsRefused(t *testing.T) {
	for name, o := range map[string]auth.Options{
		"no db":      {},
		"no dialect": {DB: &sql.DB{}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := auth.New(context.Background(), o)
			require.ErrorIs(t, err, auth.ErrInvalid)
		})
	}
}

func TestCreateUserValidation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, user, pw string
		roles          []versioning.Role
		want           error
		field          string
	}{
		{"empty name", "", "long-enough-pass", operator, auth.ErrInvalid, "name"},
		{"bad name", "a b", "long-enough-pass", operator, auth.ErrInvalid, "name"},
		{"short password", "ann", "short", operator, auth.ErrInvalid, "password"},
		{"no roles", "ann", "long-enough-pass", nil, auth.ErrInvalid, "roles"},
		{"bad role", "ann", "long-enough-pass", []versioning.Role{"root"}, auth.ErrInvalid, "roles"},
		{"ok", "ann", "long-enough-pass", operator, nil, ""},
		{"duplicate", "ann", "long-enough-pass", operator, auth.ErrExists, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.m.CreateUser(ctx, tc.user, tc.pw, tc.roles, false)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestLoginRotatesSessionsAndAudits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)

	_, _, err = e.m.Login(ctx, "ann", "wrong password!!", "10.0.0.1")
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	_, _, err = e.m.Login(ctx, "nobody", "wrong password!!", "10.0.0.1")
	require.ErrorIs(t, err, auth.ErrUnauthenticated)

	s1, u, err := e.m.Login(ctx, "ann", "correct horse battery", "10.0.0.1")
	require.NoError(t, err)
	require.Equal(t, "ann", u.Name)
	e.clk.Advance(time.Minute)
	s2, _, err := e.m.Login(ctx, "ann", "correct horse battery", "10.0.0.2")
	require.NoError(t, err)
	require.NotEqual(t, s1.ID, s2.ID, "each login gets a fresh session id")
	require.NotEqual(t, s1.CSRF, s2.CSRF)

	p, err := e.m.SessionPrincipal(ctx, s2.ID)
	require.NoError(t, err)
	require.Equal(t, operator, p.Roles)

	entries, err := e.store.Audit(ctx, versioning.AuditFilter{})
	require.NoError(t, err)
	var actions []string
	for _, en := range entries {
		actions = append(actions, en.Actor+":"+string(en.Action))
	}
	require.Equal(t, []string{"ann:login_failure", "nobody:login_failure", "ann:login", "ann:login"}, actions)
	_, err = e.store.VerifyAudit(ctx)
	require.NoError(t, err)

	require.NoError(t, e.m.Logout(ctx, p))
	_, err = e.m.SessionPrincipal(ctx, s2.ID)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
}

// TestSessionEndsWhenIdleOrPastLifetime: a session unused for SessionIdle
// (1h by default) ends, as one left open on an unattended screen should;
// one used all along still ends SessionTTL (12h) after login.
func TestSessionEndsWhenIdleOrPastLifetime(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	require.Equal(t, e.clk.Now().Add(12*time.Hour), s.ExpiresAt, "the cookie lives as long as the session may")
	e.clk.Advance(time.Hour + time.Second)
	_, err = e.m.SessionPrincipal(ctx, s.ID)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	require.Contains(t, err.Error(), "idle")

	s, _, err = e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	for range 23 {
		e.clk.Advance(30 * time.Minute)
		_, err = e.m.SessionPrincipal(ctx, s.ID)
		require.NoError(t, err)
	}
	e.clk.Advance(30*time.Minute - time.Second)
	_, err = e.m.SessionPrincipal(ctx, s.ID)
	require.NoError(t, err)
	e.clk.Advance(time.Second) // 12h after login
	_, err = e.m.SessionPrincipal(ctx, s.ID)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	require.Contains(t, err.Error(), "expired")
}

// TestPasswordBytesPast72NeverMatch: bcrypt reads only a password's first
// 72 bytes, so a stored 72-byte password followed by anything would also
// log in; a longer password never matches, at login or as the current
// password of a change.
func TestPasswordBytesPast72NeverMatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pw := strings.Repeat("p", 72)
	_, err := e.m.CreateUser(ctx, "ann", pw, operator, false)
	require.NoError(t, err)
	_, _, err = e.m.Login(ctx, "ann", pw+"anything", "10.0.0.1")
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	s, _, err := e.m.Login(ctx, "ann", pw, "10.0.0.1")
	require.NoError(t, err)
	_, err = e.m.ChangePassword(ctx, "ann", pw+"x", "a brand new password", s)
	require.ErrorIs(t, err, auth.ErrInvalid)
	require.Contains(t, err.Error(), "current password")
}

// TestPasswordChangeAudited: who changed a password, how many other
// sessions it ended and how many API tokens it left valid is in the audit
// log.
func TestPasswordChangeAudited(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	_, _, err = e.m.Login(ctx, "ann", "correct horse battery", "b")
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	_, err = e.m.ChangePassword(ctx, "ann", "correct horse battery", "a brand new password", s)
	require.NoError(t, err)
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: auth.ActionPasswordChange})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "ann", entries[0].Actor)
	require.JSONEq(t, `{"sessions_ended":"1","tokens_kept":"0"}`, string(entries[0].Detail))
}

// TestMinPasswordLenWithinBcryptLimit: a minimum longer than the 72 bytes
// bcrypt reads would refuse every password.
func TestMinPasswordLenWithinBcryptLimit(t *testing.T) {
	e := newEnv(t)
	for _, n := range []int{-1, 73} {
		_, err := auth.New(context.Background(), auth.Options{DB: e.db, Dialect: migrations.SQLite, Auditor: e.store, MinPasswordLen: n})
		require.ErrorIs(t, err, auth.ErrInvalid)
		require.Contains(t, err.Error(), "MinPasswordLen")
	}
}

// TestDatabaseHoldsNoUsableSecrets: what a read of the accounts tables
// yields (a backup, a replica) logs nobody in: sessions and tokens are
// stored as digests.
func TestDatabaseHoldsNoUsableSecrets(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	secret, tok, err := e.m.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "ann", "ci", operator, 0)
	require.NoError(t, err)

	var idHash, secretHash string
	require.NoError(t, e.db.QueryRowContext(ctx, `SELECT id_hash FROM ui_sessions`).Scan(&idHash))
	require.NoError(t, e.db.QueryRowContext(ctx, `SELECT secret_hash FROM ui_tokens`).Scan(&secretHash))
	require.NotContains(t, idHash, s.ID)
	require.NotContains(t, secret, secretHash)
	_, err = e.m.SessionPrincipal(ctx, idHash)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	_, err = e.m.TokenPrincipal(ctx, "gov_"+tok.ID+"_"+secretHash)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
}

func TestLoginThrottled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	for range 3 {
		_, _, err = e.m.Login(ctx, "ann", "guess guess guess", "10.0.0.1")
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	}
	_, _, err = e.m.Login(ctx, "ann", "correct horse battery", "10.0.0.9")
	require.ErrorIs(t, err, auth.ErrThrottled, "the right password does not help once the name is throttled")
	e.clk.Advance(10 * time.Second) // 6 per minute: one token per 10 s
	_, _, err = e.m.Login(ctx, "ann", "correct horse battery", "10.0.0.9")
	require.NoError(t, err)
}

func TestEnsureAdminOneTimePassword(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pw, err := e.m.EnsureAdmin(ctx, "admin")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pw), 20)
	again, err := e.m.EnsureAdmin(ctx, "admin")
	require.NoError(t, err)
	require.Empty(t, again, "only when there are no users")

	s, u, err := e.m.Login(ctx, "admin", pw, "a")
	require.NoError(t, err)
	require.True(t, u.MustChange)
	p, err := e.m.SessionPrincipal(ctx, s.ID)
	require.NoError(t, err)

	_, err = e.m.ChangePassword(ctx, "admin", pw, pw, p.Session)
	require.ErrorIs(t, err, auth.ErrInvalid)
	_, err = e.m.ChangePassword(ctx, "admin", pw, "a brand new password", p.Session)
	require.NoError(t, err)
	u, err = e.m.User(ctx, "admin")
	require.NoError(t, err)
	require.False(t, u.MustChange)
	_, _, err = e.m.Login(ctx, "admin", pw, "a")
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "the one-time password is gone")
}

func TestTokensScopedToUserRoles(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	both := []versioning.Role{versioning.RoleOperator, versioning.RoleApprover}
	u, err := e.m.CreateUser(ctx, "bot", "correct horse battery", both, false)
	require.NoError(t, err)
	self := &auth.Principal{User: u, Roles: u.Roles}

	_, _, err = e.m.CreateToken(ctx, self, "bot", "ci", []versioning.Role{versioning.RoleAdmin}, 0)
	require.ErrorIs(t, err, auth.ErrInvalid, "a token cannot hold a role its user lacks")

	secret, tok, err := e.m.CreateToken(ctx, self, "bot", "ci", operator, time.Hour)
	require.NoError(t, err)
	p, err := e.m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)
	require.Equal(t, operator, p.Roles, "approver is not in the token's scopes")

	_, err = e.m.TokenPrincipal(ctx, secret+"x")
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	_, err = e.m.TokenPrincipal(ctx, "garbage")
	require.ErrorIs(t, err, auth.ErrUnauthenticated)

	// Roles removed from the user are removed from the token too.
	require.NoError(t, e.m.SetRoles(ctx, "bot", approver))
	p, err = e.m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)
	require.Empty(t, p.Roles)

	e.clk.Advance(time.Hour)
	_, err = e.m.TokenPrincipal(ctx, secret)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)

	secret2, tok2, err := e.m.CreateToken(ctx, self, "bot", "ci2", approver, 0)
	require.NoError(t, err)
	require.NoError(t, e.m.RevokeToken(ctx, self, tok2.ID))
	_, err = e.m.TokenPrincipal(ctx, secret2)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)

	toks, err := e.m.Tokens(ctx, "bot")
	require.NoError(t, err)
	require.Len(t, toks, 2)
	require.Equal(t, tok.ID, toks[0].ID)

	other, err := e.m.CreateUser(ctx, "eve", "correct horse battery", operator, false)
	require.NoError(t, err)
	_, _, err = e.m.CreateToken(ctx, &auth.Principal{User: other, Roles: other.Roles}, "bot", "x", approver, 0)
	require.ErrorIs(t, err, auth.ErrForbidden)
}

func TestMiddlewareCSRFAndRoles(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	var gotErr error
	onErr := func(w http.ResponseWriter, r *http.Request, err error) { gotErr = err; w.WriteHeader(499) }
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	h := e.m.Middleware(onErr)(auth.Require(onErr, versioning.RoleOperator)(ok))
	hApprover := e.m.Middleware(onErr)(auth.Require(onErr, versioning.RoleApprover)(ok))
	cookie := &http.Cookie{Name: auth.CookieName, Value: s.ID}

	for _, tc := range []struct {
		name    string
		h       http.Handler
		method  string
		cookie  bool
		form    url.Values
		header  string
		code    int
		wantErr error
	}{
		{"anonymous get redirects", h, "GET", false, nil, "", http.StatusSeeOther, nil},
		{"anonymous post", h, "POST", false, nil, "", 499, auth.ErrUnauthenticated},
		{"post without csrf", h, "POST", true, url.Values{}, "", 499, auth.ErrCSRF},
		{"post wrong csrf", h, "POST", true, url.Values{"csrf": {"nope"}}, "", 499, auth.ErrCSRF},
		{"post form csrf", h, "POST", true, url.Values{"csrf": {s.CSRF}}, "", 204, nil},
		{"post header csrf", h, "POST", true, nil, s.CSRF, 204, nil},
		{"wrong role", hApprover, "POST", true, url.Values{"csrf": {s.CSRF}}, "", 499, auth.ErrForbidden},
		{"get with session", h, "GET", true, nil, "", 204, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotErr = nil
			var body *strings.Reader
			if tc.form != nil {
				body = strings.NewReader(tc.form.Encode())
			} else {
				body = strings.NewReader("")
			}
			r := httptest.NewRequest(tc.method, "/rules", body)
			if tc.form != nil {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			if tc.header != "" {
				r.Header.Set(auth.CSRFHeader, tc.header)
			}
			if tc.cookie {
				r.AddCookie(cookie)
			}
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, r)
			require.Equal(t, tc.code, w.Code)
			if tc.wantErr != nil {
				require.True(t, errors.Is(gotErr, tc.wantErr), "got %v", gotErr)
			}
		})
	}
}

func TestOutageGrace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		roleEdit  bool
		advance   time.Duration
		wantAlive bool
	}{
		{"recently validated", false, time.Minute, true},
		{"grace over", false, 6 * time.Minute, false},
		{"roles changed since", true, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
			require.NoError(t, err)
			s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
			require.NoError(t, err)
			p, err := e.m.SessionPrincipal(ctx, s.ID)
			require.NoError(t, err)
			require.False(t, p.Degraded)
			if tc.roleEdit {
				require.NoError(t, e.m.SetRoles(ctx, "ann", approver))
			}
			require.NoError(t, e.db.Close())
			e.clk.Advance(tc.advance)
			p, err = e.m.SessionPrincipal(ctx, s.ID)
			if !tc.wantAlive {
				require.ErrorIs(t, err, auth.ErrUnavailable)
				return
			}
			require.NoError(t, err)
			require.True(t, p.Degraded)
			_, err = e.m.SessionPrincipal(ctx, "someone-else")
			require.ErrorIs(t, err, auth.ErrUnavailable)
		})
	}
}

// TestUserManagementIsAudited: creating users and changing their roles
// through the UI left no trace in the audit log: who made whom an admin
// could not be told afterwards.
func TestUserManagementIsAudited(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := &auth.Principal{User: auth.User{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}, Roles: []versioning.Role{versioning.RoleAdmin}}
	_, err := e.m.CreateUserAs(ctx, admin, "bob", "correct horse battery", []versioning.Role{versioning.RoleViewer}, true)
	require.NoError(t, err)
	require.NoError(t, e.m.SetRolesAs(ctx, admin, "bob", []versioning.Role{versioning.RoleViewer, versioning.RoleApprover}))
	require.NoError(t, e.m.DeleteUserAs(ctx, admin, "bob"))
	require.Error(t, e.m.SetRolesAs(ctx, admin, "bob", []versioning.Role{versioning.RoleViewer}), "a refused change is not audited")
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{})
	require.NoError(t, err)
	var got []string
	for _, en := range entries {
		got = append(got, en.Actor+":"+string(en.Action)+":"+string(en.Detail))
	}
	require.Equal(t, []string{
		`root:user_create:{"roles":"viewer","user":"bob"}`,
		`root:user_roles:{"from":"viewer","to":"viewer,approver","user":"bob"}`,
		`root:user_delete:{"user":"bob"}`,
	}, got)
	for _, en := range entries {
		require.NotContains(t, string(en.Detail), "horse", "never the password")
	}
}

// TestAbandonedSessionsPurgedAtNextLogin: sessions never presented again
// (a browser closed) do not pile up in the table: a login deletes the
// user's ended ones.
func TestAbandonedSessionsPurgedAtNextLogin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	for range 5 {
		_, _, err = e.m.Login(ctx, "ann", "correct horse battery", "a")
		require.NoError(t, err)
		e.clk.Advance(13 * time.Hour)
	}
	var n int
	require.NoError(t, e.db.QueryRowContext(ctx, `SELECT count(*) FROM ui_sessions`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestRevokingRevokedTokenAuditedOnce: revoking a token again keeps the
// first revocation time and writes no second audit entry.
func TestRevokingRevokedTokenAuditedOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	p := &auth.Principal{User: u, Roles: u.Roles}
	_, tok, err := e.m.CreateToken(ctx, p, "ann", "ci", operator, 0)
	require.NoError(t, err)
	require.NoError(t, e.m.RevokeToken(ctx, p, tok.ID))
	e.clk.Advance(time.Minute)
	require.NoError(t, e.m.RevokeToken(ctx, p, tok.ID))
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionTokenRevoke})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	toks, err := e.m.Tokens(ctx, "ann")
	require.NoError(t, err)
	require.Equal(t, e.clk.Now().Add(-time.Minute), toks[0].RevokedAt)
}

// TestWrongCurrentPasswordAuditedAsLoginFailure: someone holding a session
// and guessing its user's password through the change form shows in the
// audit log as login failures do.
func TestWrongCurrentPasswordAuditedAsLoginFailure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	_, err = e.m.ChangePassword(ctx, "ann", "a guess at it", "a brand new password", s)
	require.ErrorIs(t, err, auth.ErrInvalid)
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionLoginFailure})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "ann", entries[0].Actor)
	require.Contains(t, string(entries[0].Detail), "password change")
}

// TestLoginRehashesAtConfiguredCost: after the bcrypt cost is raised, a
// user's next login stores their password at the new cost, so old hashes
// do not stay cheap (and their logins measurably faster than those of
// unknown names).
func TestLoginRehashesAtConfiguredCost(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	m, err := auth.New(ctx, auth.Options{DB: e.db, Dialect: migrations.SQLite, Auditor: e.store, Clock: e.clk, BcryptCost: bcrypt.MinCost + 1})
	require.NoError(t, err)
	_, _, err = m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	var hash string
	require.NoError(t, e.db.QueryRowContext(ctx, `SELECT password_hash FROM ui_users WHERE name = 'ann'`).Scan(&hash))
	cost, err := bcrypt.Cost([]byte(hash))
	require.NoError(t, err)
	require.Equal(t, bcrypt.MinCost+1, cost)
	_, _, err = m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
}
