package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// newSession stores a fresh session; a login always gets a new id, so an id
// planted before login (session fixation) is worthless.
func (m *Manager) newSession(ctx context.Context, user string) (*Session, error) {
	now := m.o.Clock.Now().UTC()
	s := &Session{ID: randomString(32), CSRF: randomString(32), User: user, CreatedAt: now, ExpiresAt: now.Add(m.o.SessionTTL)}
	_, err := m.db.ExecContext(ctx, m.q(`INSERT INTO ui_sessions (id_hash, username, csrf, created_ms, expires_ms) VALUES (?, ?, ?, ?, ?)`),
		hashSecret(s.ID), user, s.CSRF, now.UnixMilli(), s.ExpiresAt.UnixMilli())
	if err != nil {
		return nil, unavailable(err)
	}
	return s, nil
}

// SessionPrincipal resolves a session cookie value. An unknown or expired
// session is ErrUnauthenticated (and an expired one is deleted).
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
	s.CreatedAt, s.ExpiresAt = msTime(created), msTime(expires)
	if !m.o.Clock.Now().Before(s.ExpiresAt) {
		_, _ = m.db.ExecContext(ctx, m.q(`DELETE FROM ui_sessions WHERE id_hash = ?`), h)
		return nil, fmt.Errorf("%w: session expired", ErrUnauthenticated)
	}
	u, err := m.User(ctx, s.User)
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: user no longer exists", ErrUnauthenticated)
	}
	if err != nil {
		if p := m.recent.get(h, m.o.Clock.Now()); p != nil {
			return p, nil
		}
		return nil, err
	}
	p := &Principal{User: u, Roles: u.Roles, Session: &s}
	m.recent.put(h, p, m.o.Clock.Now())
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
