// Package postgres is the production versioning.Store: rule versions, the
// audit log and the outbox in PostgreSQL through pgx (a connection pool,
// contexts and timeouts on every call).
//
// Open applies the embedded migrations (package
// governor.dev/governor/migrations) under goose's advisory lock, so several
// processes may start at once. Every write transaction locks the service's
// row, which makes version numbers gap-free (unless RaiseNumbering skips
// some), and then the audit chain head.
//
// Each transaction that writes an outbox row also sends
// NOTIFY governor_outbox (OutboxChannel) with the service name as payload, so
// a relay in another process can LISTEN and wake at once.
//
// The application should connect as a role that may SELECT and INSERT on
// rule_audit but not UPDATE, DELETE or TRUNCATE it (the migration revokes
// those from PUBLIC; a trigger refuses them for every role anyway):
//
//	GRANT SELECT, INSERT, UPDATE ON rule_services, rule_versions, rule_approvals,
//	    rule_audit_head, rule_outbox, rule_outbox_failures TO governor_app;
//	GRANT SELECT, INSERT ON rule_audit TO governor_app;
//
// Open checks these privileges of the role it runs as (current_user) and
// refuses to start without them, with an ErrMissingGrant naming the role,
// each table and the privileges missing on it, and the GRANT that adds
// them. A deployment whose application role was set up before
// rule_outbox_failures existed (migration 00005) needs
//
//	GRANT SELECT, INSERT, UPDATE ON rule_outbox_failures TO governor_app;
//
// (the migrations cannot grant it: they do not know the role).
//
// Writes whose context carries a versioning.Fence (the engine's, under the
// tick its leader claimed) also read governor_engine_ticks, right after
// locking the service's row and again as the last statement before
// COMMIT, refusing the write (versioning.ErrFenced) and rolling it back
// when a later tick was claimed (versioning.Fence describes the window
// that remains): the engine's role needs SELECT on that table, which its
// leader election uses anyway.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
	"governor.dev/governor/sdk/clock"
)

// OutboxChannel is the NOTIFY channel of new outbox rows.
const OutboxChannel = "governor_outbox"

// ErrMissingGrant: the role the store runs as lacks a privilege it needs on
// one of its tables (Open; the error names them).
var ErrMissingGrant = errors.New("postgres: missing table privileges")

// grants are the privileges the store needs, by table (the package doc's
// GRANT statements).
var grants = []struct {
	table      string
	privileges []string
}{
	{"rule_services", []string{"SELECT", "INSERT", "UPDATE"}},
	{"rule_versions", []string{"SELECT", "INSERT", "UPDATE"}},
	{"rule_approvals", []string{"SELECT", "INSERT", "UPDATE"}},
	{"rule_audit_head", []string{"SELECT", "INSERT", "UPDATE"}},
	{"rule_outbox", []string{"SELECT", "INSERT", "UPDATE"}},
	{"rule_outbox_failures", []string{"SELECT", "INSERT", "UPDATE"}},
	{"rule_audit", []string{"SELECT", "INSERT"}},
}

