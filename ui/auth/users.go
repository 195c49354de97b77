package auth

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
)

// CreateUser adds a local user. With mustChange the password is one-time.
// Names are unique ignoring case, as the rules store compares people
// (versioning.SamePerson): "Alice" is refused with ErrExists while "alice"
// exists, checked and inserted in one atomic step.
func (m *Manager) CreateUser(ctx context.Context, name, password string, roles []versioning.Role, mustChange bool) (User, error) {
	if err := ValidateUserName(name); err != nil {
		return User{}, err
	}
	if err := m.validatePassword(password); err != nil {
		return User{}, err
	}
	if err := validateRoles("roles", roles); err != nil {
		return User{}, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), m.o.BcryptCost)
	if err != nil {
		return User{}, fmt.Errorf("%w: password: %w", ErrInvalid, err)
	}
	now := m.nowMS()
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return User{}, unavailable(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := m.lockUsers(ctx, tx); err != nil {
		return User{}, err
	}
	if err := m.insertUser(ctx, tx, name, string(hash), roles, mustChange, now); err != nil {
		return User{}, err
	}
	if err := tx.Commit(); err != nil {
		if isUniqueViolation(err) {
			return User{}, fmt.Errorf("%w: name: a user named %q already exists (names are compared ignoring case)", ErrExists, name)
		}
		return User{}, unavailable(err)
	}
	return User{Name: name, Roles: roles, MustChange: mustChange, CreatedAt: msTime(now)}, nil
}

