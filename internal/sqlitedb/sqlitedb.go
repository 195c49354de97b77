// Package sqlitedb is how Governor opens its SQLite files
// (modernc.org/sqlite, driver "sqlite"): one way for every pool on a file,
// so the rules store, the engine's ledger pool, the alerts store and the
// web UI's accounts open it alike.
//
// A file is opened in WAL mode (readers never wait for the writer) with
// synchronous(NORMAL) (a commit is durable once the WAL is synced at a
// checkpoint; no corruption on power loss), a busy timeout, and write
// transactions that take the write lock at BEGIN (BEGIN IMMEDIATE). Without
// that last one a transaction that reads and then writes fails at once with
// SQLITE_BUSY_SNAPSHOT, without waiting out the busy timeout, whenever
// another connection committed since its read.
//
// A pool (Open) has one connection. Connections that want to write poll
// SQLite's busy handler for the lock, first come is not first served, and
// under load the others keep taking it: a writer polls until its busy
// timeout is spent and fails with SQLITE_BUSY (the dev stack's ledger pool,
// with up to eight connections, so failed a login at a load average of 7).
// With one connection the pool's users queue for it in database/sql, each
// for as long as its context allows, and only another pool's or another
// process's connection is waited for with the busy timeout.
//
// Open creates a missing database file readable by its owner only (0600):
// it holds password hashes and alert receivers' secrets. SQLite gives the
// -wal and -shm files the database file's permissions. An existing file
// keeps the permissions it has.
package sqlitedb

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// DefaultBusyTimeout is how long a statement waits for another
// connection's write lock by default.
const DefaultBusyTimeout = 5 * time.Second

// Options of DSN. Zero fields take defaults.
type Options struct {
	// BusyTimeout is how long a statement waits for another connection's
	// lock before failing with SQLITE_BUSY; default DefaultBusyTimeout.
	BusyTimeout time.Duration
	// ForeignKeys turns on foreign key enforcement.
	ForeignKeys bool
}

// uriPath escapes what a SQLite URI filename would otherwise read as the
// start of its query ('?') or fragment ('#') or as an escape ('%'): a
// directory named "a#b" must not open the file "a".
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// DSN returns the data source name of the database file path (":memory:"
// for a private in-memory database, which has no WAL).
func DSN(path string, o Options) string {
	busy := o.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	if o.ForeignKeys {
		q.Add("_pragma", "foreign_keys(1)")
	}
	q.Add("_pragma", "synchronous(NORMAL)")
	if path != ":memory:" {
		q.Add("_pragma", "journal_mode(WAL)")
	}
	q.Set("_txlock", "immediate")
	return "file:" + uriPath.Replace(path) + "?" + q.Encode()
}

// Open returns a pool of one connection on the database file path, opened
// with DSN(path, o) and kept open (":memory:" thus stays one database); a
// missing file is created with mode 0600. A
// caller must not use the pool again while it holds a transaction or
// unclosed rows of it: that waits for itself.
func Open(path string, o Options) (*sql.DB, error) {
	if path != ":memory:" {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case err == nil:
			_ = f.Close()
		case !errors.Is(err, fs.ErrExist):
			return nil, fmt.Errorf("sqlitedb: %w", err)
		}
	}
	db, err := sql.Open("sqlite", DSN(path, o))
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}