// checkGrants returns an ErrMissingGrant naming every table on which the
// current role lacks a privilege of grants, with the GRANTs that add them.
func checkGrants(ctx context.Context, q querier) error {
	var tables, privileges []string
	for _, g := range grants {
		for _, p := range g.privileges {
			tables, privileges = append(tables, g.table), append(privileges, p)
		}
	}
	rows, err := q.Query(ctx, `SELECT current_user::text, g.t, g.p FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS g(t, p, i)
		WHERE NOT has_table_privilege(g.t, g.p) ORDER BY g.i`, tables, privileges)
	if err != nil {
		return fmt.Errorf("%w: postgres: check table privileges: %w", versioning.ErrUnavailable, err)
	}
	var role string
	missing := map[string][]string{}
	var order []string
	for rows.Next() {
		var t, p string
		if err := rows.Scan(&role, &t, &p); err != nil {
			rows.Close()
			return fmt.Errorf("%w: postgres: check table privileges: %w", versioning.ErrUnavailable, err)
		}
		if missing[t] == nil {
			order = append(order, t)
		}
		missing[t] = append(missing[t], p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: postgres: check table privileges: %w", versioning.ErrUnavailable, err)
	}
	if len(order) == 0 {
		return nil
	}
	var lacks, fix []string
	for _, t := range order {
		ps := strings.Join(missing[t], ", ")
		lacks = append(lacks, ps+" on "+t)
		fix = append(fix, "GRANT "+ps+" ON "+t+" TO "+pgx.Identifier{role}.Sanitize()+";")
	}
	return fmt.Errorf("%w: %w: role %q lacks %s (%s)", versioning.ErrUnavailable, ErrMissingGrant, role,
		strings.Join(lacks, "; "), strings.Join(fix, " "))
}

// Options configure Open.
type Options struct {
	// URL is a PostgreSQL connection string; required unless Pool is set.
	URL string
	// Pool, if set, is used instead of URL and is not closed by Close.
	Pool *pgxpool.Pool
	// MaxConns of the pool opened from URL; default 10.
	MaxConns int32
	// SkipMigrations leaves the schema alone (when a separate, more
	// privileged step migrates it).
	SkipMigrations bool
	Clock          clock.Clock
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
	// Timeout bounds each operation; default 10s.
	Timeout time.Duration
	// RetryBackoff is the wait before running a transiently failed
	// transaction again, doubled per attempt; default 5ms, negative for none.
	RetryBackoff time.Duration
	// BeforeCommit is a fault-injection hook for tests: it runs inside every
	// write transaction after its writes, before its last fence check and
	// its commit, and an error aborts the attempt
	// (sqlstore.ErrRetryable makes the store run the transaction again).
	BeforeCommit func(op string, attempt int) error
}

// Open connects, migrates and returns the store.
func Open(ctx context.Context, o Options) (versioning.Store, error) {
	pool, owned := o.Pool, false
	if pool == nil {
		if o.URL == "" {
			return nil, fmt.Errorf("%w: postgres: URL or Pool is required", versioning.ErrInvalid)
		}
		cfg, err := pgxpool.ParseConfig(o.URL)
		if err != nil {
			return nil, fmt.Errorf("%w: postgres: URL: %v", versioning.ErrInvalid, err)
		}
		cfg.MaxConns = 10
		if o.MaxConns > 0 {
			cfg.MaxConns = o.MaxConns
		}
		if cfg.ConnConfig.ConnectTimeout == 0 {
			cfg.ConnConfig.ConnectTimeout = 5 * time.Second
		}
		if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			return nil, fmt.Errorf("%w: postgres: %w", versioning.ErrUnavailable, err)
		}
		owned = true
	}
	fail := func(err error) (versioning.Store, error) {
		if owned {
			pool.Close()
		}
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := pool.Ping(pctx)
	cancel()
	if err != nil {
		return fail(fmt.Errorf("%w: postgres: %w", versioning.ErrUnavailable, err))
	}
	if !o.SkipMigrations {
		db := stdlib.OpenDBFromPool(pool)
		err := migrations.Up(ctx, db, migrations.Postgres, migrations.Options{Logger: o.Logger})
		_ = db.Close()
		if err != nil {
			return fail(fmt.Errorf("%w: postgres: %w", versioning.ErrUnavailable, err))
		}
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = checkGrants(gctx, pool)
	cancel()
	if err != nil {
		return fail(err)
	}
	return sqlstore.New(&db{pool: pool, owned: owned}, dialect(), sqlstore.Options{
		Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer, Timeout: o.Timeout,
		RetryBackoff: o.RetryBackoff, BeforeCommit: o.BeforeCommit,
	})
}

// dialect describes PostgreSQL to the shared store.
func dialect() sqlstore.Dialect {
	return sqlstore.Dialect{
		Name:         "postgres",
		ForUpdate:    " FOR UPDATE",
		SkipLocked:   " FOR UPDATE SKIP LOCKED",
		NotifyOutbox: `SELECT pg_notify('` + OutboxChannel + `', $1)`,
		Retryable: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
		},
		NoRows: func(err error) bool { return errors.Is(err, pgx.ErrNoRows) },
		UniqueViolation: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "23505"
		},
		Fences: true,
	}
}

// querier is what pgx.Tx and *pgxpool.Pool have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

type db struct {
	pool  *pgxpool.Pool
	owned bool
}

func (d *db) InTx(ctx context.Context, fn func(sqlstore.Tx) error) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(adapter{tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (d *db) Read(ctx context.Context, fn func(sqlstore.Tx) error) error { return fn(adapter{d.pool}) }

// Snapshot runs fn in a read-only REPEATABLE READ transaction: every
// statement sees the snapshot of the first, whatever commits meanwhile (a
// version and its approvals as of one moment). Read-only, it never fails
// with a serialization error.
func (d *db) Snapshot(ctx context.Context, fn func(sqlstore.Tx) error) error {
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(adapter{tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (d *db) Close() error {
	if d.owned {
		d.pool.Close()
	}
	return nil
}

type adapter struct{ q querier }

func (a adapter) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := a.q.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (a adapter) QueryRow(ctx context.Context, sql string, args ...any) sqlstore.Row {
	return a.q.QueryRow(ctx, sql, args...)
}

func (a adapter) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	rows, err := a.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}
