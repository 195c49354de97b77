package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
)

// TestPasswordChangeGivesNewSessionIDAndEndsOthers: after a password
// change the session it was made from goes on under a new id and CSRF
// token, and every other session (a stolen cookie) ends.
func TestPasswordChangeGivesNewSessionIDAndEndsOthers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	stolen, _, err := e.m.Login(ctx, "ann", "correct horse battery", "b")
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	ns, err := e.m.ChangePassword(ctx, "ann", "correct horse battery", "a brand new password", s)
	require.NoError(t, err)
	require.NotNil(t, ns)
	require.NotEqual(t, s.ID, ns.ID)
	require.NotEqual(t, s.CSRF, ns.CSRF)
	for _, id := range []string{s.ID, stolen.ID} {
		_, err = e.m.SessionPrincipal(ctx, id)
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	}
	p, err := e.m.SessionPrincipal(ctx, ns.ID)
	require.NoError(t, err)
	require.Equal(t, "ann", p.User.Name)
}

// TestDeleteUserEndsSessionsAndTokensAtOnce: a deleted user's sessions and
// tokens stop working on the next request.
func TestDeleteUserEndsSessionsAndTokensAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "root", "correct horse battery", []versioning.Role{versioning.RoleAdmin}, false)
	require.NoError(t, err)
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	_, err = e.m.SessionPrincipal(ctx, s.ID)
	require.NoError(t, err)
	secret, _, err := e.m.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "ann", "ci", operator, time.Hour)
	require.NoError(t, err)
	require.NoError(t, e.m.DeleteUser(ctx, "ann"))
	_, err = e.m.SessionPrincipal(ctx, s.ID)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	_, err = e.m.TokenPrincipal(ctx, secret)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	var n int
	require.NoError(t, e.db.QueryRowContext(ctx, `SELECT count(*) FROM ui_tokens WHERE username = 'ann'`).Scan(&n))
	require.Zero(t, n)
}

// TestRoleRemovalNarrowsTokensAtOnce: a token acts with the roles its user
// holds now: taking a role away takes it from the user's tokens on their
// next request.
func TestRoleRemovalNarrowsTokensAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	both := []versioning.Role{versioning.RoleOperator, versioning.RoleApprover}
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", both, false)
	require.NoError(t, err)
	secret, _, err := e.m.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "ann", "ci", approver, time.Hour)
	require.NoError(t, err)
	require.NoError(t, e.m.SetRoles(ctx, "ann", operator))
	p, err := e.m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)
	require.Empty(t, p.Roles)
	require.False(t, p.Has(approver...))
}

// TestPasswordChangeEndsSessionsInOutageCache: a session ended by a password
// change is not let back in read-only while the database is down.
func TestPasswordChangeEndsSessionsInOutageCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	stolen, _, err := e.m.Login(ctx, "ann", "correct horse battery", "b")
	require.NoError(t, err)
	_, err = e.m.SessionPrincipal(ctx, stolen.ID)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	_, err = e.m.SessionPrincipal(ctx, s.ID)
	require.NoError(t, err)
	_, err = e.m.ChangePassword(ctx, "ann", "correct horse battery", "a brand new password", s)
	require.NoError(t, err)
	require.NoError(t, e.db.Close())
	for _, id := range []string{s.ID, stolen.ID} {
		_, err = e.m.SessionPrincipal(ctx, id)
		require.ErrorIs(t, err, auth.ErrUnavailable)
	}
}
