package distribution

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"governor.dev/governor/internal/testenv"
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
	open func(t *testing.T, clk clock.Clock) (versioning.Store, string)
}{
	{"sqlite", func(t *testing.T, clk clock.Clock) (versioning.Store, string) {
		s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "rules.db"), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, ""
	}},
	{"postgres", func(t *testing.T, clk clock.Clock) (versioning.Store, string) {
		url := testenv.Postgres(t)
		s, err := postgres.Open(context.Background(), postgres.Options{URL: url, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, url
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
			store, pgURL := st.open(t, nil)
			p := newPlane(t, url)
			var wake <-chan struct{}
			if pgURL != "" {
				wake = ListenPostgres(ctx, ListenOptions{URL: pgURL})
			}
			relay, err := NewRelay(RelayOptions{Outbox: store, Publisher: p.pub, Wake: wake, OnPublished: p.ledger.Published, Sweep: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			wg.Add(1)
			go func() { defer wg.Done(); _ = relay.Run(ctx) }()

			s := startSDK(t, url, p.names, "checkout", sdkOpts{instance: "pod-0"})
			for i := range 3 {
				v := approveVersion(t, store, "checkout", float64(10+i))
				eventually(t, fmt.Sprintf("v%d applied", v.Number), func() bool { return s.app.last() == v.Number })
			}
			eventually(t, "SYNCED on v3", func() bool {
				in := instanceOf(t, p, "checkout", "pod-0")
				return in.State == StateSynced && in.AckVersion == 3
			})
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
			store, _ := st.open(t, clk)
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
	url := testenv.Postgres(t)
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
