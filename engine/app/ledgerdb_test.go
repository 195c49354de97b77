package app

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// TestSQLiteLedgerReadThenWrite: a ledger transaction that reads and then
// writes must not fail with SQLITE_BUSY because another pool on the same file
// (the rules store's) committed after its read. With deferred transactions
// the write fails at once, busy timeout or not; the ledger pool's
// transactions take the write lock at BEGIN, so the other writer waits (here
// it gives up at once: busy_timeout 0) and the transaction commits.
func TestSQLiteLedgerReadThenWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "governor.db")
	ledger, err := sql.Open("sqlite", sqliteLedgerDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := ledger.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)`); err != nil {
		t.Fatal(err)
	}

	tx, err := ledger.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	// The other writer either commits (deferred BEGIN) or is refused at once
	// (the ledger transaction holds the write lock); both are allowed.
	_, _ = other.ExecContext(ctx, `INSERT INTO t (v) VALUES (1)`)
	if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, n); err != nil {
		t.Fatalf("write after read in a ledger transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}
