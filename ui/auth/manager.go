package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/ratelimit"
)

// Manager holds users, sessions and tokens. It is safe for concurrent use.
type Manager struct {
	o        Options
	db       *sql.DB
	throttle *ratelimit.Keyed
	// auditThrottled lets one throttled login per client address a minute
	// into the audit log: the rest cost the client nothing and must not
	// grow the log as fast as it can post.
	auditThrottled *ratelimit.Keyed
	// dummy is a hash compared against for unknown users, so that a login
	// takes as long whether or not the user exists.
	dummy []byte
	// recent keeps sessions validated in the last OutageGrace so that
	// people can keep reading while the database is down.
	recent *recentSessions
	// known are the client addresses each user logged in from, let
	// through while the user name's login bucket is spent.
	known *knownSources
}

// New applies the migrations and returns a Manager.
func New(ctx context.Context, o Options) (*Manager, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := migrations.Up(ctx, o.DB, o.Dialect, migrations.Options{Logger: o.Logger}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	th, err := ratelimit.NewKeyed(o.LoginRate/60, o.LoginBurst, 100_000)
	if err != nil {
		return nil, fmt.Errorf("%w: login throttle: %w", ErrInvalid, err)
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("governor-dummy-password"), o.BcryptCost)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	quiet, err := ratelimit.NewKeyed(1.0/60, 1, 100_000)
	if err != nil {
		return nil, fmt.Errorf("%w: audit throttle: %w", ErrInvalid, err)
	}
	m := &Manager{o: o, db: o.DB, throttle: th, auditThrottled: quiet, dummy: dummy, recent: newRecentSessions(o.OutageGrace), known: newKnownSources(maxKnownSources)}
	m.warnTokensWithoutExpiry(ctx)
	return m, nil
}

var userName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._@+-]{0,127}$`)

// ValidateUserName checks a user name: 1-128 characters of letters, digits
// and . _ @ + -, starting with a letter or digit.
func ValidateUserName(name string) error {
	if !userName.MatchString(name) {
		return fmt.Errorf("%w: name: must be 1-128 letters, digits or . _ @ + - starting with a letter or digit", ErrInvalid)
	}
	return nil
}

// maxPasswordBytes is bcrypt's limit: it ignores every byte past the 72nd,
// so longer passwords are refused rather than silently cut.
const maxPasswordBytes = 72

func (m *Manager) validatePassword(pw string) error {
	if utf8.RuneCountInString(pw) < m.o.MinPasswordLen {
		return fmt.Errorf("%w: password: must be at least %d characters", ErrInvalid, m.o.MinPasswordLen)
	}
	if len(pw) > maxPasswordBytes {
		return fmt.Errorf("%w: password: must be at most %d bytes", ErrInvalid, maxPasswordBytes)
	}
	return nil
}

// passwordMatches reports whether pw is the password of hash. A password
// longer than any that could be set never matches: bcrypt would compare
// only its first 72 bytes, so a stored 72-byte password followed by
// anything would. It costs one bcrypt comparison either way.
func (m *Manager) passwordMatches(hash []byte, pw string) bool {
	if len(pw) > maxPasswordBytes {
		_ = bcrypt.CompareHashAndPassword(m.dummy, []byte(pw[:maxPasswordBytes]))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(pw)) == nil
}

func validateRoles(field string, roles []versioning.Role) error {
	if len(roles) == 0 {
		return fmt.Errorf("%w: %s: at least one role is required", ErrInvalid, field)
	}
	for _, r := range roles {
		if !r.Valid() {
			return fmt.Errorf("%w: %s: unknown role %q (viewer, operator, approver, admin)", ErrInvalid, field, r)
		}
	}
	return nil
}

// q rewrites ? placeholders as $1, $2, ... for PostgreSQL.
func (m *Manager) q(query string) string {
	if m.o.Dialect != migrations.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (m *Manager) nowMS() int64 { return m.o.Clock.Now().UnixMilli() }

func unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics on failure)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashSecret(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func equalSecret(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func isUniqueViolation(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "unique") || strings.Contains(s, "duplicate key")
}

func (m *Manager) audit(ctx context.Context, actor versioning.Actor, action versioning.Action, detail string) {
	if actor.Name == "" || len(actor.Name) > versioning.MaxActorBytes {
		actor.Name = "unknown"
	}
	_, err := m.o.Auditor.RecordAudit(ctx, versioning.AuditRecord{Actor: actor, Action: action, Detail: []byte(detail)})
	if err != nil {
		m.o.Logger.Error("auth: audit entry not written", "action", action, "actor", actor.Name, "err", err)
	}
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
