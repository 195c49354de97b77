package auth_test

import (
	"context"
	"database/sql"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/ui/auth"
)

// requireNamesUniqueIgnoringCase checks on m, whose database is db, that
// "alice" and "Alice" cannot both be accounts: approvals compare people
// ignoring case (versioning.SamePerson), so they would be one person there
// and two here. Neither CreateUser nor a row written by hand gets past it.
func requireNamesUniqueIgnoringCase(t *testing.T, m *auth.Manager, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	_, err := m.CreateUser(ctx, "alice", "correct horse battery", operator, false)
	require.NoError(t, err)
	for _, n := range []string{"Alice", "ALICE", "alice"} {
		_, err = m.CreateUser(ctx, n, "correct horse battery", operator, false)
		require.ErrorIs(t, err, auth.ErrExists, n)
		require.Contains(t, err.Error(), "name:", "the error names the field")
		require.Contains(t, err.Error(), `"alice"`, "and the existing user")
	}
	_, err = m.CreateUser(ctx, "bob", "correct horse battery", operator, false)
	require.NoError(t, err)
	users, err := m.Users(ctx)
	require.NoError(t, err)
	require.Len(t, users, 2)

	_, err = db.ExecContext(ctx, `INSERT INTO ui_users (name, password_hash, roles, must_change, created_ms, updated_ms) VALUES ('ALICE', 'x', 'viewer', 0, 0, 0)`)
	require.Error(t, err, "the schema refuses a clashing insert")
	_, err = db.ExecContext(ctx, `UPDATE ui_users SET name = 'Alice' WHERE name = 'bob'`)
	require.Error(t, err, "the schema refuses a clashing rename")
}

func TestUserNamesUniqueIgnoringCase(t *testing.T) {
	e := newEnv(t)
	requireNamesUniqueIgnoringCase(t, e.m, e.db)
}

func TestPostgresUserNamesUniqueIgnoringCase(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	m, db, _, _ := postgresManager(t)
	requireNamesUniqueIgnoringCase(t, m, db)
}

// migrateBeforeNameCase applies the migrations db would have had before
// user names were compared ignoring case (all but ui/auth's files after
// 00300) and adds two accounts whose names differ only in case, as such a
// database may hold.
func migrateBeforeNameCase(t *testing.T, db *sql.DB, d migrations.Dialect) {
	t.Helper()
	ctx := context.Background()
	fsys, err := migrations.FS(d)
	require.NoError(t, err)
	files, err := fs.Glob(fsys, "*.sql")
	require.NoError(t, err)
	old := fstest.MapFS{}
	for _, f := range files {
		if strings.HasPrefix(f, "003") && f >= "00301" {
			continue
		}
		b, err := fs.ReadFile(fsys, f)
		require.NoError(t, err)
		old[f] = &fstest.MapFile{Data: b}
	}
	gd := goose.DialectSQLite3
	if d == migrations.Postgres {
		gd = goose.DialectPostgres
	}
	p, err := goose.NewProvider(gd, db, old, goose.WithDisableGlobalRegistry(true), goose.WithAllowOutofOrder(true))
	require.NoError(t, err)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	for _, n := range []string{"alice", "Alice"} {
		_, err = db.ExecContext(ctx, `INSERT INTO ui_users (name, password_hash, roles, must_change, created_ms, updated_ms) VALUES ('`+n+`', 'x', 'operator', 0, 0, 0)`)
		require.NoError(t, err)
	}
}

// requireClashingNamesKept checks on m, opened on a database prepared by
// migrateBeforeNameCase, that migrating kept both old accounts and that no
// new name clashes with them.
func requireClashingNamesKept(t *testing.T, m *auth.Manager) {
	t.Helper()
	ctx := context.Background()
	for _, n := range []string{"alice", "Alice"} {
		_, err := m.User(ctx, n)
		require.NoError(t, err, "an account from before is kept")
	}
	_, err := m.CreateUser(ctx, "ALICE", "correct horse battery", operator, false)
	require.ErrorIs(t, err, auth.ErrExists)
	require.Contains(t, err.Error(), "name:")
	_, err = m.CreateUser(ctx, "bob", "correct horse battery", operator, false)
	require.NoError(t, err)
	_, err = m.CreateUser(ctx, "Bob", "correct horse battery", operator, false)
	require.ErrorIs(t, err, auth.ErrExists)
}

func TestMigrationKeepsNamesThatClashIgnoringCase(t *testing.T) {
	e := newEnv(t)
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	migrateBeforeNameCase(t, db, migrations.SQLite)
	m, err := auth.New(context.Background(), auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: e.store, Clock: e.clk, BcryptCost: bcrypt.MinCost})
	require.NoError(t, err, "the migration does not fail on names from before")
	requireClashingNamesKept(t, m)
}

func TestPostgresMigrationKeepsNamesThatClashIgnoringCase(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	m, db := postgresManagerBeforeNameCase(t)
	requireClashingNamesKept(t, m)
	var unique bool
	require.NoError(t, db.QueryRowContext(context.Background(),
		`SELECT indisunique FROM pg_index WHERE indexrelid = 'ui_users_name_ci'::regclass`).Scan(&unique))
	require.False(t, unique, "no unique index can be built over the old names")
}

// TestPostgresCreateUserWaitsForClashingCreation: on a database without the
// unique index (names clashed before the migration), a creation waits for
// another one in progress and then sees its name.
func TestPostgresCreateUserWaitsForClashingCreation(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx := context.Background()
	m, db := postgresManagerBeforeNameCase(t)
	other, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.ExecContext(ctx, `INSERT INTO ui_users (name, password_hash, roles, must_change, created_ms, updated_ms) VALUES ('Bob', 'x', 'viewer', 0, 0, 0)`)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := m.CreateUser(ctx, "BOB", "correct horse battery", operator, false)
		done <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		_ = db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return n > 0
	}, 10*time.Second, 5*time.Millisecond, "the creation waits on the other one")
	require.NoError(t, other.Commit())
	err = <-done
	require.ErrorIs(t, err, auth.ErrExists)
	require.Contains(t, err.Error(), `"Bob"`)
}

// postgresManagerBeforeNameCase is postgresManager on a database prepared
// by migrateBeforeNameCase (its auditor on a database of its own).
func postgresManagerBeforeNameCase(t *testing.T) (*auth.Manager, *sql.DB) {
	t.Helper()
	_, _, st, clk := postgresManager(t)
	db, err := sql.Open("pgx", testenv.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	migrateBeforeNameCase(t, db, migrations.Postgres)
	m, err := auth.New(context.Background(), auth.Options{DB: db, Dialect: migrations.Postgres, Auditor: st, Clock: clk, BcryptCost: bcrypt.MinCost})
	require.NoError(t, err, "the migration does not fail on names from before")
	return m, db
}
