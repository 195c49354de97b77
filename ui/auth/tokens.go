package auth

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
)

const tokenPrefix = "gov_"

// FormatTTL writes a token lifetime as the account page offers it and as
// errors about lifetimes name it: in days when it is a whole number of them
// ("1 day", "365 days"), as a duration otherwise ("36h0m0s").
func FormatTTL(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == day:
		return "1 day"
	case d%day == 0:
		return strconv.FormatInt(int64(d/day), 10) + " days"
	}
	return d.String()
}

// TokenTTLs are the lifetime a token gets when created without one
// (Options.TokenTTL) and the longest it may be created with
// (Options.TokenMaxTTL), for a form to offer.
func (m *Manager) TokenTTLs() (def, maxTTL time.Duration) { return m.o.TokenTTL, m.o.TokenMaxTTL }

// warnTokensWithoutExpiry logs how many unrevoked tokens never expire
// (created before every token had to), so that they are seen and replaced.
func (m *Manager) warnTokensWithoutExpiry(ctx context.Context) {
	var n int
	err := m.db.QueryRowContext(ctx, `SELECT count(*) FROM ui_tokens WHERE expires_ms = 0 AND revoked_ms = 0`).Scan(&n)
	if err != nil {
		m.o.Logger.Warn("auth: counting API tokens without expiry failed", "err", err)
		return
	}
	if n > 0 {
		m.o.Logger.Warn("auth: API tokens without expiry are still valid; replace them with tokens that expire and revoke them (account page)", "tokens", n, "max_token_ttl", m.o.TokenMaxTTL)
	}
}