// lockUsers makes the PostgreSQL transaction tx the only one adding users
// until it ends. A database whose names clashed ignoring case before
// migration 00301 has no unique index on lower(name), so creations take
// turns for insertUser's check to hold when they commit. The lock lets
// logins and sessions (which only read users) through. A SQLite
// transaction holds the database's write lock from its first write, and
// the insert checks and writes in one statement.
func (m *Manager) lockUsers(ctx context.Context, tx *sql.Tx) error {
	if m.o.Dialect != migrations.Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `LOCK TABLE ui_users IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return unavailable(err)
	}
	return nil
}

// insertUser adds a user row in tx unless a user's name equals name
// ignoring case (ErrExists naming the field "name").
func (m *Manager) insertUser(ctx context.Context, tx *sql.Tx, name, hash string, roles []versioning.Role, mustChange bool, now int64) error {
	res, err := tx.ExecContext(ctx, m.q(`INSERT INTO ui_users (name, password_hash, roles, must_change, created_ms, updated_ms)
		SELECT CAST(? AS text), CAST(? AS text), CAST(? AS text), CAST(? AS integer), CAST(? AS bigint), CAST(? AS bigint)
		WHERE NOT EXISTS (SELECT 1 FROM ui_users WHERE lower(name) = lower(?))`),
		name, hash, versioning.JoinRoles(roles), boolInt(mustChange), now, now, name)
	if err != nil {
		if isUniqueViolation(err) {
			return fmt.Errorf("%w: name: a user named %q already exists (names are compared ignoring case)", ErrExists, name)
		}
		return unavailable(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return m.nameTaken(ctx, tx, name)
	}
	return nil
}

// nameTaken is the error of a new user name that an existing one equals,
// ignoring case, naming the existing one.
func (m *Manager) nameTaken(ctx context.Context, tx *sql.Tx, name string) error {
	var existing string
	err := tx.QueryRowContext(ctx, m.q(`SELECT name FROM ui_users WHERE lower(name) = lower(?) ORDER BY name LIMIT 1`), name).Scan(&existing)
	if err != nil && !isNoRows(err) {
		return unavailable(err)
	}
	if existing == "" || existing == name {
		return fmt.Errorf("%w: name: a user named %q already exists", ErrExists, name)
	}
	return fmt.Errorf("%w: name: %q is taken by user %q (names are compared ignoring case, as approvals compare people)", ErrExists, name, existing)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// User returns one user.
func (m *Manager) User(ctx context.Context, name string) (User, error) {
	u, _, err := m.userWithHash(ctx, name)
	return u, err
}

func (m *Manager) userWithHash(ctx context.Context, name string) (User, string, error) {
	var (
		u           User
		roles, hash string
		must        int
		created     int64
	)
	err := m.db.QueryRowContext(ctx, m.q(`SELECT name, password_hash, roles, must_change, created_ms FROM ui_users WHERE name = ?`), name).
		Scan(&u.Name, &hash, &roles, &must, &created)
	if isNoRows(err) {
		return User{}, "", fmt.Errorf("%w: user %q", ErrNotFound, name)
	}
	if err != nil {
		return User{}, "", unavailable(err)
	}
	u.Roles, u.MustChange, u.CreatedAt = versioning.SplitRoles(roles), must != 0, msTime(created)
	return u, hash, nil
}

// Users lists every user by name.
func (m *Manager) Users(ctx context.Context) ([]User, error) {
	rows, err := m.db.QueryContext(ctx, `SELECT name, roles, must_change, created_ms FROM ui_users ORDER BY name`)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		var (
			u       User
			roles   string
			must    int
			created int64
		)
		if err := rows.Scan(&u.Name, &roles, &must, &created); err != nil {
			return nil, unavailable(err)
		}
		u.Roles, u.MustChange, u.CreatedAt = versioning.SplitRoles(roles), must != 0, msTime(created)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// SetRoles replaces a user's roles and ends the user's sessions, so the
// change takes effect at once. Taking the admin role from the only admin
// left is refused with ErrLastAdmin: with no admin nobody could manage
// users again. The check and the change are one atomic step, so two admins
// removing each other's admin role at the same time cannot both succeed.
func (m *Manager) SetRoles(ctx context.Context, name string, roles []versioning.Role) error {
	if err := validateRoles("roles", roles); err != nil {
		return err
	}
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return unavailable(err)
	}
	defer func() { _ = tx.Rollback() }()
	query := `UPDATE ui_users SET roles = ?, updated_ms = ? WHERE name = ?`
	args := []any{versioning.JoinRoles(roles), m.nowMS(), name}
	if !slices.Contains(roles, versioning.RoleAdmin) {
		if err := m.lockAdmins(ctx, tx); err != nil {
			return err
		}
		query += ` AND ` + notLastAdmin
		args = append(args, name)
	}
	res, err := tx.ExecContext(ctx, m.q(query), args...)
	if err != nil {
		return unavailable(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return m.unchanged(ctx, tx, name, "roles", "removing the admin role from")
	}
	if err := m.endSessions(ctx, tx, name); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return unavailable(err)
	}
	m.recent.forgetUser(name)
	return nil
}

// isAdmin is an SQL condition on a ui_users row's roles column (JoinRoles'
// comma-separated list) holding the admin role.
func isAdmin(column string) string {
	return `(',' || ` + column + ` || ',') LIKE '%,` + string(versioning.RoleAdmin) + `,%'`
}

// notLastAdmin is the condition of an update or delete of the ui_users row
// named by its one parameter that takes an admin away: the row does not
// hold the admin role, or another row does.
var notLastAdmin = `(NOT ` + isAdmin("roles") + ` OR EXISTS (SELECT 1 FROM ui_users o WHERE o.name <> ? AND ` + isAdmin("o.roles") + `))`

// lockAdmins makes tx the only transaction that may take an admin away
// until it ends, so that notLastAdmin holds when it commits. On PostgreSQL
// it locks every admin's row (in name order, so two such transactions do
// not deadlock): one waiting on another reads the rows as committed by it.
// A SQLite transaction holds the database's write lock from its first
// write, which is the statement checking notLastAdmin itself.
func (m *Manager) lockAdmins(ctx context.Context, tx *sql.Tx) error {
	if m.o.Dialect != migrations.Postgres {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT name FROM ui_users WHERE `+isAdmin("roles")+` ORDER BY name FOR UPDATE`)
	if err != nil {
		return unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// unchanged explains why an update or delete guarded by notLastAdmin
// changed no row: there is no such user, or it is the only admin left.
func (m *Manager) unchanged(ctx context.Context, tx *sql.Tx, name, field, what string) error {
	var one int
	err := tx.QueryRowContext(ctx, m.q(`SELECT 1 FROM ui_users WHERE name = ?`), name).Scan(&one)
	if isNoRows(err) {
		return fmt.Errorf("%w: user %q", ErrNotFound, name)
	}
	if err != nil {
		return unavailable(err)
	}
	return fmt.Errorf("%w: %s: %s the only admin %q would leave nobody to manage users; give another user the admin role first", ErrLastAdmin, field, what, name)
}

// ChangePassword sets a new password after checking the current one, clears
// MustChange and ends every session of the user: someone holding a copy of
// one (a stolen cookie) loses it. The session keep, the one the change was
// made from, is replaced by a new one with a fresh id and CSRF token, which
// is returned for the caller to set as the cookie (nil when keep is nil);
// keep's id no longer works. The change is audited (ActionPasswordChange,
// with the number of other sessions ended and of active API tokens left
// valid, tokens_kept; a wrong current password as a login failure). The
// user's API tokens stay valid: ChangePasswordRevokingTokens revokes them
// too, for a user whose session may have been used to mint one.
// Attempts are throttled per user name at the login rate (ErrThrottled), so
// that a session left open is no way around the login throttle to guess the
// password. Nothing changes unless all of it does.
func (m *Manager) ChangePassword(ctx context.Context, name, current, next string, keep *Session) (*Session, error) {
	s, _, err := m.changePassword(ctx, name, current, next, keep, false)
	return s, err
}

// ChangePasswordRevokingTokens is ChangePassword that also revokes every
// active API token of the user (not expired, not revoked) in the same
// transaction, so that a token minted from a stolen session stops working
// with it; it returns the new session and how many tokens it revoked, which
// the audit entry records (tokens_revoked). A refused change revokes none.
func (m *Manager) ChangePasswordRevokingTokens(ctx context.Context, name, current, next string, keep *Session) (*Session, int, error) {
	s, n, err := m.changePassword(ctx, name, current, next, keep, true)
	return s, int(n), err
}

func (m *Manager) changePassword(ctx context.Context, name, current, next string, keep *Session, revokeTokens bool) (*Session, int64, error) {
	if ok, _ := m.throttle.Allow("change:"+throttleName(name), m.o.Clock.Nanotime(), 1); !ok {
		return nil, 0, ErrThrottled
	}
	u, hash, err := m.userWithHash(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	if !m.passwordMatches([]byte(hash), current) {
		// Someone holding the user's session may be guessing the password.
		m.audit(ctx, versioning.Actor{Name: u.Name, Roles: u.Roles}, versioning.ActionLoginFailure, detailJSON("reason", "wrong current password in a password change"))
		return nil, 0, fmt.Errorf("%w: current password: wrong password", ErrInvalid)
	}
	if current == next {
		return nil, 0, fmt.Errorf("%w: new password: must differ from the current one", ErrInvalid)
	}
	if err := m.validatePassword(next); err != nil {
		return nil, 0, fmt.Errorf("%w (new password)", err)
	}
	nh, err := bcrypt.GenerateFromPassword([]byte(next), m.o.BcryptCost)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: new password: %w", ErrInvalid, err)
	}
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, unavailable(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, m.q(`UPDATE ui_users SET password_hash = ?, must_change = 0, updated_ms = ? WHERE name = ?`), string(nh), m.nowMS(), name); err != nil {
		return nil, 0, unavailable(err)
	}
	keepHash := ""
	if keep != nil {
		keepHash = hashSecret(keep.ID)
	}
	res, err := tx.ExecContext(ctx, m.q(`DELETE FROM ui_sessions WHERE username = ? AND id_hash <> ?`), name, keepHash)
	if err != nil {
		return nil, 0, unavailable(err)
	}
	ended, _ := res.RowsAffected()
	if keep != nil { // replaced below by a fresh session
		if _, err := tx.ExecContext(ctx, m.q(`DELETE FROM ui_sessions WHERE id_hash = ?`), keepHash); err != nil {
			return nil, 0, unavailable(err)
		}
	}
	tokens, err := m.passwordChangeTokens(ctx, tx, name, revokeTokens)
	if err != nil {
		return nil, 0, err
	}
	var fresh *Session
	if keep != nil {
		if fresh, err = m.insertSession(ctx, tx, name); err != nil {
			return nil, 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, unavailable(err)
	}
	m.recent.forgetUser(name)
	tokenKey := "tokens_kept"
	if revokeTokens {
		tokenKey = "tokens_revoked"
	}
	m.audit(ctx, versioning.Actor{Name: u.Name, Roles: u.Roles}, ActionPasswordChange,
		detailJSON("sessions_ended", strconv.FormatInt(ended, 10), tokenKey, strconv.FormatInt(tokens, 10)))
	if !revokeTokens {
		tokens = 0
	}
	return fresh, tokens, nil
}

// DeleteUser removes a user with their sessions and tokens. Deleting the
// only admin left is refused with ErrLastAdmin, atomically as in SetRoles.
func (m *Manager) DeleteUser(ctx context.Context, name string) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return unavailable(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := m.lockAdmins(ctx, tx); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, m.q(`DELETE FROM ui_users WHERE name = ? AND `+notLastAdmin), name, name)
	if err != nil {
		return unavailable(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return m.unchanged(ctx, tx, name, "name", "deleting")
	}
	// SQLite enforces the cascade only with foreign keys on; be explicit.
	if err := m.endSessions(ctx, tx, name); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, m.q(`DELETE FROM ui_tokens WHERE username = ?`), name); err != nil {
		return unavailable(err)
	}
	if err := tx.Commit(); err != nil {
		return unavailable(err)
	}
	m.recent.forgetUser(name)
	return nil
}

// ActionAdminRecover is the audit action of EnsureAdmin giving the admin
// role to the configured admin of a database whose users hold none.
const ActionAdminRecover versioning.Action = "admin_recover"

// recoveryActor is who the audit log names for EnsureAdmin's recovery: the
// process starting, acting on its configuration.
var recoveryActor = versioning.Actor{Name: "system:ensure-admin", Roles: []versioning.Role{}}

// allRoles are the roles of an admin that EnsureAdmin creates, so that one
// person can run a fresh installation.
func allRoles() []versioning.Role {
	return []versioning.Role{versioning.RoleAdmin, versioning.RoleApprover, versioning.RoleOperator, versioning.RoleViewer}
}

// EnsureAdmin makes sure some user holds the admin role, so that someone
// can manage users; it changes nothing while one does.
//
// With no users at all it creates the first user, an admin named name with
// every role and a one-time password, which it returns for the caller to
// print. With users but no admin (a database from before the last admin
// was guarded, or edited by hand) it recovers: the user named name
// (compared ignoring case) gets the admin role added to its own and keeps
// its password, and "" is returned; with no such user, name is created as
// the first user would be and its one-time password returned. A recovery
// is audited (ActionAdminRecover) and logged as a warning. The check and
// the change are one atomic step.
//
// It returns "" as well when another process sharing the database (a
// replica starting at the same time) created or promoted an admin first.
func (m *Manager) EnsureAdmin(ctx context.Context, name string) (string, error) {
	r, err := m.EnsureAdminReport(ctx, name)
	return r.Password, err
}

// AdminEnsured is what EnsureAdminReport did; the zero value: nothing (an
// admin existed, or another process made one first).
type AdminEnsured struct {
	// User is the admin created or given the admin role.
	User string
	// Password is the one-time password of a created admin.
	Password string
	// Created: User was created; otherwise, when User is set, an existing
	// user was given the admin role.
	Created bool
	// Recovered: other users existed, none of them an admin.
	Recovered bool
}

// Banner is what a process starting prints of e, "" when nothing was done:
// which admin was created (with the one-time password) or promoted, and
// whether it was a recovery.
func (e AdminEnsured) Banner() string {
	switch {
	case e.User == "":
		return ""
	case e.Created && !e.Recovered:
		return fmt.Sprintf("Created the first admin %q with the one-time password: %s\nLog in and choose a new password; it is not shown again.\n", e.User, e.Password)
	case e.Created:
		return fmt.Sprintf("No user held the admin role: created the admin %q with the one-time password: %s\nLog in and choose a new password; it is not shown again.\n", e.User, e.Password)
	default:
		return fmt.Sprintf("No user held the admin role: gave it to the existing user %q, who logs in with their own password.\n", e.User)
	}
}

// EnsureAdminReport is EnsureAdmin, saying what it did.
func (m *Manager) EnsureAdminReport(ctx context.Context, name string) (AdminEnsured, error) {
	if err := ValidateUserName(name); err != nil {
		return AdminEnsured{}, err
	}
	var admin int
	err := m.db.QueryRowContext(ctx, `SELECT 1 FROM ui_users WHERE `+isAdmin("roles")+` LIMIT 1`).Scan(&admin)
	if err == nil {
		return AdminEnsured{}, nil
	}
	if !isNoRows(err) {
		return AdminEnsured{}, unavailable(err)
	}
	pw := randomString(18)
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), m.o.BcryptCost)
	if err != nil {
		return AdminEnsured{}, fmt.Errorf("%w: password: %w", ErrInvalid, err)
	}
	r, err := m.ensureAdmin(ctx, name, string(hash))
	if err != nil {
		return AdminEnsured{}, err
	}
	if r.recovered {
		how := "promoted"
		if r.created {
			how = "created"
		}
		m.o.Logger.Warn("auth: no user held the admin role; the configured admin was given it", "user", r.user, "how", how)
		m.audit(ctx, recoveryActor, ActionAdminRecover, detailJSON("user", r.user, "how", how, "reason", "no user held the admin role"))
	}
	out := AdminEnsured{User: r.user, Created: r.created, Recovered: r.recovered}
	if r.created {
		out.Password = pw
	}
	return out, nil
}

