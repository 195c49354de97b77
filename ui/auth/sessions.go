package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// newSession stores a fresh session; a login always gets a new id, so an id
// planted before login (session fixation) is worthless.
func (m *Manager) newSession(ctx context.Context, user string) (*Session, error) {
	// A session is deleted when presented after it ended; those never
	// presented again (a browser closed, a cookie cleared) go at the
	// user's next login, so the table holds no more than live sessions
	// and one login's worth of ended ones.
	if _, err := m.db.ExecContext(ctx, m.q(`DELETE FROM ui_sessions WHERE username = ? AND expires_ms <= ?`), user, m.nowMS()); err != nil {
		return nil, unavailable(err)
	}
	return m.insertSession(ctx, m.db, user)
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertSession stores a new session of user, with a fresh random id and
// CSRF token, through db.
func (m *Manager) insertSession(ctx context.Context, db execer, user string) (*Session, error) {
	now := m.o.Clock.Now().UTC()
	s := &Session{ID: randomString(32), CSRF: randomString(32), User: user, CreatedAt: now, ExpiresAt: now.Add(m.o.SessionTTL)}
	s.IdleExpiresAt = m.idleUntil(s.ExpiresAt, now)
	_, err := db.ExecContext(ctx, m.q(`INSERT INTO ui_sessions (id_hash, username, csrf, created_ms, expires_ms) VALUES (?, ?, ?, ?, ?)`),
		hashSecret(s.ID), user, s.CSRF, now.UnixMilli(), s.IdleExpiresAt.UnixMilli())
	if err != nil {
		return nil, unavailable(err)
	}
	return s, nil
}

// idleUntil is when a session ending at absolute and used at now ends
// unless it is used again: SessionIdle later, never after absolute.
func (m *Manager) idleUntil(absolute, now time.Time) time.Time {
	if m.o.SessionIdle < 0 {
		return absolute
	}
	if t := now.Add(m.o.SessionIdle); t.Before(absolute) {
		return t
	}
	return absolute
}

// SessionPrincipal resolves a session cookie value. An unknown or expired
// session (past its SessionTTL, or unused for SessionIdle) is
// ErrUnauthenticated, and an expired one is deleted. Using a session
// pushes its idle expiry back (stored at most once per SessionIdle/60).
func (m *Manager) SessionPrincipal(ctx context.Context, id string) (*Principal, error) {
	if id == "" || len(id) > 100 {
		return nil, fmt.Errorf("%w: no session", ErrUnauthenticated)
	}
	h := hashSecret(id)
	s := Session{ID: id}
	var created, expires int64
	err := m.db.QueryRowContext(ctx, m.q(`SELECT username, csrf, created_ms, expires_ms FROM ui_sessions WHERE id_hash = ?`), h).
		Scan(&s.User, &s.CSRF, &created, &expires)
	if isNoRows(err) {
		m.recent.forget(h)
		return nil, fmt.Errorf("%w: unknown session", ErrUnauthenticated)
	}
	if err != nil {
		if p := m.recent.get(h, m.o.Clock.Now()); p != nil {
			return p, nil
		}
		return nil, unavailable(err)
	}
	now := m.o.Clock.Now()
	s.CreatedAt, s.IdleExpiresAt = msTime(created), msTime(expires)
	s.ExpiresAt = s.CreatedAt.Add(m.o.SessionTTL)
	if !now.Before(s.ExpiresAt) || !now.Before(s.IdleExpiresAt) {
		m.recent.forget(h)
		_, _ = m.db.ExecContext(ctx, m.q(`DELETE FROM ui_sessions WHERE id_hash = ?`), h)
		if now.Before(s.ExpiresAt) {
			return nil, fmt.Errorf("%w: session idle for longer than %s", ErrUnauthenticated, m.o.SessionIdle)
		}
		return nil, fmt.Errorf("%w: session expired", ErrUnauthenticated)
	}
	u, err := m.User(ctx, s.User)
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: user no longer exists", ErrUnauthenticated)
	}
	if err != nil {
		if p := m.recent.get(h, now); p != nil {
			return p, nil
		}
		return nil, err
	}
	if next := m.idleUntil(s.ExpiresAt, now); next.Sub(s.IdleExpiresAt) >= m.o.SessionIdle/60 && next.After(s.IdleExpiresAt) {
		_, err := m.db.ExecContext(ctx, m.q(`UPDATE ui_sessions SET expires_ms = ? WHERE id_hash = ? AND expires_ms < ?`), next.UnixMilli(), h, next.UnixMilli())
		if err != nil {
			// The session is valid now; it ends SessionIdle after its
			// last recorded use instead.
			m.o.Logger.Warn("auth: recording a session's use failed", "user", s.User, "err", err)
		} else {
			s.IdleExpiresAt = next
		}
	}
	p := &Principal{User: u, Roles: u.Roles, Session: &s}
	m.recent.put(h, p, now)
	return p, nil
}

// Logout ends a session and audits it.
func (m *Manager) Logout(ctx context.Context, p *Principal) error {
	if p == nil || p.Session == nil {
		return nil
	}
	m.recent.forget(hashSecret(p.Session.ID))
	if _, err := m.db.ExecContext(ctx, m.q(`DELETE FROM ui_sessions WHERE id_hash = ?`), hashSecret(p.Session.ID)); err != nil {
		return unavailable(err)
	}
	m.audit(ctx, p.Actor(), "logout", "{}")
	return nil
}

// endSessions deletes the user's sessions in tx and forgets them in
// m.recent; the caller forgets them again once tx commits, in case a
// request validated one in between.
func (m *Manager) endSessions(ctx context.Context, tx *sql.Tx, user string) error {
	m.recent.forgetUser(user)
	if _, err := tx.ExecContext(ctx, m.q(`DELETE FROM ui_sessions WHERE username = ?`), user); err != nil {
		return unavailable(err)
	}
	return nil
}

// CheckCSRF compares a submitted CSRF token with the session's in constant
// time.
func CheckCSRF(p *Principal, submitted string) error {
	if p == nil || p.Session == nil || submitted == "" || !equalSecret(p.Session.CSRF, submitted) {
		return ErrCSRF
	}
	return nil
}
