package auth

import (
	"slices"
	"time"

	"governor.dev/governor/rules/versioning"
)

// User is a local account.
type User struct {
	Name  string            `json:"name"`
	Roles []versioning.Role `json:"roles"`
	// MustChange is set for a one-time password: the user may do nothing
	// but choose a new password.
	MustChange bool      `json:"must_change"`
	CreatedAt  time.Time `json:"created_at"`
}

// Session is a logged-in browser.
type Session struct {
	// ID is the cookie value; only its hash is stored.
	ID        string
	CSRF      string
	User      string
	CreatedAt time.Time
	// ExpiresAt is the end of the session's fixed lifetime (SessionTTL
	// after login), which the cookie's lifetime follows.
	ExpiresAt time.Time
	// IdleExpiresAt is when the session ends unless it is used again
	// (SessionIdle after its last use), never after ExpiresAt.
	IdleExpiresAt time.Time
}

// Token is an API token's metadata (never its secret).
type Token struct {
	ID        string            `json:"id"`
	User      string            `json:"user"`
	Label     string            `json:"label"`
	Scopes    []versioning.Role `json:"scopes"`
	CreatedAt time.Time         `json:"created_at"`
	// ExpiresAt is zero only for a token from before expiry was
	// required (NeverExpires).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// NeverExpires reports whether t has no expiry: only a token created before
// every token had to have one (Options.TokenMaxTTL). It keeps working until
// revoked; it should be replaced by one that expires.
func (t Token) NeverExpires() bool { return t.ExpiresAt.IsZero() }

// Expired reports whether t's expiry has passed at now; an expired token
// no longer authenticates.
func (t Token) Expired(now time.Time) bool { return !t.NeverExpires() && !now.Before(t.ExpiresAt) }

// Active reports whether t still authenticates at now: neither revoked nor
// expired.
func (t Token) Active(now time.Time) bool { return t.RevokedAt.IsZero() && !t.Expired(now) }

// Principal is who is making a request: a user through a session or a token.
type Principal struct {
	User  User
	Roles []versioning.Role
	// Session is set for browser requests, Token for API tokens.
	Session *Session
	Token   *Token
	// Degraded: the database is unavailable and the session was accepted
	// because it was validated recently; only reads are allowed.
	Degraded bool
}

// Actor is the principal as the rules store knows it.
func (p *Principal) Actor() versioning.Actor {
	return versioning.Actor{Name: p.User.Name, Roles: slices.Clone(p.Roles)}
}

// Has reports whether the principal holds any of the roles.
func (p *Principal) Has(roles ...versioning.Role) bool {
	if p == nil {
		return false
	}
	for _, r := range roles {
		if slices.Contains(p.Roles, r) {
			return true
		}
	}
	return false
}
