package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// testSelfApprovalAnotherCase: the author cannot approve their own
// proposal under their name spelled in another case.
func testSelfApprovalAnotherCase(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	v := propose(t, h.Store, "pay", 0, 5) // by alice
	before := auditCount(t, h)
	for _, name := range []string{"Alice", "ALICE"} {
		_, err := h.Store.Approve(ctx, "pay", v.Number, versioning.Actor{Name: name, Roles: []versioning.Role{versioning.RoleApprover}}, "me")
		require.ErrorIs(t, err, versioning.ErrSelfApproval, name)
	}
	require.Equal(t, before, auditCount(t, h), "a refused approval writes nothing")
	got, err := h.Store.Get(ctx, "pay", v.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, got.State)
	require.Empty(t, got.Approvals)
}

// testApprovalCountsEachPersonOnce: under a policy of two approvals, one
// approver whose name is spelled in another case the second time does not
// count twice.
func testApprovalCountsEachPersonOnce(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	_, err := s.SetPolicy(ctx, versioning.Policy{Service: "bank", ApprovalsRequired: 2}, root)
	require.NoError(t, err)
	v := propose(t, s, "bank", 0, 1)
	_, err = s.Approve(ctx, "bank", v.Number, bob, "one")
	require.NoError(t, err)
	_, err = s.Approve(ctx, "bank", v.Number, versioning.Actor{Name: "Bob", Roles: []versioning.Role{versioning.RoleApprover, versioning.RoleAdmin}}, "two?")
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	require.ErrorContains(t, err, "Bob already approved version 1 of bank (as bob)")
	got, err := s.Get(ctx, "bank", v.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, got.State, "one person's approval of two")
	require.Len(t, got.Approvals, 1)
	require.Equal(t, int64(0), outboxCount(t, h, "bank", v.Number))
	got, err = s.Approve(ctx, "bank", v.Number, carol, "two")
	require.NoError(t, err)
	require.True(t, got.Active)
}
