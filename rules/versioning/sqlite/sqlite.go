// Package sqlite is the zero-setup versioning.Store: rule versions, the audit
// log and the outbox in one embedded SQLite file (modernc.org/sqlite, no cgo).
//
// The file is opened in WAL mode with foreign keys on; write transactions
// start with BEGIN IMMEDIATE and wait up to BusyTimeout for another process
// holding the write lock. Within a process the store uses one connection, so
// its transactions are serialised. Open applies the embedded migrations
// (package governor.dev/governor/migrations).
//
// Path ":memory:" gives a private in-memory store, handy as a real Store in
// other packages' unit tests.
//
// The store ignores a versioning.Fence: SQLite mode runs one engine, which
// claims its ticks in memory (leader.Local), so no other leader's tick can
// supersede its writes.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
	"governor.dev/governor/sdk/clock"
)

// Options configure Open.
type Options struct {
	// Path of the database file; required (":memory:" for a private
	// in-memory database).
	Path string
	// BusyTimeout is how long a write waits for another process's write
	// lock; default 5s.
	BusyTimeout time.Duration
	Clock       clock.Clock
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
	// Timeout bounds each operation; default 10s.
	Timeout time.Duration
	// RetryBackoff is the wait before running a transiently failed
	// transaction again, doubled per attempt; default 5ms, negative for none.
	RetryBackoff time.Duration
	// BeforeCommit is a fault-injection hook for tests: it runs inside every
	// write transaction just before commit, and an error aborts the attempt
	// (sqlstore.ErrRetryable makes the store run the transaction again).
	BeforeCommit func(op string, attempt int) error
}

// Open opens (creating if needed) and migrates the database file.
func Open(ctx context.Context, o Options) (versioning.Store, error) {
	if o.Path == "" {
		return nil, fmt.Errorf("%w: sqlite: Path is required", versioning.ErrInvalid)
	}
	busy := o.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	// One connection: transactions of this process queue in database/sql
	// instead of failing with SQLITE_BUSY, and ":memory:" stays one database.
	sdb, err := sqlitedb.Open(o.Path, sqlitedb.Options{BusyTimeout: busy, ForeignKeys: true})
	if err != nil {
		return nil, fmt.Errorf("%w: sqlite: %w", versioning.ErrUnavailable, err)
	}
	if err := ping(ctx, sdb, busy); err != nil {
		_ = sdb.Close()
		return nil, fmt.Errorf("%w: sqlite: %s: %w", versioning.ErrUnavailable, o.Path, err)
	}
	if err := migrations.Up(ctx, sdb, migrations.SQLite, migrations.Options{Logger: o.Logger}); err != nil {
		_ = sdb.Close()
		return nil, fmt.Errorf("%w: sqlite: %w", versioning.ErrUnavailable, err)
	}
	return sqlstore.New(&db{sdb}, dialect(), sqlstore.Options{
		Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer, Timeout: o.Timeout,
		RetryBackoff: o.RetryBackoff, BeforeCommit: o.BeforeCommit,
	})
}

// ping opens the connection. Switching a new file to WAL mode needs a moment
// of exclusive access and fails at once with SQLITE_BUSY (no busy handler)
// while another process holds the file, so that is tried again until busy.
func ping(ctx context.Context, db *sql.DB, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	for {
		err := db.PingContext(ctx)
		if err == nil || !dialect().Retryable(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

func dialect() sqlstore.Dialect {
	code := func(err error) int {
		var se *sqlite.Error
		if errors.As(err, &se) {
			return se.Code()
		}
		return 0
	}
	return sqlstore.Dialect{
		Name: "sqlite",
		Retryable: func(err error) bool {
			c := code(err) & 0xff
			return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
		},
		NoRows: func(err error) bool { return errors.Is(err, sql.ErrNoRows) },
		UniqueViolation: func(err error) bool {
			c := code(err)
			return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
		},
	}
}

type db struct{ db *sql.DB }

func (d *db) InTx(ctx context.Context, fn func(sqlstore.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(sqlstore.StdTx(tx)); err != nil {
		return err
	}
	return tx.Commit()
}

func (d *db) Read(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return fn(sqlstore.StdTx(d.db))
}

// Snapshot runs fn in a read transaction: ReadOnly makes the driver begin a
// deferred transaction (no write lock), whose first read fixes the snapshot
// every later statement sees in WAL mode, whatever another connection
// commits meanwhile.
func (d *db) Snapshot(ctx context.Context, fn func(sqlstore.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(sqlstore.StdTx(tx)); err != nil {
		return err
	}
	return tx.Commit()
}

func (d *db) Close() error { return d.db.Close() }
