package sqlstore

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// TestStdTx: the database/sql adapter runs statements on a *sql.DB and on a
// *sql.Tx alike: Exec reports the rows affected, QueryRow and Query read,
// and a rolled-back transaction leaves nothing.
func TestStdTx(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file::memory:")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	on := StdTx(db)
	_, err = on.Exec(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)`)
	require.NoError(t, err)
	n, err := on.Exec(ctx, `INSERT INTO t (name) VALUES ($1), ($2)`, "a", "b")
	require.NoError(t, err)
	require.Equal(t, int64(2), n)

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	in := StdTx(tx)
	n, err = in.Exec(ctx, `UPDATE t SET name = name || $1`, "!")
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	var name string
	require.NoError(t, in.QueryRow(ctx, `SELECT name FROM t WHERE id = $1`, 1).Scan(&name))
	require.Equal(t, "a!", name)
	rows, err := in.Query(ctx, `SELECT name FROM t ORDER BY id`)
	require.NoError(t, err)
	var names []string
	for rows.Next() {
		require.NoError(t, rows.Scan(&name))
		names = append(names, name)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Equal(t, []string{"a!", "b!"}, names)
	require.NoError(t, tx.Rollback())

	require.NoError(t, on.QueryRow(ctx, `SELECT name FROM t WHERE id = $1`, 2).Scan(&name))
	require.Equal(t, "b", name, "rolled back")
	_, err = on.Query(ctx, `SELECT nope FROM t`)
	require.Error(t, err)
	require.ErrorIs(t, on.QueryRow(ctx, `SELECT name FROM t WHERE id = $1`, 9).Scan(&name), sql.ErrNoRows)
}
