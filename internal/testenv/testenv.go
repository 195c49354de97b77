// Package testenv gives integration tests the real services of this machine:
// a fresh PostgreSQL database per test and the NATS server URL.
//
// Outside CI a missing service skips the test with the reason; with CI=true it
// fails it, so integration tests never skip silently in CI.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// CI reports whether the tests run in CI (CI=true).
func CI() bool { return os.Getenv("CI") == "true" }

// Unavailable skips the test, or fails it under CI.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("required service unavailable in CI: "+format, args...)
	}
	t.Skipf("service unavailable (set CI=true to fail instead): "+format, args...)
}

// PostgresURL is the admin connection URL: $GOVERNOR_TEST_POSTGRES or the
// local trust-auth server.
func PostgresURL() string {
	if u := os.Getenv("GOVERNOR_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NATSURL is $GOVERNOR_TEST_NATS or the local server.
func NATSURL() string {
	if u := os.Getenv("GOVERNOR_TEST_NATS"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// NATS returns the URL of the machine's NATS server after checking that it
// answers, or skips (fails under CI).
func NATS(t testing.TB) string {
	t.Helper()
	u := NATSURL()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("testenv: bad NATS URL %q: %v", u, err)
	}
	c, err := net.DialTimeout("tcp", p.Host, 2*time.Second)
	if err != nil {
		Unavailable(t, "NATS at %s: %v", p.Host, err)
	}
	_ = c.Close()
	return u
}

// Postgres creates a fresh, empty database for the calling test and returns
// its URL; the database is dropped when the test ends.
func Postgres(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, PostgresURL())
	if err != nil {
		Unavailable(t, "PostgreSQL at %s: %v", PostgresURL(), err)
	}
	defer admin.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "governor_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, PostgresURL())
		if err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
		}
	})
	u, _ := url.Parse(PostgresURL())
	u.Path = "/" + name
	return u.String()
}

// DatabaseName returns the database name of a Postgres URL.
func DatabaseName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}
