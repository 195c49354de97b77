package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
)

func TestFilesPairedAcrossDialects(t *testing.T) {
	names := map[migrations.Dialect][]string{}
	for _, d := range []migrations.Dialect{migrations.Postgres, migrations.SQLite} {
		fsys, err := migrations.FS(d)
		require.NoError(t, err)
		files, err := fs.Glob(fsys, "*.sql")
		require.NoError(t, err)
		require.NotEmpty(t, files)
		for _, f := range files {
			b, err := fs.ReadFile(fsys, f)
			require.NoError(t, err)
			require.Contains(t, string(b), "-- +goose Up", f)
			require.Contains(t, string(b), "-- +goose Down", f)
		}
		names[d] = files
	}
	require.Equal(t, names[migrations.Postgres], names[migrations.SQLite],
		"every migration needs a file of the same name for each dialect")
}

func TestUnknownDialect(t *testing.T) {
	_, err := migrations.FS("oracle")
	require.ErrorIs(t, err, migrations.ErrMigrate)
	require.ErrorContains(t, err, `"oracle"`)
	require.ErrorIs(t, migrations.Up(context.Background(), nil, migrations.SQLite), migrations.ErrMigrate)
}

func latest(t *testing.T, d migrations.Dialect) int64 {
	fsys, err := migrations.FS(d)
	require.NoError(t, err)
	files, err := fs.Glob(fsys, "*.sql")
	require.NoError(t, err)
	last := filepath.Base(files[len(files)-1])
	var v int64
	for _, c := range last[:strings.IndexByte(last, '_')] {
		v = v*10 + int64(c-'0')
	}
	return v
}

func TestSQLiteUpIsIdempotent(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "g.db")+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	for range 2 {
		require.NoError(t, migrations.Up(ctx, db, migrations.SQLite))
	}
	v, err := migrations.Version(ctx, db, migrations.SQLite)
	require.NoError(t, err)
	require.Equal(t, latest(t, migrations.SQLite), v)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM rule_audit_head`).Scan(&n))
	require.Equal(t, 1, n)
	_, err = db.ExecContext(ctx, `DELETE FROM rule_audit`)
	require.NoError(t, err, "an empty delete fires no row trigger")
}

// TestPostgresConcurrentUp starts several migrators at once: the advisory
// lock lets each file apply exactly once and every caller succeeds.
func TestPostgresConcurrentUp(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, testenv.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = migrations.Up(ctx, db, migrations.Postgres) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, migrations.Up(ctx, db, migrations.Postgres))
	v, err := migrations.Version(ctx, db, migrations.Postgres)
	require.NoError(t, err)
	require.Equal(t, latest(t, migrations.Postgres), v)
	var applied int
	require.NoError(t, db.QueryRowContext(ctx,
		`SELECT count(*) FROM goose_db_version WHERE version_id = 1`).Scan(&applied))
	require.Equal(t, 1, applied)
	_, err = db.ExecContext(ctx, `INSERT INTO rule_audit (seq, at, actor, roles, action, detail, prev_hash, hash)
		VALUES (1, now(), 'a', '', 'x', '{}', '', '')`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `UPDATE rule_audit SET actor = 'b'`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.ExecContext(ctx, `DELETE FROM rule_audit`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.ExecContext(ctx, `TRUNCATE rule_audit`)
	require.ErrorContains(t, err, "append-only")
}
