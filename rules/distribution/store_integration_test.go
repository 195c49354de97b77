package distribution

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

var (
	author   = versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	approver = versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
)

// rulesStores opens the real rules stores.
var rulesStores = []struct {
	name string
	// open returns the store, the Postgres URL ("" for SQLite) and a
	// database/sql handle on the same database for the ledger.
	open func(t *testing.T, clk clock.Clock) (versioning.Store, string, *sql.DB)
}{
	{"sqlite", func(t *testing.T, clk clock.Clock) (versioning.Store, string, *sql.DB) {
		path := filepath.Join(t.TempDir(), "rules.db")
		s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, "", openSQL(t, "sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)", migrations.SQLite)
	}},
	{"postgres", func(t *testing.T, clk clock.Clock) (versioning.Store, string, *sql.DB) {
		url := machinePostgres(t)
		s, err := postgres.Open(context.Background(), postgres.Options{URL: url, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, url, openSQL(t, "pgx", url, migrations.Postgres)
	}},
}

// approveVersion proposes and approves a ruleset with the given rate.
func approveVersion(t *testing.T, s versioning.Store, service string, rate float64) versioning.Version {
	t.Helper()
	ctx := context.Background()
	p, err := s.Propose(ctx, versioning.Proposal{Rebase: true, Author: author, Reason: "test",
		Ruleset: &rules.Ruleset{Service: service, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}}}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Approve(ctx, service, p.Number, approver, "ok")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRelayOnTheRulesStore(t *testing.T) {
	url := embedded(t).URL()
	for _, st := range rulesStores {
		t.Run(st.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			store, pgURL, db := st.open(t, nil)
			var wake <-chan struct{}
			if pgURL != "" {
				wake = ListenPostgres(ctx, ListenOptions{URL: pgURL})
			}
			// The whole control plane on the rules database: outbox from the
			// store, ledger in its delivery tables.
			names := uniqueNames(t)
			cp, err := NewPlane(ctx, PlaneOptions{Conn: connect(t, url), Names: names, Outbox: store,
				Store: NewSQLStore(db), Wake: wake, Sweep: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			wg.Add(1)
			go func() { defer wg.Done(); _ = cp.Run(ctx) }()
			t.Cleanup(func() {
				js, _ := jetstream.New(connect(t, url))
				_ = js.DeleteKeyValue(context.Background(), names.Bucket())
			})

			s := startSDK(t, url, names, "checkout", sdkOpts{instance: "pod-0"})
			for i := range 3 {
				v := approveVersion(t, store, "checkout", float64(10+i))
				eventually(t, fmt.Sprintf("v%d applied", v.Number), func() bool { return s.app.last() == v.Number })
			}
			eventually(t, "SYNCED on v3 in the ledger tables", func() bool {
				ins, err := NewSQLStore(db).Instances(ctx, "checkout")
				return err == nil && len(ins) == 1 && ins[0].State == StateSynced && ins[0].AckVersion == 3
			})
			hist, err := NewSQLStore(db).Transitions(ctx, "checkout", "pod-0", 0)
			if err != nil || len(hist) == 0 || hist[0].To != StateSynced {
				t.Fatalf("history %+v, %v", hist, err)
			}
			eventually(t, "v3 marked published", func() bool {
				v, err := store.Get(ctx, "checkout", 3)
				return err == nil && v.State == versioning.StatePublished
			})
		})
	}
}

func TestKilledRelayOnTheRulesStorePublishesExactlyOnce(t *testing.T) {
	url := embedded(t).URL()
	for _, st := range rulesStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Now())
			store, _, _ := st.open(t, clk)
			pub := newTestPublisher(t, url)
			approveVersion(t, store, "checkout", 10)
			// The first relay claims the committed row and dies before publishing.
			if items, err := store.ClaimOutbox(ctx, 10, 30*time.Second); err != nil || len(items) != 1 {
				t.Fatalf("claim: %v %v", items, err)
			}
			next, err := NewRelay(RelayOptions{Outbox: store, Publisher: pub, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := next.Pass(ctx); n != 0 || err != nil {
				t.Fatalf("pass during the lease: %d rows, %v", n, err)
			}
			clk.Advance(31 * time.Second)
			if n, err := next.Pass(ctx); n != 1 || err != nil {
				t.Fatalf("pass after the lease: %d rows, %v", n, err)
			}
			if n, err := next.Pass(ctx); n != 0 || err != nil {
				t.Fatalf("later pass: %d rows, %v", n, err)
			}
			if h := history(t, pub, "checkout"); len(h) != 1 {
				t.Fatalf("written %d times, want once", len(h))
			}
		})
	}
}

func TestListenPostgresWakesOnNotify(t *testing.T) {
	url := machinePostgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := ListenPostgres(ctx, ListenOptions{URL: url, Channel: "governor_outbox_test"})
	waitWake(t, wake, "the wake-up after connecting")
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_notify('governor_outbox_test', 'checkout')"); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake, "the wake-up on NOTIFY")
}

func waitWake(t *testing.T, wake <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// TestUndeliverableVersionOnTheRulesStore: on the real stores, a version the
// server (max_payload 64 KiB) cannot take stays pending and approved, is not
// retried, and once a newer version is published its row is done and the
// store keeps it superseded, never published.
func TestUndeliverableVersionOnTheRulesStore(t *testing.T) {
	srv, maxPayload := smallServer(t)
	for _, st := range rulesStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Now())
			store, _, _ := st.open(t, clk)
			pub := newTestPublisher(t, srv.URL())
			relay, err := NewRelay(RelayOptions{Outbox: store, Publisher: pub, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			big, _ := sizedEnvelope(t, "checkout", 1, maxPayload)
			p, err := store.Propose(ctx, versioning.Proposal{Rebase: true, Author: author, Reason: "big", Ruleset: big.Ruleset})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Approve(ctx, "checkout", p.Number, approver, "ok"); err != nil {
				t.Fatal(err)
			}
			if _, err := relay.Pass(ctx); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("pass = %v, want ErrTooLarge", err)
			}
			if u := relay.Undeliverable(); len(u) != 1 || u[0].Version != p.Number || u[0].Limit != maxPayload-KVHeaderRoom {
				t.Fatalf("undeliverable %+v", u)
			}
			clk.Advance(31 * time.Second)
			if n, err := relay.Pass(ctx); n != 1 || err != nil {
				t.Fatalf("pass after the lease: %d rows, %v; want the row claimed and skipped", n, err)
			}
			if v, err := store.Get(ctx, "checkout", p.Number); err != nil || v.State == versioning.StatePublished {
				t.Fatalf("the big version is %v (%v); it must not be published", v.State, err)
			}

			small := approveVersion(t, store, "checkout", 10)
			if _, err := relay.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			if latest, err := pub.Latest(ctx, "checkout"); err != nil || latest.Version != small.Number {
				t.Fatalf("latest %v, %v; want v%d", latest, err, small.Number)
			}
			if u := relay.Undeliverable(); len(u) != 0 {
				t.Fatalf("undeliverable %+v after a newer version", u)
			}
			clk.Advance(31 * time.Second)
			if items, err := store.ClaimOutbox(ctx, 10, time.Second); err != nil || len(items) != 0 {
				t.Fatalf("rows still pending: %+v, %v", items, err)
			}
			v, err := store.Get(ctx, "checkout", p.Number)
			if err != nil || v.State != versioning.StateSuperseded {
				t.Fatalf("the big version is %v (%v), want superseded", v.State, err)
			}
			if h := history(t, pub, "checkout"); len(h) != 1 {
				t.Fatalf("%d writes, want only the small version", len(h))
			}
		})
	}
}
