package testenv

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestPostgresGivesAFreshDatabase(t *testing.T) {
	dsn := Postgres(t)
	if !strings.HasPrefix(DatabaseName(dsn), "governor_test_") {
		t.Fatalf("database %q", DatabaseName(dsn))
	}
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(context.Background(), "select count(*) from pg_tables where schemaname='public'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("fresh database has %d tables (%v)", n, err)
	}
}

func TestNATSAnswers(t *testing.T) {
	if u := NATS(t); !strings.HasPrefix(u, "nats://") {
		t.Fatalf("url %q", u)
	}
}
