package versioning_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/conformance"
	"governor.dev/governor/rules/versioning/internal/pgrole"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
)

// TestConformance runs the same behaviour against every Store.
func TestConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		conformance.Run(t, func(t *testing.T, o conformance.Options) conformance.Harness { return sqliteHarness(t, o) }, conformance.Capabilities{})
	})
	t.Run("postgres", func(t *testing.T) {
		conformance.Run(t, func(t *testing.T, o conformance.Options) conformance.Harness { return postgresHarness(t, o) }, conformance.Capabilities{Roles: true})
	})
}

func sqliteHarness(t testing.TB, o conformance.Options) conformance.Harness {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rules.db")
	s, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: o.Clock, BeforeCommit: o.BeforeCommit, RetryBackoff: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	// A second connection, like an operator's sqlite3 shell on the file.
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := raw.ExecContext(ctx, q, args...)
		return err
	}
	return conformance.Harness{
		Store: s,
		Exec:  exec,
		Count: func(ctx context.Context, q string, args ...any) int64 {
			var n int64
			require.NoError(t, raw.QueryRowContext(ctx, q, args...).Scan(&n), q)
			return n
		},
		Plan: func(ctx context.Context, q string, args ...any) string {
			rows, err := raw.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
			require.NoError(t, err)
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
				plan = append(plan, detail)
			}
			require.NoError(t, rows.Err())
			return strings.Join(plan, "\n")
		},
		Tamper: func(ctx context.Context, q string) error {
			for _, stmt := range []string{`DROP TRIGGER IF EXISTS rule_audit_no_update`, `DROP TRIGGER IF EXISTS rule_audit_no_delete`, q} {
				if err := exec(ctx, stmt); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func postgresHarness(t testing.TB, o conformance.Options) conformance.Harness {
	t.Helper()
	ctx := context.Background()
	if testing.Short() {
		t.Skip("PostgreSQL integration test: skipped with -short")
	}
	url := testenv.Postgres(t)
	s, err := postgres.Open(ctx, postgres.Options{URL: url, MaxConns: 8, Clock: o.Clock, BeforeCommit: o.BeforeCommit, RetryBackoff: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	admin, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := admin.Exec(ctx, q, args...)
		return err
	}
	return conformance.Harness{
		Store: s,
		Exec:  exec,
		Count: func(ctx context.Context, q string, args ...any) int64 {
			var n int64
			require.NoError(t, admin.QueryRow(ctx, q, args...).Scan(&n), q)
			return n
		},
		Plan: func(ctx context.Context, q string, args ...any) string {
			rows, err := admin.Query(ctx, "EXPLAIN "+q, args...)
			require.NoError(t, err)
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			return strings.Join(lines, "\n")
		},
		Tamper: func(ctx context.Context, q string) error {
			// The owner can switch the trigger off; the chain still tells.
			return pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
				for _, stmt := range []string{`ALTER TABLE rule_audit DISABLE TRIGGER USER`, q, `ALTER TABLE rule_audit ENABLE TRIGGER USER`} {
					if _, err := tx.Exec(ctx, stmt); err != nil {
						return err
					}
				}
				return nil
			})
		},
		AppRole: func(t *testing.T) (versioning.Store, func(ctx context.Context, q string) error) {
			return appRole(t, admin, url)
		},
		Concurrent: true,
	}
}

// appRole creates a non-superuser role with the grants the postgres package
// documents and opens a store whose connections run as that role.
func appRole(t *testing.T, admin *pgxpool.Pool, url string) (versioning.Store, func(ctx context.Context, q string) error) {
	t.Helper()
	_, pool := pgrole.New(t, admin, url,
		`SELECT, INSERT, UPDATE ON rule_services, rule_versions, rule_approvals, rule_audit_head, rule_outbox,
			rule_outbox_failures`,
		`SELECT, INSERT ON rule_audit`,
		`SELECT ON goose_db_version`)
	s, err := postgres.Open(context.Background(), postgres.Options{Pool: pool, SkipMigrations: true})
	require.NoError(t, err)
	return s, func(ctx context.Context, q string) error {
		_, err := pool.Exec(ctx, q)
		return err
	}
}
