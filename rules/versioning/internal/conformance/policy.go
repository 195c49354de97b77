package conformance

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// testPolicyCompareAndSet: two admins' read-modify-writes of one policy do
// not revert each other: the second, based on a revision that is no longer
// current, is refused and writes nothing. Revision 0 sets unconditionally.
func testPolicyCompareAndSet(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	ops := versioning.Actor{Name: "ops", Roles: []versioning.Role{versioning.RoleAdmin}}

	pol, err := s.Policy(ctx, "pay")
	require.NoError(t, err)
	require.Zero(t, pol.Revision, "never set")
	_, err = s.SetPolicy(ctx, versioning.Policy{Service: "pay", Revision: 1}, root)
	require.ErrorIs(t, err, versioning.ErrConflict, "revision 1 of a policy never set")
	require.ErrorContains(t, err, "never set")

	pol, err = s.SetPolicy(ctx, versioning.Policy{Service: "pay"}, root)
	require.NoError(t, err)
	require.Equal(t, int64(1), pol.Revision)

	a, err := s.Policy(ctx, "pay")
	require.NoError(t, err)
	b, err := s.Policy(ctx, "pay")
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Revision)
	a.ApprovalsRequired = 2
	a, err = s.SetPolicy(ctx, a, root)
	require.NoError(t, err)
	require.Equal(t, int64(2), a.Revision)

	before := auditCount(t, h)
	b.ManualOnly = true
	_, err = s.SetPolicy(ctx, b, ops)
	require.ErrorIs(t, err, versioning.ErrConflict, "ops' change would revert approvals_required")
	require.ErrorContains(t, err, "is not at revision 1 any more: it is at revision 2 (root at ")
	require.Equal(t, before, auditCount(t, h), "a refused change writes nothing")
	got, err := s.Policy(ctx, "pay")
	require.NoError(t, err)
	require.Equal(t, 2, got.ApprovalsRequired)
	require.False(t, got.ManualOnly)
	require.Equal(t, int64(2), got.Revision)

	// Read again, the change applies on top of the other.
	got.ManualOnly = true
	got, err = s.SetPolicy(ctx, got, ops)
	require.NoError(t, err)
	require.Equal(t, int64(3), got.Revision)
	require.Equal(t, 2, got.ApprovalsRequired)

	// Revision 0 replaces the policy unconditionally, as before.
	got, err = s.SetPolicy(ctx, versioning.Policy{Service: "pay"}, root)
	require.NoError(t, err)
	require.Equal(t, int64(4), got.Revision)
	require.Equal(t, 1, got.ApprovalsRequired)

	_, err = s.SetPolicy(ctx, versioning.Policy{Service: "pay", Revision: -1}, root)
	require.Equal(t, []string{"revision"}, fieldsOf(t, err))
}

// testPolicyCompareAndSetRace: admins changing one policy revision at once
// (READ COMMITTED on PostgreSQL): exactly one change applies.
func testPolicyCompareAndSetRace(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	base, err := s.SetPolicy(ctx, versioning.Policy{Service: "pay"}, root)
	require.NoError(t, err)
	for round := range 5 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Go(func() {
				p := base
				p.ApprovalsRequired = i + 1
				<-start
				_, errs[i] = s.SetPolicy(ctx, p, root)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, versioning.ErrConflict)
		}
		require.Equal(t, 1, won, "round %d: exactly one change applies", round)
		base, err = s.Policy(ctx, "pay")
		require.NoError(t, err)
		require.Equal(t, int64(round+2), base.Revision)
	}
	entries, err := s.Audit(ctx, versioning.AuditFilter{Service: "pay", Action: versioning.ActionPolicy})
	require.NoError(t, err)
	require.Len(t, entries, 6)
}
