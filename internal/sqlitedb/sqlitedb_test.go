package sqlitedb_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"governor.dev/governor/internal/sqlitedb"
)

func TestDSN(t *testing.T) {
	tests := []struct {
		name, path string
		o          sqlitedb.Options
		want       string
	}{
		{"defaults", "/var/g.db", sqlitedb.Options{},
			"file:/var/g.db?_pragma=busy_timeout%285000%29&_pragma=synchronous%28NORMAL%29&_pragma=journal_mode%28WAL%29&_txlock=immediate"},
		{"foreign keys and a busy timeout", "g.db", sqlitedb.Options{BusyTimeout: 250 * time.Millisecond, ForeignKeys: true},
			"file:g.db?_pragma=busy_timeout%28250%29&_pragma=foreign_keys%281%29&_pragma=synchronous%28NORMAL%29&_pragma=journal_mode%28WAL%29&_txlock=immediate"},
		{"in memory: no WAL", ":memory:", sqlitedb.Options{},
			"file::memory:?_pragma=busy_timeout%285000%29&_pragma=synchronous%28NORMAL%29&_txlock=immediate"},
		{"URI characters in the path escaped", "/srv/a#1/b?2/50%/g.db", sqlitedb.Options{},
			"file:/srv/a%231/b%3f2/50%25/g.db?_pragma=busy_timeout%285000%29&_pragma=synchronous%28NORMAL%29&_pragma=journal_mode%28WAL%29&_txlock=immediate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, sqlitedb.DSN(tt.path, tt.o))
		})
	}
}

// TestPragmas: a pool opened with DSN runs in WAL mode with
// synchronous(NORMAL), the busy timeout and, when asked, foreign keys.
func TestPragmas(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", sqlitedb.DSN(filepath.Join(t.TempDir(), "g.db"), sqlitedb.Options{BusyTimeout: 1500 * time.Millisecond, ForeignKeys: true}))
	require.NoError(t, err)
	defer db.Close()
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "1", "busy_timeout": "1500", "foreign_keys": "1"} {
		var got string
		require.NoError(t, db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got), pragma)
		require.Equal(t, want, got, pragma)
	}
}

// TestReadThenWrite: a transaction that reads and then writes must not fail
// with SQLITE_BUSY because another pool on the same file committed after
// its read. With deferred transactions the write fails at once, busy
// timeout or not; DSN's transactions take the write lock at BEGIN, so the
// other writer waits (here it gives up at once: busy_timeout 0) and the
// transaction commits.
func TestReadThenWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "g.db")
	pool, err := sql.Open("sqlite", sqlitedb.DSN(path, sqlitedb.Options{}))
	require.NoError(t, err)
	defer pool.Close()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	require.NoError(t, err)
	defer other.Close()
	_, err = pool.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)`)
	require.NoError(t, err)

	tx, err := pool.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var n int
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n))
	// The other writer either commits (deferred BEGIN) or is refused at once
	// (the transaction holds the write lock); both are allowed.
	_, _ = other.ExecContext(ctx, `INSERT INTO t (v) VALUES (1)`)
	_, err = tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, n)
	require.NoError(t, err, "write after read in a transaction")
	require.NoError(t, tx.Commit())
}

// TestOpenQueuesWriters: the writers of one pool queue for its connection
// instead of polling for SQLite's write lock, so none fails with
// SQLITE_BUSY however short the busy timeout; and the pool keeps ":memory:"
// one database.
func TestOpenQueuesWriters(t *testing.T) {
	for _, path := range []string{filepath.Join(t.TempDir(), "g.db"), ":memory:"} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ctx := context.Background()
			db, err := sqlitedb.Open(path, sqlitedb.Options{BusyTimeout: time.Millisecond})
			require.NoError(t, err)
			defer db.Close()
			_, err = db.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)`)
			require.NoError(t, err)
			const writers, each = 8, 25
			errs := make(chan error, writers*each)
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						errs <- func() error {
							tx, err := db.BeginTx(ctx, nil)
							if err != nil {
								return err
							}
							defer func() { _ = tx.Rollback() }()
							var n int
							if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
								return err
							}
							if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, w*each+i+n); err != nil {
								return err
							}
							return tx.Commit()
						}()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			var n int
			require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n))
			require.Equal(t, writers*each, n)
		})
	}
}

// TestOpenCreatesPrivateFiles: the database holds password hashes and alert
// receivers' secrets; a file Open creates, and the -wal and -shm files SQLite
// creates beside it, are readable by their owner only, whatever the umask
// (SQLite's default, 0644, made them world-readable).
func TestOpenCreatesPrivateFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(context.Background(), `CREATE TABLE t (k INTEGER)`)
	require.NoError(t, err)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Zero(t, fi.Mode().Perm()&0o077, "%s has mode %v", p, fi.Mode())
	}
}

// TestOpenExistingFileKeepsItsMode: a file the operator made (say
// group-readable for a backup job) is opened as it is.
func TestOpenExistingFileKeepsItsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	require.NoError(t, os.Chmod(path, 0o640))
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(context.Background(), `CREATE TABLE t (k INTEGER)`)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
}

// TestOpenPathWithURICharacters: the path goes into a SQLite URI, where '#'
// starts a fragment, '?' a query and '%' an escape. A data directory named
// "a#b" opened the file "a" beside it, and one named "c?d" took the rest of
// the path for the query and lost the pragmas, silently, in both cases.
// The database must be the file at the path, in WAL mode.
func TestOpenPathWithURICharacters(t *testing.T) {
	for _, name := range []string{"a#b", "c?d", "e%41f", "g h"} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, name)
			require.NoError(t, os.Mkdir(dir, 0o700))
			path := filepath.Join(dir, "g.db")
			db, err := sqlitedb.Open(path, sqlitedb.Options{})
			require.NoError(t, err)
			defer db.Close()
			ctx := context.Background()
			var mode string
			require.NoError(t, db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
			require.Equal(t, "wal", mode)
			_, err = db.ExecContext(ctx, `CREATE TABLE t (k INTEGER)`)
			require.NoError(t, err)
			_, err = os.Stat(path + "-wal")
			require.NoError(t, err, "the WAL is beside the file at the path")
			entries, err := os.ReadDir(root)
			require.NoError(t, err)
			require.Len(t, entries, 1, "nothing opened beside the directory")
		})
	}
}
