package migrations

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// TestLowerNumberAddedLater: subsystems own number ranges and add files
// independently, so a file numbered below one already applied must still
// be applied.
func TestLowerNumberAddedLater(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	file := func(table string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("-- +goose Up\nCREATE TABLE " + table + " (id INTEGER);\n-- +goose Down\nDROP TABLE " + table + ";\n")}
	}
	first := fstest.MapFS{"00001_rules.sql": file("a"), "00200_ledger.sql": file("c")}
	require.NoError(t, up(ctx, db, SQLite, first, Options{}))
	later := fstest.MapFS{"00001_rules.sql": file("a"), "00100_alerts.sql": file("b"), "00200_ledger.sql": file("c")}
	require.NoError(t, up(ctx, db, SQLite, later, Options{}))
	for _, table := range []string{"a", "b", "c"} {
		_, err := db.ExecContext(ctx, "INSERT INTO "+table+" (id) VALUES (1)")
		require.NoError(t, err, table)
	}
	require.NoError(t, up(ctx, db, SQLite, later, Options{}), "nothing left to apply")
}

func TestBrokenFileRollsBack(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	broken := fstest.MapFS{"00001_x.sql": &fstest.MapFile{Data: []byte(
		"-- +goose Up\nCREATE TABLE x (id INTEGER);\nCREATE TABLE x (id INTEGER);\n-- +goose Down\nDROP TABLE x;\n")}}
	err = up(ctx, db, SQLite, broken, Options{})
	require.ErrorIs(t, err, ErrMigrate)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'x'`).Scan(&n))
	require.Zero(t, n, "a failing file leaves nothing behind")
}
