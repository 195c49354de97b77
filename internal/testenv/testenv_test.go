package testenv

import (
	"context"
	"fmt"
	"net"
	"runtime"
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

// outcome records how a helper ended a test: Fatalf or Skipf stop the
// helper's goroutine, as they stop a real test's.
type outcome struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (o *outcome) Helper() {}

func (o *outcome) Fatalf(format string, args ...any) {
	o.failed, o.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Skipf(format string, args ...any) {
	o.skipped, o.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Cleanup(func()) {}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestMissingServiceFailsInCI: with the service down, a helper skips the
// test locally and fails it with CI=true, so an integration suite never
// passes in CI by skipping; either way the message names the service.
func TestMissingServiceFailsInCI(t *testing.T) {
	addr := deadAddr(t)
	t.Setenv("GOVERNOR_TEST_NATS", "nats://"+addr)
	t.Setenv("GOVERNOR_TEST_POSTGRES", "postgres://postgres@"+addr+"/postgres?sslmode=disable&connect_timeout=5")
	helpers := map[string]func(testing.TB){
		"NATS":       func(tb testing.TB) { NATS(tb) },
		"PostgreSQL": func(tb testing.TB) { Postgres(tb) },
	}
	for name, helper := range helpers {
		for _, ci := range []string{"true", ""} {
			t.Run(name+" CI="+ci, func(t *testing.T) {
				t.Setenv("CI", ci)
				o := &outcome{TB: t}
				done := make(chan struct{})
				go func() {
					defer close(done)
					helper(o)
				}()
				<-done
				if ci == "true" && (!o.failed || o.skipped) {
					t.Fatalf("CI=true: failed %v, skipped %v (%s); want a failure", o.failed, o.skipped, o.msg)
				}
				if ci == "" && (!o.skipped || o.failed) {
					t.Fatalf("outside CI: failed %v, skipped %v (%s); want a skip", o.failed, o.skipped, o.msg)
				}
				if !strings.Contains(o.msg, name) || !strings.Contains(o.msg, addr) {
					t.Fatalf("message %q does not name %s at %s", o.msg, name, addr)
				}
			})
		}
	}
}
