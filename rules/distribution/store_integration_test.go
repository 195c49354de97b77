package distribution

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

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

// storeLocations maps each store rulesStores opened to its SQLite path or
// PostgreSQL URL, for reopen.
var storeLocations sync.Map

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
		storeLocations.Store(s, path)
		return s, "", openSQL(t, "sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)", migrations.SQLite)
	}},
	{"postgres", func(t *testing.T, clk clock.Clock) (versioning.Store, string, *sql.DB) {
		url := machinePostgres(t)
		s, err := postgres.Open(context.Background(), postgres.Options{URL: url, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		storeLocations.Store(s, url)
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

// TestRelayAfterTheRulesDatabaseWasResetListsTheConflictsAndRenumbers: a
// relay on a reset rules database (a fresh one on the same bucket) started
// while the bucket was still empty, so its first pass found nothing to
// renumber; then the old database publishes v1-v3. The reset database's v1
// and v2, overtaken in the bucket by a v3 it does not have, are not marked
// published (nothing reached the instances) but listed as conflicts, and
// the relay raises the store's numbering to the bucket's v3 (audited), so
// that a rollback, the documented recovery, is v4 and is published,
// superseding the records.
func TestRelayAfterTheRulesDatabaseWasResetListsTheConflictsAndRenumbers(t *testing.T) {
	url := embedded(t).URL()
	for _, st := range rulesStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Now())
			pub := newTestPublisher(t, url)
			was, _, _ := st.open(t, clk)
			store, _, _ := st.open(t, clk) // the reset database
			reg := prometheus.NewRegistry()
			relay, err := NewRelay(RelayOptions{Outbox: store, Publisher: pub, Clock: clk, Registerer: reg, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := relay.Pass(ctx); n != 0 || err != nil {
				t.Fatalf("first pass on an empty bucket: %d rows, %v", n, err)
			}

			first, err := NewRelay(RelayOptions{Outbox: was, Publisher: pub, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				approveVersion(t, was, "checkout", float64(10+i))
			}
			if _, err := first.Pass(ctx); err != nil {
				t.Fatal(err)
			}

			approveVersion(t, store, "checkout", 100)
			approveVersion(t, store, "checkout", 101)
			if _, err := relay.Pass(ctx); !errors.Is(err, ErrConflict) {
				t.Fatalf("pass = %v, want ErrConflict", err)
			}
			clk.Advance(31 * time.Second)
			if n, err := relay.Pass(ctx); n != 0 || err != nil {
				t.Fatalf("pass after the lease: %d rows, %v; want nothing claimed", n, err)
			}
			u, err := relay.Undeliverable(ctx, "checkout")
			if err != nil || len(u) != 2 {
				t.Fatalf("undeliverable %+v (%v), want v1 and v2", u, err)
			}
			for _, x := range u {
				if x.Reason != ReasonConflict || !strings.Contains(x.Error, "version 3") || !strings.Contains(x.Error, "does not have") {
					t.Fatalf("undeliverable %+v, want a conflict with the bucket's v3, which the store does not have", x)
				}
			}
			for v := int64(1); v <= 2; v++ {
				if got, err := store.Get(ctx, "checkout", v); err != nil || !got.PublishedAt.IsZero() {
					t.Fatalf("v%d published at %v (%v): nothing reached the instances", v, got.PublishedAt, err)
				}
			}
			if got := counterValue(t, reg, "governor_distribution_relay_rows_total", "outcome", "undeliverable"); got != 2 {
				t.Fatalf("undeliverable rows = %v, want 2", got)
			}
			es, err := store.Audit(ctx, versioning.AuditFilter{Service: "checkout", Action: versioning.ActionRenumber})
			if err != nil || len(es) != 1 || !strings.Contains(string(es[0].Detail), `"from":2`) || !strings.Contains(string(es[0].Detail), `"to":3`) {
				t.Fatalf("renumber audit entries %+v (%v), want one from 2 to 3", es, err)
			}
			if got := counterValue2(t, reg, "governor_distribution_relay_renumbered_total", nil); got != 1 {
				t.Fatalf("renumbered = %v, want 1", got)
			}

			// The recovery: roll back to the version wanted.
			r, err := store.Rollback(ctx, "checkout", 1, author, "restore after the database reset")
			if err != nil || r.Number != 4 {
				t.Fatalf("rollback v%d (%v), want v4 above the bucket's v3", r.Number, err)
			}
			if _, err := relay.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			if latest, err := pub.Latest(ctx, "checkout"); err != nil || latest.Version != 4 || latest.Checksum != r.Checksum {
				t.Fatalf("latest %+v (%v), want the reset database's v4", latest, err)
			}
			if u, err := relay.Undeliverable(ctx, ""); err != nil || len(u) != 0 {
				t.Fatalf("undeliverable %+v (%v) after v4, want none", u, err)
			}
			if _, err := store.VerifyAudit(ctx); err != nil {
				t.Fatalf("audit chain: %v", err)
			}
		})
	}
}

// TestRulesDatabaseRestoredFromABackupDeliversItsNextVersion: the fleet
// runs v5 when the rules database is restored from a backup holding v1-v3
// (a new database with those versions as they were). The plane started on
// it raises the store's numbering to the bucket's v5 at its relay's first
// pass, so the next version proposed and approved is v6, and the instance
// applies it: no conflict, nothing undeliverable, the audit chain intact.
func TestRulesDatabaseRestoredFromABackupDeliversItsNextVersion(t *testing.T) {
	url := embedded(t).URL()
	for _, st := range rulesStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			names := uniqueNames(t)
			t.Cleanup(func() {
				js, _ := jetstream.New(connect(t, url))
				_ = js.DeleteKeyValue(context.Background(), names.Bucket())
			})
			// run starts a control plane on store and returns it with its stop.
			run := func(store versioning.Store, db *sql.DB) (*Plane, func()) {
				rctx, cancel := context.WithCancel(ctx)
				cp, err := NewPlane(rctx, PlaneOptions{Conn: connect(t, url), Names: names, Outbox: store,
					Store: NewSQLStore(db), Sweep: 100 * time.Millisecond, Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); _ = cp.Run(rctx) }()
				stop := func() { cancel(); wg.Wait() }
				t.Cleanup(stop)
				return cp, stop
			}

			was, _, wasDB := st.open(t, nil)
			_, stop := run(was, wasDB)
			pod := startSDK(t, url, names, "checkout", sdkOpts{instance: "pod-0"})
			var published []versioning.Version
			for i := range 5 {
				v := approveVersion(t, was, "checkout", float64(10+i))
				published = append(published, v)
				eventually(t, fmt.Sprintf("v%d applied", v.Number), func() bool { return pod.app.last() == v.Number })
			}
			stop()

			// The backup was taken after v3 was published: a new database
			// holding v1-v3 as they were.
			store, _, db := st.open(t, nil)
			for i, want := range published[:3] {
				v := approveVersion(t, store, "checkout", float64(10+i))
				if v.Number != want.Number || v.Checksum != want.Checksum {
					t.Fatalf("restored v%d %s, want v%d %s", v.Number, v.Checksum, want.Number, want.Checksum)
				}
			}
			items, err := store.ClaimOutbox(ctx, 10, time.Minute)
			if err != nil || len(items) != 3 {
				t.Fatalf("restored outbox %+v, %v", items, err)
			}
			for _, it := range items {
				if err := store.MarkOutboxDone(ctx, it.ID); err != nil {
					t.Fatal(err)
				}
			}

			cp, _ := run(store, db)
			eventually(t, "the store's numbering raised to the bucket's v5", func() bool {
				es, err := store.Audit(ctx, versioning.AuditFilter{Service: "checkout", Action: versioning.ActionRenumber})
				return err == nil && len(es) == 1
			})
			next := approveVersion(t, store, "checkout", 99)
			if next.Number != 6 {
				t.Fatalf("next version v%d, want v6 (above the fleet's v5)", next.Number)
			}
			eventually(t, "v6 applied by the instance", func() bool { return pod.app.last() == 6 })
			if latest, err := cp.Publisher().Latest(ctx, "checkout"); err != nil || latest.Version != 6 || latest.Checksum != next.Checksum {
				t.Fatalf("bucket holds %+v (%v), want the restored store's v6", latest, err)
			}
			if u, err := cp.Undeliverable(ctx, ""); err != nil || len(u) != 0 {
				t.Fatalf("undeliverable %+v (%v), want none", u, err)
			}
			eventually(t, "v6 published in the store", func() bool {
				v, err := store.Get(ctx, "checkout", 6)
				return err == nil && v.State == versioning.StatePublished
			})
			if _, err := store.VerifyAudit(ctx); err != nil {
				t.Fatalf("audit chain: %v", err)
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
// server (max_payload 64 KiB) cannot take is recorded as undeliverable once,
// in the store: it stays approved, is not claimed again after the lease,
// and a restarted relay (a new Relay on a reopened store) still lists it
// without recording it again. Once a newer version is published the
// failure is superseded: no longer listed, kept as history, and the store
// keeps the big version superseded, never published. The audit chain
// verifies, with one undeliverable entry.
func TestUndeliverableVersionOnTheRulesStore(t *testing.T) {
	srv, maxPayload := smallServer(t)
	for _, st := range rulesStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Now())
			store, _, _ := st.open(t, clk)
			pub := newTestPublisher(t, srv.URL())
			var hooked int
			reg := prometheus.NewRegistry()
			relay, err := NewRelay(RelayOptions{Outbox: store, Publisher: pub, Clock: clk, Name: "relay-a", Registerer: reg,
				OnUndeliverable: func(context.Context, Undeliverable) { hooked++ }})
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
			check := func(r *Relay, when string) {
				t.Helper()
				u, err := r.Undeliverable(ctx, "checkout")
				if err != nil || len(u) != 1 || u[0].Version != p.Number || u[0].Limit != maxPayload-KVHeaderRoom ||
					u[0].Reason != ReasonTooLarge || u[0].Relay != "relay-a" || !strings.Contains(u[0].Error, "max_payload") {
					t.Fatalf("%s: undeliverable %+v, %v", when, u, err)
				}
			}
			check(relay, "after the first pass")
			if v := gaugeValue(t, reg, "governor_distribution_relay_undeliverable_rows"); v != 1 {
				t.Fatalf("undeliverable_rows = %v, want 1", v)
			}
			clk.Advance(31 * time.Second)
			if n, err := relay.Pass(ctx); n != 0 || err != nil {
				t.Fatalf("pass after the lease: %d rows, %v; want nothing claimed", n, err)
			}
			if v, err := store.Get(ctx, "checkout", p.Number); err != nil || v.State != versioning.StateApproved {
				t.Fatalf("the big version is %v (%v); it must stay approved, not published", v.State, err)
			}

			// A restart: a new relay, on a second store handle for the same
			// database, lists it without recording it again.
			reopened := reopen(t, st.name, store, clk)
			reg2 := prometheus.NewRegistry()
			restarted, err := NewRelay(RelayOptions{Outbox: reopened, Publisher: pub, Clock: clk, Name: "relay-b", Registerer: reg2,
				OnUndeliverable: func(context.Context, Undeliverable) { hooked++ }})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(31 * time.Second)
			if n, err := restarted.Pass(ctx); n != 0 || err != nil {
				t.Fatalf("restarted relay's pass: %d rows, %v; want nothing claimed", n, err)
			}
			check(restarted, "after the restart")
			if v := gaugeValue(t, reg2, "governor_distribution_relay_undeliverable_rows"); v != 1 {
				t.Fatalf("restarted relay's undeliverable_rows = %v, want 1 (from the store)", v)
			}
			if hooked != 1 {
				t.Fatalf("OnUndeliverable called %d times, want once", hooked)
			}

			small := approveVersion(t, reopened, "checkout", 10)
			if _, err := restarted.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			if latest, err := pub.Latest(ctx, "checkout"); err != nil || latest.Version != small.Number {
				t.Fatalf("latest %v, %v; want v%d", latest, err, small.Number)
			}
			if u, err := restarted.Undeliverable(ctx, ""); err != nil || len(u) != 0 {
				t.Fatalf("undeliverable %+v, %v after a newer version", u, err)
			}
			if v := gaugeValue(t, reg2, "governor_distribution_relay_undeliverable_rows"); v != 0 {
				t.Fatalf("undeliverable_rows = %v, want 0", v)
			}
			hist, err := store.OutboxFailures(ctx, versioning.FailureFilter{Service: "checkout", History: true})
			if err != nil || len(hist) != 1 || hist[0].SupersededBy != small.Number || hist[0].Version != p.Number {
				t.Fatalf("history %+v, %v; want v%d superseded by v%d", hist, err, p.Number, small.Number)
			}
			clk.Advance(31 * time.Second)
			if items, err := store.ClaimOutbox(ctx, 10, time.Second); err != nil || len(items) != 0 {
				t.Fatalf("rows still pending: %+v, %v", items, err)
			}
			v, err := store.Get(ctx, "checkout", p.Number)
			if err != nil || v.State != versioning.StateSuperseded || !v.PublishedAt.IsZero() {
				t.Fatalf("the big version is %v published at %v (%v), want superseded, never published", v.State, v.PublishedAt, err)
			}
			if h := history(t, pub, "checkout"); len(h) != 1 {
				t.Fatalf("%d writes, want only the small version", len(h))
			}
			entries, err := store.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionUndeliverable})
			if err != nil || len(entries) != 1 || entries[0].Version != p.Number {
				t.Fatalf("undeliverable audit entries %+v, %v; want one", entries, err)
			}
			if _, err := store.VerifyAudit(ctx); err != nil {
				t.Fatalf("audit chain: %v", err)
			}
		})
	}
}