// CreateToken issues an API token for user with the given scopes (role
// names, each of which the user must hold) and lifetime: 0 is
// Options.TokenTTL (default 90 days), more than Options.TokenMaxTTL
// (default 365 days) is refused; every token expires. The returned secret
// is shown once and never stored. A token acting for its user (by.Token
// set) grants no scope beyond its own roles and no lifetime beyond its own
// expiry: a token never mints a broader one. A session or token that
// ended (a password change, logout, revocation) after it authenticated the
// request mints nothing (ErrUnauthenticated).
func (m *Manager) CreateToken(ctx context.Context, by *Principal, user, label string, scopes []versioning.Role, ttl time.Duration) (string, Token, error) {
	if label == "" || len(label) > 100 {
		return "", Token{}, fmt.Errorf("%w: label: required, at most 100 bytes", ErrInvalid)
	}
	if err := validateRoles("scopes", scopes); err != nil {
		return "", Token{}, err
	}
	if ttl < 0 {
		return "", Token{}, fmt.Errorf("%w: ttl: must not be negative", ErrInvalid)
	}
	if ttl == 0 {
		ttl = m.o.TokenTTL
	}
	if ttl > m.o.TokenMaxTTL {
		return "", Token{}, fmt.Errorf("%w: ttl: must be at most %s (the longest a token may live)", ErrInvalid, FormatTTL(m.o.TokenMaxTTL))
	}
	if by == nil || (by.User.Name != user && !by.Has(versioning.RoleAdmin)) {
		return "", Token{}, fmt.Errorf("%w: only admins create tokens for other users", ErrForbidden)
	}
	now := m.o.Clock.Now().UTC()
	if by.Token != nil {
		for _, s := range scopes {
			if !slices.Contains(by.Roles, s) {
				return "", Token{}, fmt.Errorf("%w: scopes: the token acting holds no role %q; it may not grant it", ErrForbidden, s)
			}
		}
		if exp := by.Token.ExpiresAt; !exp.IsZero() && now.Add(ttl).After(exp) {
			return "", Token{}, fmt.Errorf("%w: ttl: the token acting expires at %s; a token it creates may not outlive it", ErrForbidden, exp.Format(time.RFC3339))
		}
	}
	u, err := m.User(ctx, user)
	if err != nil {
		return "", Token{}, err
	}
	for _, s := range scopes {
		if !slices.Contains(u.Roles, s) {
			return "", Token{}, fmt.Errorf("%w: scopes: %s does not hold role %q", ErrInvalid, user, s)
		}
	}
	t := Token{ID: strings.ToLower(randomString(9)), User: user, Label: label, Scopes: scopes, CreatedAt: now}
	t.ID = strings.NewReplacer("_", "x", "-", "y").Replace(t.ID)
	t.ExpiresAt = now.Add(ttl)
	expires := t.ExpiresAt.UnixMilli()
	secret := randomString(32)
	args := []any{t.ID, hashSecret(secret), user, label, versioning.JoinRoles(scopes), now.UnixMilli(), expires}
	query := `INSERT INTO ui_tokens (id, secret_hash, username, label, scopes, created_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?)`
	if cond, condArg := m.stillAuthenticated(by); cond != "" {
		query = `INSERT INTO ui_tokens (id, secret_hash, username, label, scopes, created_ms, expires_ms)
			SELECT CAST(? AS text), CAST(? AS text), CAST(? AS text), CAST(? AS text), CAST(? AS text), CAST(? AS bigint), CAST(? AS bigint)
			WHERE ` + cond
		args = append(args, condArg)
	}
	res, err := m.db.ExecContext(ctx, m.q(query), args...)
	if err != nil {
		return "", Token{}, unavailable(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return "", Token{}, unavailable(err)
	} else if n == 0 {
		return "", Token{}, fmt.Errorf("%w: the session or token asking ended (a password change, logout or revocation) before the token was created; log in again", ErrUnauthenticated)
	}
	m.audit(ctx, by.Actor(), versioning.ActionTokenCreate, detailJSON("token", t.ID, "user", user, "scopes", versioning.JoinRoles(scopes)))
	return tokenPrefix + t.ID + "_" + secret, t, nil
}

// stillAuthenticated is the condition under which CreateToken inserts a
// token minted by by's session or token, with its argument: that the
// session still exists, or the token is still unrevoked, when the insert
// runs. A request authenticated just before a password change ended its
// session (or revoked its token) would otherwise mint a token after the
// change's revocation, which it would outlive. On PostgreSQL the row is
// locked for share, so a password change deleting or revoking it waits
// for the insert and then revokes the new token with the rest; SQLite
// runs one writer at a time. "" when by is neither (a caller of this
// package acting for the user).
func (m *Manager) stillAuthenticated(by *Principal) (cond string, arg any) {
	lock := ""
	if m.o.Dialect == migrations.Postgres {
		lock = " FOR SHARE"
	}
	switch {
	case by.Session != nil:
		return `EXISTS (SELECT 1 FROM ui_sessions WHERE id_hash = ?` + lock + `)`, hashSecret(by.Session.ID)
	case by.Token != nil:
		return `EXISTS (SELECT 1 FROM ui_tokens WHERE id = ? AND revoked_ms = 0` + lock + `)`, by.Token.ID
	}
	return "", nil
}

// Tokens lists a user's tokens.
func (m *Manager) Tokens(ctx context.Context, user string) ([]Token, error) {
	rows, err := m.db.QueryContext(ctx, m.q(`SELECT id, label, scopes, created_ms, expires_ms, revoked_ms FROM ui_tokens WHERE username = ? ORDER BY created_ms`), user)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t := Token{User: user}
		var scopes string
		var c, e, r int64
		if err := rows.Scan(&t.ID, &t.Label, &scopes, &c, &e, &r); err != nil {
			return nil, unavailable(err)
		}
		t.Scopes, t.CreatedAt, t.ExpiresAt, t.RevokedAt = versioning.SplitRoles(scopes), msTime(c), msTime(e), msTime(r)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// RevokeToken revokes a token of by's own, or any token for an admin, and
// audits it. Revoking a revoked token changes nothing and is not audited
// again.
func (m *Manager) RevokeToken(ctx context.Context, by *Principal, id string) error {
	var owner string
	err := m.db.QueryRowContext(ctx, m.q(`SELECT username FROM ui_tokens WHERE id = ?`), id).Scan(&owner)
	if isNoRows(err) {
		return fmt.Errorf("%w: token %q", ErrNotFound, id)
	}
	if err != nil {
		return unavailable(err)
	}
	if by == nil || (by.User.Name != owner && !by.Has(versioning.RoleAdmin)) {
		return fmt.Errorf("%w: only admins revoke other users' tokens", ErrForbidden)
	}
	res, err := m.db.ExecContext(ctx, m.q(`UPDATE ui_tokens SET revoked_ms = ? WHERE id = ? AND revoked_ms = 0`), m.nowMS(), id)
	if err != nil {
		return unavailable(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil // revoked before: nothing happened to audit
	}
	m.audit(ctx, by.Actor(), versioning.ActionTokenRevoke, detailJSON("token", id, "user", owner))
	return nil
}

// TokenPrincipal resolves a bearer token: its roles are the user's roles
// that the token's scopes name.
func (m *Manager) TokenPrincipal(ctx context.Context, bearer string) (*Principal, error) {
	rest, ok := strings.CutPrefix(bearer, tokenPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || id == "" || secret == "" || len(bearer) > 200 {
		return nil, fmt.Errorf("%w: malformed token", ErrUnauthenticated)
	}
	t := Token{ID: id}
	var hash, scopes string
	var c, e, r int64
	err := m.db.QueryRowContext(ctx, m.q(`SELECT secret_hash, username, label, scopes, created_ms, expires_ms, revoked_ms FROM ui_tokens WHERE id = ?`), id).
		Scan(&hash, &t.User, &t.Label, &scopes, &c, &e, &r)
	if isNoRows(err) {
		return nil, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	if err != nil {
		return nil, unavailable(err)
	}
	if !equalSecret(hash, hashSecret(secret)) {
		return nil, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	t.Scopes, t.CreatedAt, t.ExpiresAt, t.RevokedAt = versioning.SplitRoles(scopes), msTime(c), msTime(e), msTime(r)
	if r != 0 {
		return nil, fmt.Errorf("%w: token revoked", ErrUnauthenticated)
	}
	if e != 0 && !m.o.Clock.Now().Before(t.ExpiresAt) {
		return nil, fmt.Errorf("%w: token expired", ErrUnauthenticated)
	}
	u, err := m.User(ctx, t.User)
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: user no longer exists", ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	var roles []versioning.Role
	for _, s := range t.Scopes {
		if slices.Contains(u.Roles, s) {
			roles = append(roles, s)
		}
	}
	return &Principal{User: u, Roles: roles, Token: &t}, nil
}

// passwordChangeTokens revokes the user's active tokens within tx when
// revoke is set, or counts them (those that stay valid) otherwise.
func (m *Manager) passwordChangeTokens(ctx context.Context, tx *sql.Tx, user string, revoke bool) (int64, error) {
	now := m.nowMS()
	const active = `username = ? AND revoked_ms = 0 AND (expires_ms = 0 OR expires_ms > ?)`
	if !revoke {
		var n int64
		if err := tx.QueryRowContext(ctx, m.q(`SELECT count(*) FROM ui_tokens WHERE `+active), user, now).Scan(&n); err != nil {
			return 0, unavailable(err)
		}
		return n, nil
	}
	if m.o.Dialect == migrations.Postgres {
		// A token minting another holds its row for share until the new
		// one is in (stillAuthenticated): waiting here for it, before the
		// update below takes its snapshot, revokes the new one too.
		if _, err := tx.ExecContext(ctx, m.q(`SELECT id FROM ui_tokens WHERE `+active+` FOR UPDATE`), user, now); err != nil {
			return 0, unavailable(err)
		}
	}
	res, err := tx.ExecContext(ctx, m.q(`UPDATE ui_tokens SET revoked_ms = ? WHERE `+active), now, user, now)
	if err != nil {
		return 0, unavailable(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, unavailable(err)
	}
	return n, nil
}
