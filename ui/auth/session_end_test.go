package auth_test

import (
	"context"
	"strconv"
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

// TestPasswordChangeRevokesTokensWhenAsked: a password change asked to
// revoke the user's API tokens revokes every active one (a token minted
// from a stolen session stops working) in the same change, and the audit
// entry says how many; expired and revoked tokens are not counted.
func TestPasswordChangeRevokesTokensWhenAsked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	by := &auth.Principal{User: u, Roles: u.Roles}
	var secrets []string
	for i := range 2 {
		secret, _, err := e.m.CreateToken(ctx, by, "ann", "ci "+strconv.Itoa(i), operator, 24*time.Hour)
		require.NoError(t, err)
		secrets = append(secrets, secret)
	}
	_, old, err := e.m.CreateToken(ctx, by, "ann", "old", operator, time.Hour)
	require.NoError(t, err)
	_, gone, err := e.m.CreateToken(ctx, by, "ann", "gone", operator, 24*time.Hour)
	require.NoError(t, err)
	require.NoError(t, e.m.RevokeToken(ctx, by, gone.ID))
	e.clk.Advance(2 * time.Hour) // "old" has expired
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)

	ns, n, err := e.m.ChangePasswordRevokingTokens(ctx, "ann", "correct horse battery", "a brand new password", s)
	require.NoError(t, err)
	require.NotNil(t, ns)
	require.Equal(t, 2, n)
	for _, secret := range secrets {
		_, err = e.m.TokenPrincipal(ctx, secret)
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	}
	toks, err := e.m.Tokens(ctx, "ann")
	require.NoError(t, err)
	for _, tok := range toks {
		if tok.ID == old.ID {
			require.True(t, tok.RevokedAt.IsZero(), "an expired token keeps its record as it was")
			continue
		}
		require.False(t, tok.RevokedAt.IsZero(), "token %s revoked", tok.Label)
	}
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: auth.ActionPasswordChange})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.JSONEq(t, `{"sessions_ended":"0","tokens_revoked":"2"}`, string(entries[0].Detail))
}

// TestPasswordChangeKeepsTokensUnlessAsked: a plain password change leaves
// the API tokens valid, and the audit entry says how many stayed valid.
func TestPasswordChangeKeepsTokensUnlessAsked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	secret, _, err := e.m.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "ann", "ci", operator, time.Hour)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	_, err = e.m.ChangePassword(ctx, "ann", "correct horse battery", "a brand new password", s)
	require.NoError(t, err)
	_, err = e.m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)
	entries, err := e.store.Audit(ctx, versioning.AuditFilter{Action: auth.ActionPasswordChange})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.JSONEq(t, `{"sessions_ended":"0","tokens_kept":"1"}`, string(entries[0].Detail))
}

// TestPasswordChangeRefusedRevokesNoToken: a password change refused (wrong
// current password, weak new one) revokes no token: nothing half-applied.
func TestPasswordChangeRefusedRevokesNoToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	secret, _, err := e.m.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "ann", "ci", operator, time.Hour)
	require.NoError(t, err)
	s, _, err := e.m.Login(ctx, "ann", "correct horse battery", "a")
	require.NoError(t, err)
	_, _, err = e.m.ChangePasswordRevokingTokens(ctx, "ann", "a wrong guess", "a brand new password", s)
	require.ErrorIs(t, err, auth.ErrInvalid)
	_, _, err = e.m.ChangePasswordRevokingTokens(ctx, "ann", "correct horse battery", "short", s)
	require.ErrorIs(t, err, auth.ErrInvalid)
	_, err = e.m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)
}

// TestTokenMintedByASessionThePasswordChangeEndedIsRefused: a request
// authenticated by a session just before a password change ended that
// session (a stolen cookie's request in flight) mints no token after it:
// the token would outlive the revocation the change made.
func TestTokenMintedByASessionThePasswordChangeEndedIsRefused(t *testing.T) {
	e := newEnv(t)
	requireNoTokenFromEndedSession(t, e.m)
}

// TestPostgresTokenMintedByASessionThePasswordChangeEndedIsRefused: the
// same on PostgreSQL.
func TestPostgresTokenMintedByASessionThePasswordChangeEndedIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	m, _, _, _ := postgresManager(t)
	requireNoTokenFromEndedSession(t, m)
}

func requireNoTokenFromEndedSession(t *testing.T, m *auth.Manager) {
	t.Helper()
	ctx := context.Background()
	_, err := m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	stolen, _, err := m.Login(ctx, "ann", "correct horse battery", "10.0.0.9")
	require.NoError(t, err)
	own, _, err := m.Login(ctx, "ann", "correct horse battery", "10.0.0.1")
	require.NoError(t, err)
	inFlight, err := m.SessionPrincipal(ctx, stolen.ID)
	require.NoError(t, err)
	mine, err := m.SessionPrincipal(ctx, own.ID)
	require.NoError(t, err)

	secret, _, err := m.CreateToken(ctx, mine, "ann", "ci", operator, time.Hour)
	require.NoError(t, err)
	byToken, err := m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)

	_, n, err := m.ChangePasswordRevokingTokens(ctx, "ann", "correct horse battery", "a brand new password", mine.Session)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, _, err = m.CreateToken(ctx, inFlight, "ann", "late", operator, time.Hour)
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "the session the change ended")
	_, _, err = m.CreateToken(ctx, byToken, "ann", "later", operator, time.Minute)
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "the token the change revoked")
	toks, err := m.Tokens(ctx, "ann")
	require.NoError(t, err)
	require.Len(t, toks, 1, "no token outlives the revocation")
	require.False(t, toks[0].RevokedAt.IsZero())
}