// reopen opens a second store on the database of s (the same file or
// PostgreSQL database), as a restarted process would.
func reopen(t *testing.T, name string, s versioning.Store, clk clock.Clock) versioning.Store {
	t.Helper()
	var (
		out versioning.Store
		err error
	)
	at, ok := storeLocations.Load(s)
	if !ok {
		t.Fatal("reopen: the store was not opened by rulesStores")
	}
	switch name {
	case "sqlite":
		out, err = sqlite.Open(context.Background(), sqlite.Options{Path: at.(string), Clock: clk})
	case "postgres":
		out, err = postgres.Open(context.Background(), postgres.Options{URL: at.(string), Clock: clk})
	default:
		t.Fatalf("unknown store %q", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	return out
}

// restorableStore is a rules store that can be swapped for another, as a
// rules database restored from a backup under a running relay.
type restorableStore struct {
	versioning.Store
	now atomic.Pointer[versioning.Store]
}

func newRestorable(s versioning.Store) *restorableStore {
	r := &restorableStore{}
	r.now.Store(&s)
	return r
}
func (r *restorableStore) cur() versioning.Store      { return *r.now.Load() }
func (r *restorableStore) restore(s versioning.Store) { r.now.Store(&s) }
func (r *restorableStore) ClaimOutbox(ctx context.Context, n int, lease time.Duration) ([]versioning.OutboxItem, error) {
	return r.cur().ClaimOutbox(ctx, n, lease)
}
func (r *restorableStore) MarkOutboxDone(ctx context.Context, id int64) error {
	return r.cur().MarkOutboxDone(ctx, id)
}
func (r *restorableStore) MarkOutboxUndeliverable(ctx context.Context, id int64, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	return r.cur().MarkOutboxUndeliverable(ctx, id, f)
}
func (r *restorableStore) OutboxFailures(ctx context.Context, f versioning.FailureFilter) ([]versioning.OutboxFailure, error) {
	return r.cur().OutboxFailures(ctx, f)
}
func (r *restorableStore) CountOutboxFailures(ctx context.Context, f versioning.FailureFilter) (int, error) {
	return r.cur().CountOutboxFailures(ctx, f)
}
func (r *restorableStore) RequeueOutbox(ctx context.Context, id int64, relay string) (bool, error) {
	return r.cur().RequeueOutbox(ctx, id, relay)
}
func (r *restorableStore) OutboxReady() <-chan struct{} { return r.cur().OutboxReady() }
func (r *restorableStore) Get(ctx context.Context, service string, n int64) (versioning.Version, error) {
	return r.cur().Get(ctx, service, n)
}

// TestRelayOnARestoredRulesStoreDoesNotMarkAnotherRowDone: on the SQL
// stores (which mark by id), a relay holds row 1 (checkout v1) when the
// rules database is restored from a backup without checkout, whose row 1
// is billing v1, claimed by another relay. The relay checks that the store
// still has checkout v1 before marking, and leaves billing v1 unpublished.
func TestRelayOnARestoredRulesStoreDoesNotMarkAnotherRowDone(t *testing.T) {
	url := embedded(t).URL()
	for _, st := range rulesStores {
		for _, byItem := range []bool{true, false} {
			name := st.name + "/by-item"
			if !byItem {
				name = st.name + "/checked-by-id"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				was, _, _ := st.open(t, nil)
				var store interface {
					versioning.Store
					restore(versioning.Store)
				} = newRestorable(was)
				if byItem {
					// The SQL stores mark by item (ItemMarker) in one step.
					store = &restorableItemStore{store.(*restorableStore)}
				}
				fail := &atomic.Bool{}
				fail.Store(true)
				pub := newTestPublisher(t, url)
				relay, err := NewRelay(RelayOptions{Outbox: store, Publisher: pub, Logger: testLogger(t), Stage: failingStage(fail)})
				if err != nil {
					t.Fatal(err)
				}
				approveVersion(t, was, "checkout", 10)
				if _, err := relay.Pass(ctx); err == nil {
					t.Fatal("pass = nil, want the staging error")
				}
				// Restored from a backup without checkout: its row 1 is billing
				// v1, claimed by another relay.
				restored, _, _ := st.open(t, nil)
				approveVersion(t, restored, "billing", 10)
				items, err := restored.ClaimOutbox(ctx, 10, time.Minute)
				if err != nil || len(items) != 1 || items[0].ID != 1 {
					t.Fatalf("restored claim %+v, %v", items, err)
				}
				store.restore(restored)
				fail.Store(false)
				_, _ = relay.Pass(ctx)
				v, err := restored.Get(ctx, "billing", 1)
				if err != nil || v.State == versioning.StatePublished {
					t.Fatalf("billing v1 %s (%v): marked published by the relay that published checkout v1", v.State, err)
				}
				if err := restored.MarkOutboxDone(ctx, 1); err != nil && !errors.Is(err, versioning.ErrNotFound) {
					t.Fatal(err)
				}
			})
		}
	}
}

// restorableItemStore is a restorableStore that passes ItemMarker through,
// as the SQL stores have it.
type restorableItemStore struct{ *restorableStore }

func (r *restorableItemStore) MarkOutboxItemDone(ctx context.Context, it versioning.OutboxItem) error {
	return r.cur().(ItemMarker).MarkOutboxItemDone(ctx, it)
}

func (r *restorableItemStore) MarkOutboxItemUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	return r.cur().(ItemMarker).MarkOutboxItemUndeliverable(ctx, it, f)
}

