package auth

import (
	"database/sql"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// Options configure New.
type Options struct {
	// DB is the rules database; required. New applies the migrations.
	DB *sql.DB
	// Dialect of DB; required.
	Dialect migrations.Dialect
	// Auditor receives login, failure, logout and token entries; required.
	Auditor versioning.Auditor
	Clock   clock.Clock
	Logger  *slog.Logger
	// BcryptCost defaults to bcrypt.DefaultCost (tests use bcrypt.MinCost).
	BcryptCost int
	// SessionTTL is a session's fixed lifetime; default 12h.
	SessionTTL time.Duration
	// SessionIdle ends a session unused for this long, before SessionTTL
	// (a browser left open and unattended); default 1h, negative turns it
	// off.
	SessionIdle time.Duration
	// LoginRate is the login attempts per minute allowed per user name and
	// per client address after LoginBurst; default 5 per minute, burst 10.
	LoginRate  float64
	LoginBurst int
	// MinPasswordLen is the fewest characters a password may have, at most
	// 72 (passwords are limited to bcrypt's 72 bytes); default 12.
	MinPasswordLen int
	// OutageGrace: while the database is unavailable, a session validated
	// within this long still authenticates read-only requests (state
	// changes need the database anyway), so pages stay usable with a
	// banner. Default 5m; negative turns it off.
	OutageGrace time.Duration
	// TrustedProxies are the networks of the load balancers or reverse
	// proxies in front of the UI. A request from one of them is taken to
	// come from the rightmost X-Forwarded-For address that is not itself
	// in these networks (the login throttle's client address); without
	// them the peer address is the client and X-Forwarded-For is ignored.
	// Behind a load balancer, leaving them out makes every login appear
	// to come from the balancer, so a few failed logins by anyone throttle
	// everyone's.
	TrustedProxies []netip.Prefix
	// TokenTTL is the lifetime of an API token created without one;
	// default 90 days, at most TokenMaxTTL.
	TokenTTL time.Duration
	// TokenMaxTTL is the longest lifetime an API token may be created
	// with; default 365 days. Every token expires: a leaked one is
	// usable for no longer than this. Tokens created without an expiry
	// before it was required keep working; they are logged at start and
	// flagged on the account page (Token.NeverExpires).
	TokenMaxTTL time.Duration
}

// Default API token lifetimes (Options.TokenTTL, Options.TokenMaxTTL).
const (
	DefaultTokenTTL    = 90 * 24 * time.Hour
	DefaultTokenMaxTTL = 365 * 24 * time.Hour
)

func (o Options) withDefaults() (Options, error) {
	if o.DB == nil {
		return o, fmt.Errorf("%w: Options.DB is required", ErrInvalid)
	}
	if o.Dialect != migrations.SQLite && o.Dialect != migrations.Postgres {
		return o, fmt.Errorf("%w: Options.Dialect %q is not sqlite or postgres", ErrInvalid, o.Dialect)
	}
	if o.Auditor == nil {
		return o, fmt.Errorf("%w: Options.Auditor is required", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BcryptCost == 0 {
		o.BcryptCost = bcrypt.DefaultCost
	}
	if o.BcryptCost < bcrypt.MinCost || o.BcryptCost > bcrypt.MaxCost {
		return o, fmt.Errorf("%w: Options.BcryptCost %d outside [%d, %d]", ErrInvalid, o.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.SessionTTL < 0 {
		return o, fmt.Errorf("%w: Options.SessionTTL must be positive", ErrInvalid)
	}
	if o.SessionIdle == 0 {
		o.SessionIdle = time.Hour
	}
	if o.LoginRate == 0 {
		o.LoginRate = 5
	}
	if o.LoginBurst == 0 {
		o.LoginBurst = 10
	}
	if o.LoginRate < 0 || o.LoginBurst < 0 {
		return o, fmt.Errorf("%w: Options.LoginRate and LoginBurst must be positive", ErrInvalid)
	}
	if o.OutageGrace == 0 {
		o.OutageGrace = 5 * time.Minute
	}
	if o.MinPasswordLen == 0 {
		o.MinPasswordLen = 12
	}
	if o.MinPasswordLen < 1 || o.MinPasswordLen > maxPasswordBytes {
		return o, fmt.Errorf("%w: Options.MinPasswordLen %d outside [1, %d] (bcrypt uses at most %d bytes)", ErrInvalid, o.MinPasswordLen, maxPasswordBytes, maxPasswordBytes)
	}
	if o.TokenMaxTTL == 0 {
		o.TokenMaxTTL = DefaultTokenMaxTTL
	}
	if o.TokenMaxTTL < 0 {
		return o, fmt.Errorf("%w: Options.TokenMaxTTL must be positive", ErrInvalid)
	}
	if o.TokenTTL == 0 {
		o.TokenTTL = min(DefaultTokenTTL, o.TokenMaxTTL)
	}
	if o.TokenTTL < 0 || o.TokenTTL > o.TokenMaxTTL {
		return o, fmt.Errorf("%w: Options.TokenTTL %s must be positive and at most Options.TokenMaxTTL (%s)", ErrInvalid, o.TokenTTL, o.TokenMaxTTL)
	}
	return o, nil
}
