package distribution

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
)

// benchStores open a migrated rules store plus a database/sql handle on the
// same database, for seeding.
var benchStores = []struct {
	name string
	open func(b *testing.B) (versioning.Store, *sql.DB)
}{
	{"sqlite", func(b *testing.B) (versioning.Store, *sql.DB) {
		path := filepath.Join(b.TempDir(), "rules.db")
		s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s, benchSQL(b, "sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	}},
	{"postgres", func(b *testing.B) (versioning.Store, *sql.DB) {
		url := machinePostgres(b)
		s, err := postgres.Open(context.Background(), postgres.Options{URL: url})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s, benchSQL(b, "pgx", url)
	}},
}

func benchSQL(b *testing.B, driver, dsn string) *sql.DB {
	b.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// seedUndeliverable writes n services, each with a live version whose
// outbox row is recorded as undeliverable (too large for any server), in
// SQL: what n relays' give-ups would have left.
func seedUndeliverable(b *testing.B, db *sql.DB, n int) {
	b.Helper()
	const series = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) `
	for _, q := range []string{
		series + `INSERT INTO rule_services (name, last_number, active_number, created_at)
			SELECT 'svc-' || i, 1, 1, CURRENT_TIMESTAMP FROM n`,
		series + `INSERT INTO rule_versions (service, number, state, content, checksum, author, source, reason, created_at, activated_at)
			SELECT 'svc-' || i, 1, 'approved', '{"service":"svc-' || i || '"}', 'sha256:seed', 'seed', 'user', 'seed',
				CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM n`,
		series + `INSERT INTO rule_outbox (service, version, kind, checksum, payload, created_at, attempts, failed_at)
			SELECT 'svc-' || i, 1, 'approved', 'sha256:seed', '{}', CURRENT_TIMESTAMP, 1, CURRENT_TIMESTAMP FROM n`,
	} {
		if _, err := db.Exec(q, n); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := db.Exec(`INSERT INTO rule_outbox_failures (outbox_id, service, version, reason, error, size, max_size, relay, failed_at)
		SELECT id, service, version, 'too_large', 'seeded: larger than any server', 1073741824, 1048576, 'seed', CURRENT_TIMESTAMP
		FROM rule_outbox`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRelayPassUndeliverable is a relay pass over a rules store that
// records 1,000 undeliverable rows, none of which fits the server, and no
// row to publish: "steady" is a running relay's pass (it sets the
// undeliverable gauge), "first" a new relay's first pass, which also looks
// for rows the server now accepts.
func BenchmarkRelayPassUndeliverable(b *testing.B) {
	const failures = 1000
	srv := embedded(b)
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			ctx := context.Background()
			store, db := st.open(b)
			seedUndeliverable(b, db, failures)
			pub := newTestPublisher(b, srv.URL())
			newRelay := func(b *testing.B) (*Relay, *prometheus.Registry) {
				reg := prometheus.NewRegistry()
				r, err := NewRelay(RelayOptions{Outbox: store, Publisher: pub, Name: "bench", Registerer: reg})
				if err != nil {
					b.Fatal(err)
				}
				return r, reg
			}
			pass := func(b *testing.B, r *Relay) {
				if n, err := r.Pass(ctx); n != 0 || err != nil {
					b.Fatalf("pass: %d rows claimed, %v; want none", n, err)
				}
			}
			b.Run("steady", func(b *testing.B) {
				r, reg := newRelay(b)
				pass(b, r)
				b.ReportAllocs()
				for b.Loop() {
					pass(b, r)
				}
				b.StopTimer()
				if v := gaugeValue(b, reg, "governor_distribution_relay_undeliverable_rows"); v != failures {
					b.Fatalf("undeliverable_rows = %v, want %d", v, failures)
				}
			})
			b.Run("first", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					r, _ := newRelay(b)
					b.StartTimer()
					pass(b, r)
				}
			})
		})
	}
}