// countingNumbering counts the RaiseNumbering calls (each a write
// transaction of the store).
type countingNumbering struct {
	*restorableStore
	raises atomic.Int64
}

func (c *countingNumbering) RaiseNumbering(ctx context.Context, service string, floor int64, by versioning.Actor, reason string) (int64, bool, error) {
	c.raises.Add(1)
	return c.cur().(versioning.Numbering).RaiseNumbering(ctx, service, floor, by, reason)
}
func (c *countingNumbering) Services(ctx context.Context) ([]versioning.ServiceInfo, error) {
	return c.cur().Services(ctx)
}

// TestRelayStartUpWithNothingToRaiseOpensNoWriteTransaction: a relay
// starting next to a bucket whose versions the store has (every ordinary
// start) reads the store's services once instead of opening a numbering
// transaction per service.
func TestRelayStartUpWithNothingToRaiseOpensNoWriteTransaction(t *testing.T) {
	url := embedded(t).URL()
	for _, st := range rulesStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			s, _, _ := st.open(t, nil)
			pub := newTestPublisher(t, url)
			for _, svc := range []string{"checkout", "billing", "search"} {
				approveVersion(t, s, svc, 10)
				approveVersion(t, s, svc, 11)
			}
			first, err := NewRelay(RelayOptions{Outbox: s, Publisher: pub, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := first.Pass(ctx); err != nil || n != 6 {
				t.Fatalf("first relay pass %d, %v", n, err)
			}
			store := &countingNumbering{restorableStore: newRestorable(s)}
			second, err := NewRelay(RelayOptions{Outbox: store, Publisher: pub, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := second.Pass(ctx); err != nil {
				t.Fatal(err)
			}
			if n := store.raises.Load(); n != 0 {
				t.Fatalf("%d numbering write transactions at a start-up with nothing to raise, want 0", n)
			}
		})
	}
}
