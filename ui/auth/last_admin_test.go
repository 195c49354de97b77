package auth_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
)

var (
	adminOnly     = []versioning.Role{versioning.RoleAdmin}
	adminOperator = []versioning.Role{versioning.RoleAdmin, versioning.RoleOperator}
)

// requireNoAdminLeftRefused checks on m that the last admin can neither be
// demoted nor deleted, while everything that leaves an admin still works.
func requireNoAdminLeftRefused(t *testing.T, m *auth.Manager) {
	t.Helper()
	ctx := context.Background()
	for _, u := range []string{"ann", "bob"} {
		_, err := m.CreateUser(ctx, u, "correct horse battery", adminOnly, false)
		require.NoError(t, err)
	}
	_, err := m.CreateUser(ctx, "ops", "correct horse battery", operator, false)
	require.NoError(t, err)
	s, _, err := m.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	require.NoError(t, err)

	require.NoError(t, m.SetRoles(ctx, "ann", operator), "bob is still an admin")
	err = m.SetRoles(ctx, "bob", operator)
	require.ErrorIs(t, err, auth.ErrLastAdmin)
	require.ErrorIs(t, err, auth.ErrInvalid, "shown as a refused input")
	require.Contains(t, err.Error(), "roles:")
	require.Contains(t, err.Error(), `"bob"`)
	err = m.DeleteUser(ctx, "bob")
	require.ErrorIs(t, err, auth.ErrLastAdmin)
	require.Contains(t, err.Error(), "name:")

	u, err := m.User(ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, adminOnly, u.Roles, "a refused change changes nothing")
	_, err = m.SessionPrincipal(ctx, s.ID)
	require.NoError(t, err, "a refused change ends no session")

	require.NoError(t, m.SetRoles(ctx, "bob", adminOperator), "the last admin may change roles and stay admin")
	require.NoError(t, m.SetRoles(ctx, "ops", approver), "others' roles still change")
	require.NoError(t, m.DeleteUser(ctx, "ops"), "others may still be deleted")
	require.ErrorIs(t, m.SetRoles(ctx, "nobody", operator), auth.ErrNotFound)
	require.ErrorIs(t, m.DeleteUser(ctx, "nobody"), auth.ErrNotFound)

	require.NoError(t, m.SetRoles(ctx, "ann", adminOnly))
	require.NoError(t, m.DeleteUser(ctx, "bob"), "with another admin, the last-but-one goes")
}

func TestLastAdminCannotBeDemotedOrDeleted(t *testing.T) {
	requireNoAdminLeftRefused(t, newEnv(t).m)
}

func TestPostgresLastAdminCannotBeDemotedOrDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	m, _, _, _ := postgresManager(t)
	requireNoAdminLeftRefused(t, m)
}

// TestPostgresDemotionWaitsForConcurrentOne: while another transaction has
// taken ann's admin role but not committed, taking bob's waits for it and
// then sees that bob is the last admin.
func TestPostgresDemotionWaitsForConcurrentOne(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := context.Background()
	m, db, _, _ := postgresManager(t)
	for _, u := range []string{"ann", "bob"} {
		_, err := m.CreateUser(ctx, u, "correct horse battery", adminOnly, false)
		require.NoError(t, err)
	}
	for name, change := range map[string]func() error{
		"set roles": func() error { return m.SetRoles(ctx, "bob", operator) },
		"delete":    func() error { return m.DeleteUser(ctx, "bob") },
	} {
		t.Run(name, func(t *testing.T) {
			other, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = other.Rollback() }()
			_, err = other.ExecContext(ctx, `UPDATE ui_users SET roles = 'operator' WHERE name = 'ann'`)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- change() }()
			require.Eventually(t, func() bool {
				var n int
				_ = db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
				return n > 0
			}, 10*time.Second, 5*time.Millisecond, "the change waits on the other demotion")
			require.NoError(t, other.Commit())
			require.ErrorIs(t, <-done, auth.ErrLastAdmin)
			require.NoError(t, m.SetRoles(ctx, "ann", adminOnly))
		})
	}
}

// requireConcurrentDemotionsLeaveAnAdmin has two admins take each other's
// admin role at the same time, through a and b (two replicas' managers on
// one database), rounds times: exactly one succeeds each time.
func requireConcurrentDemotionsLeaveAnAdmin(t *testing.T, a, b *auth.Manager, rounds int) {
	t.Helper()
	ctx := context.Background()
	for _, u := range []string{"ann", "bob"} {
		_, err := a.CreateUser(ctx, u, "correct horse battery", adminOnly, false)
		require.NoError(t, err)
	}
	for range rounds {
		var (
			wg   sync.WaitGroup
			errs [2]error
			go1  = make(chan struct{})
		)
		for i, c := range []struct {
			m    *auth.Manager
			user string
		}{{a, "bob"}, {b, "ann"}} {
			wg.Go(func() {
				<-go1
				errs[i] = c.m.SetRoles(ctx, c.user, operator)
			})
		}
		close(go1)
		wg.Wait()
		var admins, refused int
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, auth.ErrLastAdmin)
				refused++
			}
		}
		users, err := a.Users(ctx)
		require.NoError(t, err)
		for _, u := range users {
			for _, r := range u.Roles {
				if r == versioning.RoleAdmin {
					admins++
				}
			}
		}
		require.Equal(t, 1, refused, "exactly one of the two demotions is refused")
		require.Equal(t, 1, admins)
		require.NoError(t, a.SetRoles(ctx, "ann", adminOnly))
		require.NoError(t, a.SetRoles(ctx, "bob", adminOnly))
	}
}

func TestPostgresConcurrentDemotionsLeaveAnAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	a, db, st, clk := postgresManager(t)
	b, err := auth.New(context.Background(), auth.Options{DB: db, Dialect: migrations.Postgres, Auditor: st, Clock: clk, BcryptCost: bcrypt.MinCost})
	require.NoError(t, err)
	requireConcurrentDemotionsLeaveAnAdmin(t, a, b, 20)
}

// TestSQLiteConcurrentDemotionsLeaveAnAdmin: two replicas' pools on one
// SQLite file, as cmd/web opens it.
func TestSQLiteConcurrentDemotionsLeaveAnAdmin(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "governor.db")
	var ms [2]*auth.Manager
	for i := range ms {
		db, err := sqlitedb.Open(path, sqlitedb.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		ms[i], err = auth.New(context.Background(), auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: e.store, Clock: e.clk, BcryptCost: bcrypt.MinCost})
		require.NoError(t, err)
	}
	requireConcurrentDemotionsLeaveAnAdmin(t, ms[0], ms[1], 20)
}
