package auth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/migrations"
	"governor.dev/governor/ui/auth"
)

// TestTokenWithoutLifetimeGetsDefaultExpiry: a token asked for with no
// lifetime gets Options.TokenTTL (90 days), not one that never expires.
func TestTokenWithoutLifetimeGetsDefaultExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	secret, tok, err := e.m.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "ann", "ci", operator, 0)
	require.NoError(t, err)
	require.Equal(t, e.clk.Now().UTC().Add(90*24*time.Hour), tok.ExpiresAt)
	e.clk.Advance(90 * 24 * time.Hour)
	_, err = e.m.TokenPrincipal(ctx, secret)
	require.ErrorIs(t, err, auth.ErrUnauthenticated)
	require.Contains(t, err.Error(), "expired")
}

// TestTokenLifetimeOverMaximumRefused: a lifetime over Options.TokenMaxTTL
// (365 days) is refused naming the field; the maximum itself is allowed.
func TestTokenLifetimeOverMaximumRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	p := &auth.Principal{User: u, Roles: u.Roles}
	_, _, err = e.m.CreateToken(ctx, p, "ann", "ci", operator, 366*24*time.Hour)
	require.ErrorIs(t, err, auth.ErrInvalid)
	require.Contains(t, err.Error(), "ttl")
	require.Contains(t, err.Error(), "365 days")
	_, tok, err := e.m.CreateToken(ctx, p, "ann", "ci", operator, 365*24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, e.clk.Now().UTC().Add(365*24*time.Hour), tok.ExpiresAt)
}

// TestTokenLifetimeOptionsValidated: a negative lifetime, or a default over
// the maximum, is refused at New naming the option.
func TestTokenLifetimeOptionsValidated(t *testing.T) {
	e := newEnv(t)
	for name, tc := range map[string]struct {
		def, max time.Duration
		field    string
	}{
		"negative max":         {max: -time.Hour, field: "TokenMaxTTL"},
		"negative default":     {def: -time.Hour, field: "TokenTTL"},
		"default over max":     {def: 48 * time.Hour, max: 24 * time.Hour, field: "TokenTTL"},
		"default over default": {def: 400 * 24 * time.Hour, field: "TokenTTL"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := auth.New(context.Background(), auth.Options{DB: e.db, Dialect: migrations.SQLite, Auditor: e.store, TokenTTL: tc.def, TokenMaxTTL: tc.max})
			require.ErrorIs(t, err, auth.ErrInvalid)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

// TestTokenWithoutExpiryFromBeforeKeepsWorking: a token created without an
// expiry before one was required keeps working and is flagged
// (NeverExpires), so an upgrade breaks no automation.
func TestTokenWithoutExpiryFromBeforeKeepsWorking(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, err := e.m.CreateUser(ctx, "ann", "correct horse battery", operator, false)
	require.NoError(t, err)
	secret, tok, err := e.m.CreateToken(ctx, &auth.Principal{User: u, Roles: u.Roles}, "ann", "ci", operator, time.Hour)
	require.NoError(t, err)
	_, err = e.db.ExecContext(ctx, `UPDATE ui_tokens SET expires_ms = 0 WHERE id = ?`, tok.ID)
	require.NoError(t, err)
	e.clk.Advance(1000 * 24 * time.Hour)
	_, err = e.m.TokenPrincipal(ctx, secret)
	require.NoError(t, err)
	toks, err := e.m.Tokens(ctx, "ann")
	require.NoError(t, err)
	require.Len(t, toks, 1)
	require.True(t, toks[0].NeverExpires())
}
