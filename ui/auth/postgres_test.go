package auth_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/auth"
)

// TestPostgres runs the account lifecycle on a real PostgreSQL database
// shared with the rules store, as in production.
func TestPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := context.Background()
	m, _, st, clk := postgresManager(t)

	pw, err := m.EnsureAdmin(ctx, "admin")
	require.NoError(t, err)
	_, err = m.CreateUser(ctx, "admin", "correct horse battery", operator, false)
	require.ErrorIs(t, err, auth.ErrExists)
	s, u, err := m.Login(ctx, "admin", pw, "10.0.0.1")
	require.NoError(t, err)
	require.True(t, u.MustChange)
	p, err := m.SessionPrincipal(ctx, s.ID)
	require.NoError(t, err)
	ns, err := m.ChangePassword(ctx, "admin", pw, "a new long password", p.Session)
	require.NoError(t, err)
	_, err = m.SessionPrincipal(ctx, s.ID)
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "the password change replaced the session")
	p, err = m.SessionPrincipal(ctx, ns.ID)
	require.NoError(t, err)

	secret, tok, err := m.CreateToken(ctx, p, "admin", "ci", []versioning.Role{versioning.RoleViewer}, time.Hour)
	require.NoError(t, err)
	tp, err := m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)
	require.Equal(t, []versioning.Role{versioning.RoleViewer}, tp.Roles)
	require.NoError(t, m.RevokeToken(ctx, p, tok.ID))
	_, err = m.TokenPrincipal(ctx, secret)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)

	_, err = m.CreateUser(ctx, "bob", "correct horse battery", approver, false)
	require.NoError(t, err)
	require.NoError(t, m.SetRoles(ctx, "bob", operator))
	users, err := m.Users(ctx)
	require.NoError(t, err)
	require.Len(t, users, 2)
	require.NoError(t, m.DeleteUser(ctx, "bob"))
	require.ErrorIs(t, m.DeleteUser(ctx, "bob"), auth.ErrNotFound)

	// Use pushes the idle expiry back (1h by default); the fixed lifetime
	// still ends the session.
	for range 3 {
		clk.Advance(45 * time.Minute)
		_, err = m.SessionPrincipal(ctx, ns.ID)
		require.NoError(t, err)
	}
	clk.Advance(13 * time.Hour)
	_, err = m.SessionPrincipal(ctx, ns.ID)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	rep, err := st.VerifyAudit(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, rep.Entries, int64(3), "login, token create, token revoke")
}

// TestPostgresPasswordChangeRevokesTokens: on PostgreSQL too, a password
// change asked to revoke the user's tokens revokes the active ones with it.
func TestPostgresPasswordChangeRevokesTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := context.Background()
	m, _, _, clk := postgresManager(t)
	u, err := m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	by := &auth.Principal{User: u, Roles: u.Roles}
	secret, _, err := m.CreateToken(ctx, by, "ann", "ci", operator, 24*time.Hour)
	require.NoError(t, err)
	_, _, err = m.CreateToken(ctx, by, "ann", "expired", operator, time.Hour)
	require.NoError(t, err)
	clk.Advance(2 * time.Hour)
	s, _, err := m.Login(ctx, "ann", "correct horse battery", "10.0.0.1")
	require.NoError(t, err)
	ns, n, err := m.ChangePasswordRevokingTokens(ctx, "ann", "correct horse battery", "a new long password", s)
	require.NoError(t, err)
	require.NotNil(t, ns)
	require.Equal(t, 1, n, "the expired token is not counted")
	_, err = m.TokenPrincipal(ctx, secret)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
}

// TestEnsureAdminConcurrentReplicasBothStart: two replicas starting on a
// fresh database both see no users; the one whose admin is created second
// starts normally (no password to print) instead of failing with
// ErrExists. The other replica's insert is held uncommitted until this
// one's waits on it.
func TestEnsureAdminConcurrentReplicasBothStart(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := context.Background()
	m, db, _, _ := postgresManager(t)

	other, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = other.ExecContext(ctx, `INSERT INTO ui_users (name, password_hash, roles, must_change, created_ms, updated_ms) VALUES ('admin', 'x', 'admin', 1, 0, 0)`)
	require.NoError(t, err)
	type result struct {
		pw  string
		err error
	}
	done := make(chan result, 1)
	go func() {
		pw, err := m.EnsureAdmin(ctx, "admin")
		done <- result{pw, err}
	}()
	require.Eventually(t, func() bool {
		var n int
		_ = db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return n > 0
	}, 10*time.Second, 5*time.Millisecond, "EnsureAdmin waits on the other replica's insert")
	require.NoError(t, other.Commit())
	r := <-done
	require.NoError(t, r.err)
	require.Empty(t, r.pw, "the other replica prints the password")
}

// postgresManager is a Manager on the real PostgreSQL database, sharing it
// with the rules store (its auditor) as in production.
func postgresManager(t *testing.T) (*auth.Manager, *sql.DB, versioning.Store, *clock.Fake) {
	t.Helper()
	url := testenv.Postgres(t)
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := postgres.Open(ctx, postgres.Options{URL: url, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	m, err := auth.New(ctx, auth.Options{DB: db, Dialect: migrations.Postgres, Auditor: st, Clock: clk, BcryptCost: bcrypt.MinCost})
	require.NoError(t, err)
	return m, db, st, clk
}
