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

// testAuthorUnderAnotherCase: the author may withdraw, rebase, revise and
// replace their proposal under their name spelled in another case, as four
// eyes takes that spelling for the same person: the checks agree on who
// the author is.
func testAuthorUnderAnotherCase(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	Alice := versioning.Actor{Name: "Alice", Roles: alice.Roles}
	v1 := live(t, s, "case", 1)

	w := propose(t, s, "case", v1.Number, 2) // by alice
	got, err := s.Withdraw(ctx, "case", w.Number, Alice, "mine")
	require.NoError(t, err, "withdraw")
	require.Equal(t, versioning.StateWithdrawn, got.State)

	r := propose(t, s, "case", v1.Number, 3)
	got, err = s.Revise(ctx, "case", r.Number, versioning.Proposal{BaseVersion: v1.Number, Ruleset: ruleset("case", 4),
		Author: Alice, Reason: "revised"})
	require.NoError(t, err, "revise")
	require.Equal(t, 1, got.Revision)
	require.Equal(t, "alice", got.Author, "a revision keeps the author as proposed")

	got, err = s.Propose(ctx, versioning.Proposal{BaseVersion: v1.Number, Ruleset: ruleset("case", 5), Author: Alice,
		Reason: "replaced", Replaces: r.Number})
	require.NoError(t, err, "replace")
	old, err := s.Get(ctx, "case", r.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateWithdrawn, old.State)

	stale := got // by Alice, on v1
	live(t, s, "case", 6)
	got, err = s.Rebase(ctx, "case", stale.Number, alice)
	require.NoError(t, err, "rebase")
	require.Equal(t, "Alice", got.Author)
	_, err = s.Approve(ctx, "case", got.Number, versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleApprover}}, "me")
	require.ErrorIs(t, err, versioning.ErrSelfApproval, "the rebased proposal is still the author's")

	_, err = s.Withdraw(ctx, "case", got.Number, versioning.Actor{Name: "alicia", Roles: alice.Roles}, "not mine")
	require.ErrorIs(t, err, versioning.ErrForbidden, "another name is another person")
}
