package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/rules"
)

var (
	alice = versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob   = versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
)

func TestOpenRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	_, err := sqlite.Open(ctx, sqlite.Options{})
	require.ErrorIs(t, err, versioning.ErrInvalid)
	_, err = sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "missing", "dir", "x.db")})
	require.ErrorIs(t, err, versioning.ErrUnavailable)
}

func TestInMemory(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	v, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "mem"}, Author: alice, Reason: "x"})
	require.NoError(t, err)
	_, err = s.Approve(ctx, "mem", v.Number, bob, "")
	require.NoError(t, err)
	a, err := s.Active(ctx, "mem")
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Number)
}

// TestReopenKeepsHistory: the file is the system of record across restarts.
func TestReopenKeepsHistory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rules.db")
	s, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	require.NoError(t, err)
	v, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "keep"}, Author: alice, Reason: "x"})
	require.NoError(t, err)
	_, err = s.Approve(ctx, "keep", v.Number, bob, "")
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = sqlite.Open(ctx, sqlite.Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	a, err := s.Active(ctx, "keep")
	require.NoError(t, err)
	require.Equal(t, v.Checksum, a.Checksum)
	rep, err := s.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), rep.Entries)
	// What was approved before the restart is still waiting for the relay.
	items, err := s.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, v.Number, items[0].Version)
}

// TestConcurrentOpen opens one new file from several stores at once, as
// processes starting together would.
func TestConcurrentOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rules.db")
	var wg sync.WaitGroup
	stores := make([]versioning.Store, 3)
	errs := make([]error, 3)
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = sqlite.Open(ctx, sqlite.Options{Path: path}) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err)
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	// Two stores on one file write without losing numbers.
	var wg2 sync.WaitGroup
	for i := range 20 {
		wg2.Go(func() {
			_, err := stores[i%3].Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "shared"}, Author: alice, Reason: "x"})
			require.NoError(t, err)
		})
	}
	wg2.Wait()
	l, err := stores[0].List(ctx, versioning.ListFilter{Service: "shared", Limit: 100})
	require.NoError(t, err)
	require.Len(t, l, 20)
	require.Equal(t, int64(20), l[0].Number)
}

// itemMarker has the shape of distribution.ItemMarker: the relay marks the
// row it claimed by its item whenever its Outbox has these methods.
type itemMarker interface {
	MarkOutboxItemDone(ctx context.Context, it versioning.OutboxItem) error
	MarkOutboxItemUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error)
}

// TestOpenedStoreMarksOutboxRowsByItem: the store Open returns marks a row
// by its item (the relay's check that a restore did not give its id to
// another row), measured as the mark by id is.
func TestOpenedStoreMarksOutboxRowsByItem(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	m, ok := s.(itemMarker)
	require.True(t, ok, "%T must mark outbox rows by item", s)
	v, err := s.Propose(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "mem"}, Author: alice, Reason: "x"})
	require.NoError(t, err)
	_, err = s.Approve(ctx, "mem", v.Number, bob, "")
	require.NoError(t, err)
	items, err := s.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, items, 1)
	other := items[0]
	other.Checksum = "sha256:0"
	require.ErrorIs(t, m.MarkOutboxItemDone(ctx, other), versioning.ErrNotFound)
	require.NoError(t, m.MarkOutboxItemDone(ctx, items[0]))
	require.Equal(t, 1.0, opCount(t, reg, "mark_outbox_done", "ok"))
	require.Equal(t, 1.0, opCount(t, reg, "mark_outbox_done", "not_found"))
}

// opCount is the value of governor_versioning_operations_total for op and
// result.
func opCount(t *testing.T, reg *prometheus.Registry, op, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
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
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series operation=%s result=%s", op, result)
	return 0
}