// ensured is what ensureAdmin did.
type ensured struct {
	user string
	// created: user was created with the one-time password; recovered:
	// other users existed, none an admin.
	created, recovered bool
}

// ensureAdmin is EnsureAdmin's transaction, creating the admin with the
// password hash.
func (m *Manager) ensureAdmin(ctx context.Context, name, hash string) (ensured, error) {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return ensured{}, unavailable(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := m.lockUsers(ctx, tx); err != nil {
		return ensured{}, err
	}
	var users, admins int
	err = tx.QueryRowContext(ctx, `SELECT count(*), COALESCE(SUM(CASE WHEN `+isAdmin("roles")+` THEN 1 ELSE 0 END), 0) FROM ui_users`).Scan(&users, &admins)
	if err != nil {
		return ensured{}, unavailable(err)
	}
	if admins > 0 {
		return ensured{}, nil
	}
	r := ensured{user: name, recovered: users > 0}
	var roles string
	err = tx.QueryRowContext(ctx, m.q(`SELECT name, roles FROM ui_users WHERE lower(name) = lower(?) ORDER BY name LIMIT 1`), name).Scan(&r.user, &roles)
	switch {
	case isNoRows(err):
		r.created = true
		err = m.insertUser(ctx, tx, name, hash, allRoles(), true, m.nowMS())
	case err == nil:
		next := append(versioning.SplitRoles(roles), versioning.RoleAdmin)
		_, err = tx.ExecContext(ctx, m.q(`UPDATE ui_users SET roles = ?, updated_ms = ? WHERE name = ?`), versioning.JoinRoles(next), m.nowMS(), r.user)
		if err != nil {
			err = unavailable(err)
		}
	default:
		err = unavailable(err)
	}
	if errors.Is(err, ErrExists) {
		return ensured{}, nil // another replica created it first
	}
	if err != nil {
		return ensured{}, err
	}
	if err := tx.Commit(); err != nil {
		if isUniqueViolation(err) {
			return ensured{}, nil // another replica created it first
		}
		return ensured{}, unavailable(err)
	}
	return r, nil
}

// Login checks a password and starts a session. Attempts are throttled per
// name and per client address (ErrThrottled); each success and failure is
// audited, a throttled attempt only the first of its client address in a
// minute. A wrong name and a wrong password give the same error.
//
// The client address is checked first, and the name's bucket is touched
// only by attempts the address may make: a client over its limit cannot
// push the names it posts into the throttle, whose least recently used
// entries (another user's spent bucket) would make way for them. An IPv6
// client is its /64, the block one host is usually given.
//
// While a name's bucket is spent, an address the user logged in from in
// the last 30 days (remembered in memory) is still let through, within its
// own limit: a guesser elsewhere keeps the name's bucket empty for as long
// as they keep guessing, and must not so shut the user out.
func (m *Manager) Login(ctx context.Context, name, password, clientAddr string) (*Session, User, error) {
	now := m.o.Clock.Nanotime()
	addrKey := throttleAddr(clientAddr)
	okAddr, _ := m.throttle.Allow(addrKey, now, 1)
	okName := false
	if okAddr {
		okName, _ = m.throttle.Allow(throttleName(name), now, 1)
		okName = okName || m.known.has(name, addrKey, m.o.Clock.Now())
	}
	attempted := versioning.Actor{Name: name}
	if !okName || !okAddr {
		if ok, _ := m.auditThrottled.Allow(addrKey, now, 1); ok {
			m.audit(ctx, attempted, versioning.ActionLoginFailure, detailJSON("reason", "throttled",
				"addr", clientAddr, "note", "further throttled attempts from this address within the minute are not audited"))
		}
		return nil, User{}, ErrThrottled
	}
	u, hash, err := m.userWithHash(ctx, name)
	switch {
	case err == nil:
	case isNotFound(err):
		_ = m.passwordMatches(m.dummy, password)
		m.audit(ctx, attempted, versioning.ActionLoginFailure, detailJSON("reason", "bad credentials", "addr", clientAddr))
		return nil, User{}, fmt.Errorf("%w: wrong user name or password", ErrUnauthenticated)
	default:
		m.o.Logger.Error("auth: login: reading the user failed", "user", name, "err", err)
		return nil, User{}, err
	}
	if !m.passwordMatches([]byte(hash), password) {
		m.audit(ctx, attempted, versioning.ActionLoginFailure, detailJSON("reason", "bad credentials", "addr", clientAddr))
		return nil, User{}, fmt.Errorf("%w: wrong user name or password", ErrUnauthenticated)
	}
	m.rehash(ctx, u.Name, hash, password)
	s, err := m.newSession(ctx, u.Name)
	if err != nil {
		m.o.Logger.Error("auth: login: storing the session failed", "user", name, "err", err)
		return nil, User{}, err
	}
	m.known.add(name, addrKey, m.o.Clock.Now())
	m.audit(ctx, versioning.Actor{Name: u.Name, Roles: u.Roles}, versioning.ActionLogin, detailJSON("addr", clientAddr))
	return s, u, nil
}

// rehash stores the password pw of user again at Options.BcryptCost when
// its hash has another cost: after the cost is raised, old hashes would
// stay as cheap to crack as before, and a login of their users faster than
// one of an unknown name (compared against a hash at the new cost). A
// failure is logged; the login goes on.
func (m *Manager) rehash(ctx context.Context, user, hash, pw string) {
	if c, err := bcrypt.Cost([]byte(hash)); err != nil || c == m.o.BcryptCost {
		return
	}
	nh, err := bcrypt.GenerateFromPassword([]byte(pw), m.o.BcryptCost)
	if err == nil {
		_, err = m.db.ExecContext(ctx, m.q(`UPDATE ui_users SET password_hash = ? WHERE name = ? AND password_hash = ?`), string(nh), user, hash)
	}
	if err != nil {
		m.o.Logger.Warn("auth: login: storing the password at the configured bcrypt cost failed", "user", user, "err", err)
	}
}

// throttleName is the login throttle's key of a user name. The name is the
// client's, as long as the request body allows: the key is its digest so
// that the limiter's keys stay small.
func throttleName(name string) string { return "user:" + hashSecret(name) }

// throttleAddr is the login throttle's key of a client address: the
// address itself, or for IPv6 its /64, so that a client cannot take a
// fresh bucket for every address of the block its host was given.
func throttleAddr(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Unmap().Is6() {
		return "addr:" + addr
	}
	p, err := a.Prefix(64)
	if err != nil {
		return "addr:" + addr
	}
	return "addr:" + p.String()
}

func detailJSON(kv ...string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// NewOneTimePassword returns a random password for a new user, who must
// change it at first login.
func (m *Manager) NewOneTimePassword() (string, error) { return randomString(18), nil }
