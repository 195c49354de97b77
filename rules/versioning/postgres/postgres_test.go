package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/pgrole"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/sdk/rules"
)

var (
	alice = versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob   = versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
)

func TestOpenRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		o    postgres.Options
		want error
	}{
		{"no URL", postgres.Options{}, versioning.ErrInvalid},
		{"bad URL", postgres.Options{URL: "postgres://%zz"}, versioning.ErrInvalid},
		{"nothing listening", postgres.Options{URL: "postgres://x@127.0.0.1:1/db?connect_timeout=2"}, versioning.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := postgres.Open(ctx, tt.o)
			require.Nil(t, s)
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// TestConcurrentOpen starts several processes' worth of stores on one new
// database at once: the migration lock lets all of them start.
func TestConcurrentOpen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgURL(t)
	var wg sync.WaitGroup
	stores := make([]versioning.Store, 3)
	errs := make([]error, 3)
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(ctx, postgres.Options{URL: url, MaxConns: 2}) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err)
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	_, err := stores[0].Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "a"}, Author: alice, Reason: "x"})
	require.NoError(t, err)
	v, err := stores[2].Get(ctx, "a", 1)
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, v.State)
}

// TestNotifyOnOutbox: a relay in another process LISTENs on OutboxChannel
// and is woken by the commit of an approval.
func TestNotifyOnOutbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := pgURL(t)
	s, err := postgres.Open(ctx, postgres.Options{URL: url})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "LISTEN "+postgres.OutboxChannel)
	require.NoError(t, err)

	v, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "notify"}, Author: alice, Reason: "x"})
	require.NoError(t, err)
	_, err = s.Approve(ctx, "notify", v.Number, bob, "")
	require.NoError(t, err)
	n, err := conn.WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, postgres.OutboxChannel, n.Channel)
	require.Equal(t, "notify", n.Payload)
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s, err := postgres.Open(ctx, postgres.Options{URL: pgURL(t), Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	dana := versioning.Actor{Name: "dana", Roles: []versioning.Role{versioning.RoleOperator, versioning.RoleApprover}}
	v, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "m"}, Author: dana, Reason: "x"})
	require.NoError(t, err)
	_, err = s.Approve(ctx, "m", v.Number, dana, "")
	require.ErrorIs(t, err, versioning.ErrSelfApproval)
	require.Equal(t, 1.0, testutil.ToFloat64(opCounter(t, reg, "propose", "ok")))
	require.Equal(t, 1.0, testutil.ToFloat64(opCounter(t, reg, "approve", "self_approval")))
	n, err := testutil.GatherAndCount(reg, "governor_versioning_operation_seconds")
	require.NoError(t, err)
	require.Positive(t, n)
}

// itemMarker has the shape of distribution.ItemMarker: the relay marks the
// row it claimed by its item whenever its Outbox has these methods.
type itemMarker interface {
	MarkOutboxItemDone(ctx context.Context, it versioning.OutboxItem) error
	MarkOutboxItemUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error)
}

// TestOpenedStoreMarksOutboxRowsByItem: the store Open returns marks a row
// by its item (the relay's check that a restore did not give its id to
// another row), measured as the marks by id are.
func TestOpenedStoreMarksOutboxRowsByItem(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s, err := postgres.Open(ctx, postgres.Options{URL: pgURL(t), Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	m, ok := s.(itemMarker)
	require.True(t, ok, "%T must mark outbox rows by item", s)
	for _, svc := range []string{"a", "b"} {
		v, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: svc}, Author: alice, Reason: "x"})
		require.NoError(t, err)
		_, err = s.Approve(ctx, svc, v.Number, bob, "")
		require.NoError(t, err)
	}
	items, err := s.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, items, 2)
	other := items[0]
	other.Version++
	require.ErrorIs(t, m.MarkOutboxItemDone(ctx, other), versioning.ErrNotFound)
	require.NoError(t, m.MarkOutboxItemDone(ctx, items[0]))
	_, _, err = m.MarkOutboxItemUndeliverable(ctx, other, versioning.OutboxFailure{Reason: "invalid", Error: "x", Relay: "r"})
	require.ErrorIs(t, err, versioning.ErrNotFound)
	_, recorded, err := m.MarkOutboxItemUndeliverable(ctx, items[1], versioning.OutboxFailure{Reason: "invalid", Error: "x", Relay: "r"})
	require.NoError(t, err)
	require.True(t, recorded)
	for _, op := range []string{"mark_outbox_done", "mark_outbox_undeliverable"} {
		require.Equal(t, 1.0, testutil.ToFloat64(opCounter(t, reg, op, "ok")), op)
		require.Equal(t, 1.0, testutil.ToFloat64(opCounter(t, reg, op, "not_found")), op)
	}
}

func opCounter(t *testing.T, reg *prometheus.Registry, op, result string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	for _, mf := range mfs {
		if mf.GetName() != "governor_versioning_operations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == op && labels["result"] == result {
				require.Equal(t, "postgres", labels["store"])
				c.Add(m.GetCounter().GetValue())
				return c
			}
		}
	}
	t.Fatalf("no series operation=%s result=%s", op, result)
	return nil
}

// pgURL gives the test a fresh database; -short skips integration tests.
func pgURL(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("PostgreSQL integration test: skipped with -short")
	}
	return testenv.Postgres(t)
}

// TestOpenNamesAMissingGrant: an application role set up before
// rule_outbox_failures existed (every other documented grant in place) is
// refused at Open with an error naming the role, the table, the privileges
// and the GRANT that adds them; once granted, Open succeeds.
func TestOpenNamesAMissingGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgURL(t)
	owner, err := postgres.Open(ctx, postgres.Options{URL: url}) // migrates
	require.NoError(t, err)
	require.NoError(t, owner.Close())
	admin, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	role, pool := pgrole.New(t, admin, url,
		`SELECT, INSERT, UPDATE ON rule_services, rule_versions, rule_approvals, rule_audit_head, rule_outbox`,
		`SELECT, INSERT ON rule_audit`,
		`SELECT ON rule_outbox_failures`)

	s, err := postgres.Open(ctx, postgres.Options{Pool: pool, SkipMigrations: true})
	require.Nil(t, s)
	require.ErrorIs(t, err, postgres.ErrMissingGrant)
	require.ErrorIs(t, err, versioning.ErrUnavailable)
	require.Contains(t, err.Error(), `role "`+role+`" lacks INSERT, UPDATE on rule_outbox_failures (GRANT INSERT, UPDATE ON rule_outbox_failures TO "`+role+`";)`)

	_, err = admin.Exec(ctx, `GRANT INSERT, UPDATE ON rule_outbox_failures TO `+role)
	require.NoError(t, err)
	s, err = postgres.Open(ctx, postgres.Options{Pool: pool, SkipMigrations: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
