package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

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
