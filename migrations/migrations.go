// Package migrations holds Governor's SQL schema for both supported databases
// and applies it at start.
//
// The SQL lives in two directories embedded into the binary: postgres/ for
// PostgreSQL and sqlite/ for the embedded SQLite default. Up applies every file
// of one dialect that the database has not seen yet, in version order, with
// goose v3. On PostgreSQL it holds goose's session-level advisory lock while it
// runs, so several processes starting at once apply each file exactly once; on
// SQLite each file applies in its own transaction and a process that loses a
// race to another tries again. Running Up again is a no-op.
//
// # Adding a migration
//
// Add one file to each directory with the same version number and name, e.g.
// postgres/00003_rule_labels.sql and sqlite/00003_rule_labels.sql, in goose's
// annotated SQL format:
//
//	-- +goose Up
//	ALTER TABLE rule_versions ADD COLUMN labels text;
//
//	-- +goose Down
//	ALTER TABLE rule_versions DROP COLUMN labels;
//
// Wrap statements that contain semicolons (PL/pgSQL functions, SQLite
// triggers) in -- +goose StatementBegin / -- +goose StatementEnd. Each file
// runs in one transaction; a statement that cannot (CREATE INDEX
// CONCURRENTLY) needs -- +goose NO TRANSACTION at the top of its own file.
// Never edit a file that has shipped: add a new one. TestFilesPairedAcrossDialects
// fails when a file exists for one dialect only.
//
// Every store opening the database (rules/versioning/postgres and sqlite, and
// any other subsystem's) calls Up, which applies all embedded files, so the
// first process to start brings the whole schema up to date. Version ranges are reserved per
// subsystem so that files from different teams never collide:
//
//	00001-00099  rules (rules/versioning)
//	00100-00199  alerts
//	00200-00299  rule delivery ledger (rules/distribution)
//	00300-00399  web UI accounts (ui/auth)
//	00400-00499  decision engine state (engine/leader, engine/evaluate)
//
// Files are applied in version order even when a lower number arrives after a
// higher one was applied (goose's out-of-order mode), because subsystems add
// files independently.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Dialect names a supported database.
type Dialect string

// Supported dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// ErrMigrate is wrapped by every error of this package.
var ErrMigrate = errors.New("migrations: failed")

//go:embed postgres/*.sql sqlite/*.sql
var embedded embed.FS

// lockID is the PostgreSQL advisory lock key held while migrating (a
// database-scoped lock, so separate databases on one server do not contend).
const lockID int64 = 0x676f7665726e6f72 // "governor"

// sqliteAttempts bounds how often Up runs on SQLite when a concurrent
// migrator wins the race to apply a file.
const sqliteAttempts = 5

// Options tune Up. The zero value is valid.
type Options struct {
	// Logger receives one line per applied file; nil discards.
	Logger *slog.Logger
	// LockTimeout bounds how long Up waits for another process holding the
	// migration lock (PostgreSQL only); default 2 minutes.
	LockTimeout time.Duration
}

// FS returns the embedded SQL files of a dialect, rooted at its directory.
func FS(d Dialect) (fs.FS, error) {
	switch d {
	case Postgres, SQLite:
		return fs.Sub(embedded, string(d))
	}
	return nil, fmt.Errorf("%w: unknown dialect %q (want %q or %q)", ErrMigrate, d, Postgres, SQLite)
}

// Up applies every embedded migration of the dialect that db has not applied
// yet. For PostgreSQL pass a *sql.DB from pgx's stdlib adapter
// (stdlib.OpenDBFromPool); for SQLite the modernc.org/sqlite driver.
func Up(ctx context.Context, db *sql.DB, d Dialect, opts ...Options) error {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	fsys, err := FS(d)
	if err != nil {
		return err
	}
	return up(ctx, db, d, fsys, o)
}

// up applies the migrations in fsys.
func up(ctx context.Context, db *sql.DB, d Dialect, fsys fs.FS, o Options) error {
	p, err := provider(db, d, fsys, o)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	// SQLite has no advisory lock: a process that loses the race to apply a
	// file fails (its transaction rolls back) and, once the winner has
	// committed, finds the file applied on the next attempt.
	for attempt := 1; err != nil && d == SQLite && attempt < sqliteAttempts; attempt++ {
		t := time.NewTimer(time.Duration(attempt) * 50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s: %w", ErrMigrate, d, errors.Join(err, ctx.Err()))
		case <-t.C:
		}
		var more []*goose.MigrationResult
		more, err = p.Up(ctx)
		results = append(results, more...)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMigrate, d, err)
	}
	if o.Logger != nil {
		for _, r := range results {
			o.Logger.LogAttrs(ctx, slog.LevelInfo, "migration applied",
				slog.String("dialect", string(d)),
				slog.Int64("version", r.Source.Version),
				slog.String("file", r.Source.Path),
				slog.Duration("took", r.Duration))
		}
	}
	return nil
}

// Version returns the highest migration version applied to db (0 if none).
func Version(ctx context.Context, db *sql.DB, d Dialect) (int64, error) {
	fsys, err := FS(d)
	if err != nil {
		return 0, err
	}
	p, err := provider(db, d, fsys, Options{})
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: version: %w", ErrMigrate, d, err)
	}
	return v, nil
}

func provider(db *sql.DB, d Dialect, fsys fs.FS, o Options) (*goose.Provider, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: db is nil", ErrMigrate)
	}
	opts := []goose.ProviderOption{goose.WithAllowOutofOrder(true), goose.WithDisableGlobalRegistry(true)}
	var gd goose.Dialect
	switch d {
	case Postgres:
		gd = goose.DialectPostgres
		timeout := o.LockTimeout
		if timeout <= 0 {
			timeout = 2 * time.Minute
		}
		const period = 1 // seconds between attempts
		locker, err := lock.NewPostgresSessionLocker(
			lock.WithLockID(lockID),
			lock.WithLockTimeout(period, uint64(timeout/time.Second)+1),
		)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: lock: %w", ErrMigrate, d, err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case SQLite:
		gd = goose.DialectSQLite3
	default:
		return nil, fmt.Errorf("%w: unknown dialect %q (want %q or %q)", ErrMigrate, d, Postgres, SQLite)
	}
	p, err := goose.NewProvider(gd, db, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMigrate, d, err)
	}
	return p, nil
}
