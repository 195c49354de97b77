package sqlaudit_test

// Tests of the chain as the databases keep it: times of any zone and
// precision, and concurrent appends on both dialects.

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlaudit"
	"governor.dev/governor/rules/versioning/sqlite"
)

type chain struct {
	st versioning.Store
	db *sql.DB
	d  migrations.Dialect
}

func sqliteChain(t *testing.T) chain {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "g.db")
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return chain{st: st, db: db, d: migrations.SQLite}
}

func postgresChain(t *testing.T) chain {
	if testing.Short() {
		t.Skip("PostgreSQL integration test: skipped with -short")
	}
	url := testenv.Postgres(t)
	st, err := postgres.Open(context.Background(), postgres.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return chain{st: st, db: db, d: migrations.Postgres}
}

var chains = map[string]func(*testing.T) chain{"sqlite": sqliteChain, "postgres": postgresChain}

var ada = versioning.Actor{Name: "ada", Roles: []versioning.Role{versioning.RoleAdmin, versioning.RoleOperator}}

func (c chain) record(ctx context.Context, at time.Time, r versioning.AuditRecord) (versioning.AuditEntry, error) {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return versioning.AuditEntry{}, err
	}
	defer func() { _ = tx.Rollback() }()
	e, err := sqlaudit.Record(ctx, tx, c.d, at, r)
	if err != nil {
		return e, err
	}
	return e, tx.Commit()
}

// Times of any zone and precision are stored as the entry hashed them, so
// the chain verifies after the database has had them, and the entry read
// back is the one Record returned.
func TestRecordedTimesVerifyAfterTheRoundTrip(t *testing.T) {
	kolkata := time.FixedZone("IST", 5*3600+1800)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("EST", -5*3600)
	}
	times := []time.Time{
		time.Date(2026, 3, 2, 10, 0, 0, 999999999, kolkata),
		time.Date(2026, 3, 8, 2, 30, 0, 500, ny), // around a DST change
		time.Date(1969, 12, 31, 23, 59, 59, 999999500, time.UTC),
		time.Now(), // with a monotonic reading
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for name, open := range chains {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := open(t)
			var want []versioning.AuditEntry
			for i, at := range times {
				e, err := c.record(ctx, at, versioning.AuditRecord{Actor: ada, Action: "alert_config", Version: int64(i + 1),
					Detail: []byte(`{"b": "<&>", "a": [1, 2.50, "é\u00e9"]}`)})
				if err != nil {
					t.Fatalf("record at %v: %v", at, err)
				}
				if !e.At.Equal(at.Truncate(time.Microsecond)) || e.At.Location() != time.UTC {
					t.Fatalf("entry at %v, recorded at %v", e.At, at)
				}
				want = append(want, e)
			}
			rep, err := c.st.VerifyAudit(ctx)
			if err != nil || rep.Entries != int64(len(times)) || rep.Head != want[len(want)-1].Hash {
				t.Fatalf("verify: %+v, %v", rep, err)
			}
			got, err := c.st.Audit(ctx, versioning.AuditFilter{})
			if err != nil || len(got) != len(want) {
				t.Fatalf("audit: %d entries, %v", len(got), err)
			}
			for i := range got {
				g, w := got[i], want[i]
				if !g.At.Equal(w.At) || g.Hash != w.Hash || g.PrevHash != w.PrevHash || string(g.Detail) != string(w.Detail) ||
					fmt.Sprint(g.Roles) != fmt.Sprint(w.Roles) {
					t.Fatalf("entry %d read back as %+v, recorded as %+v", i+1, g, w)
				}
			}
		})
	}
}

// Appends from many transactions at once, through Record and the rule
// store's own RecordAudit, make one chain: none is lost, none forks.
func TestConcurrentRecordsDoNotForkTheChain(t *testing.T) {
	for name, open := range chains {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c := open(t)
			const writers, each = 6, 5
			var wg sync.WaitGroup
			errs := make(chan error, 2*writers*each)
			at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						r := versioning.AuditRecord{Actor: ada, Action: "alert_config", Version: int64(w*each + i + 1)}
						if _, err := c.record(ctx, at, r); err != nil {
							errs <- fmt.Errorf("record %d/%d: %w", w, i, err)
						}
					}
				})
				wg.Go(func() {
					for range each {
						if _, err := c.st.RecordAudit(ctx, versioning.AuditRecord{Actor: ada, Action: versioning.ActionLogin}); err != nil {
							errs <- fmt.Errorf("store: %w", err)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			rep, err := c.st.VerifyAudit(ctx)
			if err != nil || rep.Entries != 2*writers*each {
				t.Fatalf("verify: %+v, %v; want %d entries", rep, err, 2*writers*each)
			}
		})
	}
}

// Under repeatable read, an append that loses the race for the chain head
// fails (a serialization error for the caller to retry); the entries that
// committed still make one chain.
func TestRepeatableReadRecordsFailRatherThanFork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := postgresChain(t)
	const writers, each = 6, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				tx, err := c.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
				if err != nil {
					t.Error(err)
					return
				}
				_, err = sqlaudit.Record(ctx, tx, c.d, time.Now(), versioning.AuditRecord{Actor: ada, Action: "alert_config", Version: int64(w*each + i + 1)})
				if err == nil {
					err = tx.Commit()
				}
				_ = tx.Rollback()
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	rep, err := c.st.VerifyAudit(ctx)
	if err != nil || rep.Entries != int64(ok) || ok == 0 {
		t.Fatalf("verify: %+v, %v; %d appends committed", rep, err, ok)
	}
	t.Logf("%d of %d appends committed", ok, writers*each)
}
