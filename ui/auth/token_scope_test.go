package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/ui/auth"
)

// TestTokenCreatesNoBroaderToken: a token acts with its scopes only, so a
// token acting for its user (a library caller; the pages refuse tokens
// outright) never creates a token with a role it lacks or one that outlives
// it, even when its user holds that role.
func TestTokenCreatesNoBroaderToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	both := []versioning.Role{versioning.RoleViewer, versioning.RoleApprover}
	u, err := e.m.CreateUser(ctx, "carol", "correct horse battery", both, false)
	require.NoError(t, err)
	self := &auth.Principal{User: u, Roles: u.Roles}
	viewer := []versioning.Role{versioning.RoleViewer}
	secret, _, err := e.m.CreateToken(ctx, self, "carol", "dashboards", viewer, time.Hour)
	require.NoError(t, err)
	tok, err := e.m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)

	_, _, err = e.m.CreateToken(ctx, tok, "carol", "escalated", approver, time.Minute)
	require.ErrorIs(t, err, auth.ErrForbidden)
	require.Contains(t, err.Error(), "scopes:")
	_, _, err = e.m.CreateToken(ctx, tok, "carol", "forever", viewer, 0)
	require.ErrorIs(t, err, auth.ErrForbidden, "no expiry outlives a token that expires")
	require.Contains(t, err.Error(), "ttl:")
	_, _, err = e.m.CreateToken(ctx, tok, "carol", "longer", viewer, 2*time.Hour)
	require.ErrorIs(t, err, auth.ErrForbidden)

	_, _, err = e.m.CreateToken(ctx, tok, "carol", "narrower", viewer, time.Minute)
	require.NoError(t, err, "a token may create one no broader than itself")
	toks, err := e.m.Tokens(ctx, "carol")
	require.NoError(t, err)
	require.Len(t, toks, 2)
}
