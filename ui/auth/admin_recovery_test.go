package auth_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
)

// requireEnsureAdminRecovers checks on m (database db, auditor st) that a
// database with users but no admin, as one from before the last admin was
// guarded, is recovered by EnsureAdmin with the configured admin name, and
// that EnsureAdmin changes nothing while an admin exists.
func requireEnsureAdminRecovers(t *testing.T, m *auth.Manager, db *sql.DB, st versioning.Store) {
	t.Helper()
	ctx := context.Background()
	_, err := m.CreateUser(ctx, "ops", "correct horse battery", operator, false)
	require.NoError(t, err)

	pw, err := m.EnsureAdmin(ctx, "admin")
	require.NoError(t, err)
	require.NotEmpty(t, pw, "no user named admin: it is created with a one-time password")
	u, err := m.User(ctx, "admin")
	require.NoError(t, err)
	require.Contains(t, u.Roles, versioning.RoleAdmin)
	require.True(t, u.MustChange)
	_, u, err = m.Login(ctx, "admin", pw, "10.0.0.1")
	require.NoError(t, err)

	pw, err = m.EnsureAdmin(ctx, "ops")
	require.NoError(t, err)
	require.Empty(t, pw)
	u, err = m.User(ctx, "ops")
	require.NoError(t, err)
	require.Equal(t, operator, u.Roles, "with an admin, EnsureAdmin changes nobody")

	_, err = db.ExecContext(ctx, `UPDATE ui_users SET roles = 'viewer' WHERE name = 'admin'`)
	require.NoError(t, err, "no admin left, as before the guard")
	pw, err = m.EnsureAdmin(ctx, "OPS")
	require.NoError(t, err)
	require.Empty(t, pw, "an existing user is promoted and keeps its password")
	u, err = m.User(ctx, "ops")
	require.NoError(t, err)
	require.Equal(t, []versioning.Role{versioning.RoleOperator, versioning.RoleAdmin}, u.Roles)
	_, _, err = m.Login(ctx, "ops", "correct horse battery", "10.0.0.1")
	require.NoError(t, err)
	u, err = m.User(ctx, "admin")
	require.NoError(t, err)
	require.Equal(t, []versioning.Role{versioning.RoleViewer}, u.Roles)

	entries, err := st.Audit(ctx, versioning.AuditFilter{Action: auth.ActionAdminRecover, Newest: false})
	require.NoError(t, err)
	require.Len(t, entries, 2, "each recovery is audited")
	var how []string
	for _, e := range entries {
		var d map[string]string
		require.NoError(t, json.Unmarshal(e.Detail, &d))
		how = append(how, d["user"]+":"+d["how"])
	}
	require.ElementsMatch(t, []string{"admin:created", "ops:promoted"}, how)
	_, err = st.VerifyAudit(ctx)
	require.NoError(t, err)
}

func TestEnsureAdminRecoversDatabaseWithoutAdmin(t *testing.T) {
	e := newEnv(t)
	requireEnsureAdminRecovers(t, e.m, e.db, e.store)
}

func TestPostgresEnsureAdminRecoversDatabaseWithoutAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	m, db, st, _ := postgresManager(t)
	requireEnsureAdminRecovers(t, m, db, st)
}

func TestEnsureAdminRefusesBadName(t *testing.T) {
	_, err := newEnv(t).m.EnsureAdmin(context.Background(), "a b")
	require.ErrorIs(t, err, auth.ErrInvalid)
	require.Contains(t, err.Error(), "name:")
}

func TestAdminEnsuredBanner(t *testing.T) {
	for _, tc := range []struct {
		e    auth.AdminEnsured
		want string
	}{
		{auth.AdminEnsured{}, ""},
		{auth.AdminEnsured{User: "admin", Password: "pw", Created: true}, `Created the first admin "admin" with the one-time password: pw`},
		{auth.AdminEnsured{User: "admin", Password: "pw", Created: true, Recovered: true}, `No user held the admin role: created the admin "admin" with the one-time password: pw`},
		{auth.AdminEnsured{User: "Admin", Recovered: true}, `No user held the admin role: gave it to the existing user "Admin", who logs in with their own password.`},
	} {
		got := tc.e.Banner()
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%+v: banner %q, want it to start with %q", tc.e, got, tc.want)
		}
	}
}
