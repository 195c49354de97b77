// Package pgrole gives tests of the PostgreSQL rule store a connection pool
// running as a fresh application role: not a superuser, with only the
// grants the test names.
package pgrole

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// New creates a role (dropped when the test ends) with USAGE on schema
// public and each of grants ("SELECT, INSERT ON rule_audit": what GRANT
// takes before TO), run by admin, and returns its name and a pool on url
// whose connections run as it.
func New(t testing.TB, admin *pgxpool.Pool, url string, grants ...string) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	role := "governor_app_" + hex.EncodeToString(b[:])
	stmts := []string{`CREATE ROLE ` + role + ` NOLOGIN NOSUPERUSER NOINHERIT`, `GRANT USAGE ON SCHEMA public TO ` + role}
	for _, g := range grants {
		stmts = append(stmts, `GRANT `+g+` TO `+role)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, `DROP OWNED BY `+role)
		_, _ = admin.Exec(ctx, `DROP ROLE `+role)
	})
	for _, q := range stmts {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SET ROLE `+role)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var super bool
	if err := pool.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		t.Fatal(err)
	}
	if super {
		t.Fatalf("role %s is a superuser", role)
	}
	return role, pool
}
