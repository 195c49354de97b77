package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

// Capabilities say what a store's database offers beyond the Store
// interface: the tests of what it lacks are not part of its suite.
type Capabilities struct {
	// Roles: the database has roles, and Harness.AppRole opens the store
	// under the application's (PostgreSQL).
	Roles bool
}

// Run runs every conformance test against stores made by f.
func Run(t *testing.T, f Factory, c Capabilities) {
	type test struct {
		name string
		fn   func(t *testing.T, f Factory)
	}
	tests := []test{
		{"Lifecycle", testLifecycle},
		{"GapFreeConcurrentProposals", testGapFree},
		{"ApproversRace", testApproversRace},
		{"SelfApprovalRefused", testSelfApproval},
		{"SelfApprovalUnderAnotherCaseRefused", testSelfApprovalAnotherCase},
		{"ApprovalCountsEachPersonOnce", testApprovalCountsEachPersonOnce},
		{"AuthorUnderAnotherCase", testAuthorUnderAnotherCase},
		{"Roles", testRoles},
		{"ConflictOnStaleParent", testStaleParent},
		{"RollbackToV1FromV10", testRollback},
		{"RollbackRefusals", testRollbackRefusals},
		{"RollbackFromExpectedActive", testRollbackFrom},
		{"RollbackFromRace", testRollbackFromRace},
		{"PolicyTwoApprovals", testPolicyTwoApprovals},
		{"PolicyBand", testPolicyBand},
		{"PolicyCompareAndSet", testPolicyCompareAndSet},
		{"PolicyCompareAndSetRace", testPolicyCompareAndSetRace},
		{"RejectAndWithdraw", testRejectWithdraw},
		{"EmergencyPublish", testEmergency},
		{"AutoApply", testAutoApply},
		{"ReplaceOpenProposal", testReplace},
		{"Revise", testRevise},
		{"ReviseRefusals", testReviseRefusals},
		{"ReviseApproveRace", testReviseApproveRace},
		{"Diff", testDiff},
		{"Reads", testReads},
		{"AuditChainVerifies", testAuditVerifies},
		{"AuditTamperNamed", testAuditTamper},
		{"AuditAppendOnly", testAuditAppendOnly},
		{"RecordAudit", testRecordAudit},
		{"OutboxClaimLeaseMark", testOutboxLease},
		{"OutboxConcurrentClaimers", testOutboxConcurrentClaim},
		{"OutboxExactlyOnceUnderRetry", testOutboxRetry},
		{"OutboxUndeliverable", testOutboxUndeliverable},
		{"OutboxUndeliverableRace", testOutboxUndeliverableRace},
		{"OutboxFailureCount", testOutboxFailureCount},
		{"OutboxMarkByItem", testOutboxItemMark},
		{"OutboxMarkByItemAfterRestore", testOutboxItemMarkAfterRestore},
		{"FailedTransactionWritesNothing", testFailedTx},
		{"BadInputWritesNothing", testBadInput},
		{"YAMLRoundTrip", testYAML},
		{"RaiseNumbering", testRaiseNumbering},
		{"RaiseNumberingBadInput", testRaiseNumberingBadInput},
	}
	if c.Roles {
		tests = append(tests, test{"AppRoleCannotRewriteAudit", testAppRole})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each test has its own database; -parallel (GOMAXPROCS by
			// default) bounds how many run, and so the connections held.
			t.Parallel()
			tt.fn(t, f)
		})
	}
}

func testLifecycle(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store

	v := propose(t, s, "checkout", 0, 100)
	require.Equal(t, int64(1), v.Number)
	require.Equal(t, versioning.StateProposed, v.State)
	require.False(t, v.Active)
	require.Equal(t, "alice", v.Author)
	require.Equal(t, versioning.SourceUser, v.Source)
	require.JSONEq(t, `{"p99_ms":120}`, string(v.Evidence))
	sum, err := ruleset("checkout", 100).Checksum()
	require.NoError(t, err)
	require.Equal(t, sum, v.Checksum)
	_, err = s.Active(ctx, "checkout")
	require.ErrorIs(t, err, versioning.ErrNotFound, "a proposal is not live")

	v, err = s.Approve(ctx, "checkout", 1, bob, "ship it")
	require.NoError(t, err)
	require.Equal(t, versioning.StateApproved, v.State)
	require.True(t, v.Active)
	require.Equal(t, "bob", v.DecidedBy)
	require.Len(t, v.Approvals, 1)
	require.Equal(t, "bob", v.Approvals[0].Approver)
	require.False(t, v.ActivatedAt.IsZero())

	a, err := s.Active(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Number)
	require.Equal(t, ruleset("checkout", 100).Routes[0].RateLimit.Rate, a.Ruleset.Routes[0].RateLimit.Rate)
	require.Equal(t, int64(1), outboxCount(t, h, "checkout", 1))

	// The second version supersedes the first.
	v2 := live(t, s, "checkout", 200)
	require.Equal(t, int64(2), v2.Number)
	require.Equal(t, int64(1), v2.Parent)
	v1, err := s.Get(ctx, "checkout", 1)
	require.NoError(t, err)
	require.Equal(t, versioning.StateSuperseded, v1.State)
	require.False(t, v1.Active)
	require.False(t, v1.SupersededAt.IsZero())

	entries, err := s.Audit(ctx, versioning.AuditFilter{Service: "checkout"})
	require.NoError(t, err)
	var actions []versioning.Action
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	require.Equal(t, []versioning.Action{"propose", "approve", "activate", "propose", "approve", "activate"}, actions)
}

func testGapFree(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	nums := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			v, err := h.Store.Propose(ctx, versioning.Proposal{Ruleset: ruleset("search", float64(i+1)),
				Author: alice, Reason: "concurrent"})
			errs[i], nums[i] = err, v.Number
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	slices.Sort(nums)
	for i, got := range nums {
		require.Equal(t, int64(i+1), got, "numbers must be 1..%d without gaps or duplicates", n)
	}
	require.Equal(t, int64(n), h.Count(ctx, `SELECT count(*) FROM rule_versions WHERE service = 'search'`))
	_, err := h.Store.VerifyAudit(ctx)
	require.NoError(t, err)
}

func testApproversRace(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	for round := range 5 {
		base := int64(0)
		if a, err := h.Store.Active(ctx, "cart"); err == nil {
			base = a.Number
		}
		v := propose(t, h.Store, "cart", base, float64(round+1))
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, who := range []versioning.Actor{bob, carol} {
			wg.Go(func() {
				<-start
				_, errs[i] = h.Store.Approve(ctx, "cart", v.Number, who, "race")
			})
		}
		close(start)
		wg.Wait()
		var won, lost int
		for _, err := range errs {
			if err == nil {
				won++
				continue
			}
			lost++
			require.ErrorIs(t, err, versioning.ErrInvalidState)
			require.ErrorContains(t, err, "already approved")
		}
		require.Equal(t, 1, won, "exactly one approver wins")
		require.Equal(t, 1, lost)
		require.Equal(t, int64(1), outboxCount(t, h, "cart", v.Number))
		got, err := h.Store.Get(ctx, "cart", v.Number)
		require.NoError(t, err)
		require.Len(t, got.Approvals, 1)
	}
}

func testSelfApproval(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	author := versioning.Actor{Name: "dana", Roles: []versioning.Role{versioning.RoleOperator, versioning.RoleApprover}}
	v, err := h.Store.Propose(ctx, versioning.Proposal{Ruleset: ruleset("pay", 5), Author: author, Reason: "mine"})
	require.NoError(t, err)
	before := auditCount(t, h)
	_, err = h.Store.Approve(ctx, "pay", v.Number, author, "self")
	require.ErrorIs(t, err, versioning.ErrSelfApproval)
	require.ErrorContains(t, err, "dana proposed version 1 of pay")
	require.Equal(t, before, auditCount(t, h), "a refused approval writes nothing")
	got, err := h.Store.Get(ctx, "pay", v.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, got.State)
	require.Empty(t, got.Approvals)
}

func testRoles(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	_, err := s.Propose(ctx, versioning.Proposal{Ruleset: ruleset("inv", 1), Author: viewer, Reason: "x"})
	require.ErrorIs(t, err, versioning.ErrForbidden)
	v := propose(t, s, "inv", 0, 1)
	_, err = s.Approve(ctx, "inv", v.Number, engine, "operators cannot approve")
	require.ErrorIs(t, err, versioning.ErrForbidden)
	_, err = s.Reject(ctx, "inv", v.Number, viewer, "")
	require.ErrorIs(t, err, versioning.ErrForbidden)
	_, err = s.EmergencyPublish(ctx, versioning.Proposal{Ruleset: ruleset("inv", 2), Author: bob, Reason: "fire"})
	require.ErrorIs(t, err, versioning.ErrForbidden)
	_, err = s.SetPolicy(ctx, versioning.Policy{Service: "inv", ApprovalsRequired: 2}, bob)
	require.ErrorIs(t, err, versioning.ErrForbidden)
	// The policy decides who approves: here only admins.
	_, err = s.SetPolicy(ctx, versioning.Policy{Service: "inv", ApproverRoles: []versioning.Role{versioning.RoleAdmin}}, root)
	require.NoError(t, err)
	_, err = s.Approve(ctx, "inv", v.Number, bob, "")
	require.ErrorIs(t, err, versioning.ErrForbidden)
	got, err := s.Approve(ctx, "inv", v.Number, root, "")
	require.NoError(t, err)
	require.True(t, got.Active)
}

func testStaleParent(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	live(t, s, "feed", 10) // v1
	a := propose(t, s, "feed", 1, 20)
	b := propose(t, s, "feed", 1, 30)
	_, err := s.Approve(ctx, "feed", a.Number, bob, "")
	require.NoError(t, err)
	_, err = s.Approve(ctx, "feed", b.Number, bob, "")
	require.ErrorIs(t, err, versioning.ErrConflict, "b was based on v1, but a went live since")
	require.ErrorContains(t, err, "rebase")
	require.Equal(t, int64(0), outboxCount(t, h, "feed", b.Number))

	_, err = s.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: ruleset("feed", 40), Author: alice, Reason: "stale"})
	require.ErrorIs(t, err, versioning.ErrConflict)
	require.ErrorContains(t, err, fmt.Sprintf("version %d is active", a.Number))

	r, err := s.Propose(ctx, versioning.Proposal{BaseVersion: 1, Rebase: true, Ruleset: ruleset("feed", 40), Author: alice, Reason: "rebased"})
	require.NoError(t, err)
	require.Equal(t, a.Number, r.Parent)
	_, err = s.Approve(ctx, "feed", r.Number, carol, "")
	require.NoError(t, err)

	// The stale proposal b moves onto the active version explicitly.
	_, err = s.Rebase(ctx, "feed", b.Number, engine)
	require.ErrorIs(t, err, versioning.ErrForbidden, "only the author or an admin")
	_, err = s.Rebase(ctx, "feed", b.Number, versioning.Actor{Name: alice.Name, Roles: []versioning.Role{versioning.RoleViewer}})
	require.ErrorIs(t, err, versioning.ErrForbidden, "the author, now a viewer only, may no longer propose")
	nb, err := s.Rebase(ctx, "feed", b.Number, alice)
	require.NoError(t, err)
	require.Equal(t, r.Number, nb.Parent)
	require.Equal(t, b.Checksum, nb.Checksum)
	require.Equal(t, "alice", nb.Author, "the author stays, so four eyes still applies")
	require.Equal(t, b.Reason, nb.Reason)
	require.JSONEq(t, string(b.Evidence), string(nb.Evidence))
	old, err := s.Get(ctx, "feed", b.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateWithdrawn, old.State)
	require.Equal(t, fmt.Sprintf("rebased as version %d", nb.Number), old.DecisionComment)
	_, err = s.Rebase(ctx, "feed", nb.Number, alice)
	require.ErrorIs(t, err, versioning.ErrInvalidState, "already on the active version")
	_, err = s.Approve(ctx, "feed", nb.Number, alice, "")
	require.ErrorIs(t, err, versioning.ErrSelfApproval)
	got, err := s.Approve(ctx, "feed", nb.Number, bob, "")
	require.NoError(t, err)
	require.True(t, got.Active)
}

func testRollback(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	for i := 1; i <= 10; i++ {
		live(t, s, "edge", float64(i*10))
	}
	v1, err := s.Get(ctx, "edge", 1)
	require.NoError(t, err)
	r, err := s.Rollback(ctx, "edge", 1, alice, "v10 overloads the database")
	require.NoError(t, err)
	require.Equal(t, int64(11), r.Number)
	require.Equal(t, int64(1), r.RollbackOf)
	require.Equal(t, int64(10), r.Parent)
	require.Equal(t, versioning.SourceRollback, r.Source)
	require.True(t, r.Active)
	require.Equal(t, v1.Checksum, r.Checksum)
	require.Equal(t, v1.Ruleset, r.Ruleset)
	require.Empty(t, versioning.Diff(v1.Ruleset, r.Ruleset))

	a, err := s.Active(ctx, "edge")
	require.NoError(t, err)
	require.Equal(t, int64(11), a.Number)
	v10, err := s.Get(ctx, "edge", 10)
	require.NoError(t, err)
	require.Equal(t, versioning.StateSuperseded, v10.State)
	// History is append-only: all eleven versions remain.
	all, err := s.List(ctx, versioning.ListFilter{Service: "edge", Limit: 100})
	require.NoError(t, err)
	require.Len(t, all, 11)
	require.Equal(t, int64(1), outboxCount(t, h, "edge", 11))
	require.Equal(t, int64(1), h.Count(ctx, `SELECT count(*) FROM rule_outbox WHERE service = 'edge' AND version = 11 AND kind = 'rollback'`))
	entries, err := s.Audit(ctx, versioning.AuditFilter{Service: "edge", Action: versioning.ActionRollback})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "alice", entries[0].Actor)
	require.JSONEq(t, fmt.Sprintf(`{"reason":"v10 overloads the database","rollback_of":1,"checksum":%q,"previous":10,"outbox_id":%d}`,
		v1.Checksum, h.Count(ctx, `SELECT id FROM rule_outbox WHERE service = 'edge' AND version = 11`)), string(entries[0].Detail))
}

func testRollbackRefusals(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	live(t, s, "geo", 1)
	p := propose(t, s, "geo", 1, 2)
	_, err := s.Reject(ctx, "geo", p.Number, bob, "no")
	require.NoError(t, err)
	before := auditCount(t, h)
	tests := []struct {
		name    string
		service string
		to      int64
		by      versioning.Actor
		reason  string
		want    error
	}{
		{"never live", "geo", p.Number, alice, "x", versioning.ErrInvalidState},
		{"already active", "geo", 1, alice, "x", versioning.ErrInvalidState},
		{"no such version", "geo", 99, alice, "x", versioning.ErrNotFound},
		{"no such service", "nope", 1, alice, "x", versioning.ErrNotFound},
		{"viewer", "geo", 1, viewer, "x", versioning.ErrForbidden},
		{"no reason", "geo", 1, alice, " ", versioning.ErrInvalid},
		{"bad target", "geo", 0, alice, "x", versioning.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Rollback(ctx, tt.service, tt.to, tt.by, tt.reason)
			require.ErrorIs(t, err, tt.want)
		})
	}
	require.Equal(t, before, auditCount(t, h))
}

func testPolicyTwoApprovals(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	pol, err := s.SetPolicy(ctx, versioning.Policy{Service: "bank", ApprovalsRequired: 2}, root)
	require.NoError(t, err)
	require.Equal(t, []versioning.Role{versioning.RoleApprover, versioning.RoleAdmin}, pol.ApproverRoles)
	got, err := s.Policy(ctx, "bank")
	require.NoError(t, err)
	require.Equal(t, 2, got.ApprovalsRequired)
	require.Equal(t, "root", got.UpdatedBy)

	v := propose(t, s, "bank", 0, 1)
	v, err = s.Approve(ctx, "bank", v.Number, bob, "one")
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, v.State, "one of two approvals")
	require.False(t, v.Active)
	require.Equal(t, int64(0), outboxCount(t, h, "bank", v.Number))
	_, err = s.Approve(ctx, "bank", v.Number, bob, "again")
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	require.ErrorContains(t, err, "bob already approved")
	v, err = s.Approve(ctx, "bank", v.Number, carol, "two")
	require.NoError(t, err)
	require.Equal(t, versioning.StateApproved, v.State)
	require.Len(t, v.Approvals, 2)
	require.Equal(t, int64(1), outboxCount(t, h, "bank", v.Number))

	_, err = s.SetPolicy(ctx, versioning.Policy{Service: "bank", ApprovalsRequired: 11}, root)
	require.Equal(t, []string{"approvals_required"}, fieldsOf(t, err))
	entries, err := s.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionPolicy})
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

func testPolicyBand(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	pol, err := s.SetPolicy(ctx, versioning.Policy{Service: "cart", ApprovalsRequired: 2}, root)
	require.NoError(t, err)
	require.Nil(t, pol.Band, "no band unless a person sets one")
	got, err := s.Policy(ctx, "cart")
	require.NoError(t, err)
	require.Nil(t, got.Band)

	band := &versioning.AutoApplyBand{MaxChangePerHour: 0.25, Floor: 40.5, Ceiling: 900}
	pol.Band, pol.ManualOnly = band, true
	pol, err = s.SetPolicy(ctx, pol, root)
	require.NoError(t, err)
	band.Floor = 1 // the stored policy does not alias the caller's band
	got, err = s.Policy(ctx, "cart")
	require.NoError(t, err)
	require.Equal(t, &versioning.AutoApplyBand{MaxChangePerHour: 0.25, Floor: 40.5, Ceiling: 900}, got.Band)
	require.Equal(t, 2, got.ApprovalsRequired)
	require.True(t, got.ManualOnly)
	require.Equal(t, "root", got.UpdatedBy)
	require.Equal(t, pol.Band, got.Band)

	// A band with no bounds and no automatic change at all is valid.
	got.Band = &versioning.AutoApplyBand{}
	_, err = s.SetPolicy(ctx, got, root)
	require.NoError(t, err)
	got, err = s.Policy(ctx, "cart")
	require.NoError(t, err)
	require.Equal(t, &versioning.AutoApplyBand{}, got.Band)

	before := auditCount(t, h)
	bad := got
	bad.Band = &versioning.AutoApplyBand{MaxChangePerHour: -0.1, Floor: 300, Ceiling: 200}
	_, err = s.SetPolicy(ctx, bad, root)
	require.Equal(t, []string{"band.max_change_per_hour", "band.floor"}, fieldsOf(t, err))
	_, err = s.SetPolicy(ctx, versioning.Policy{Service: "cart", Band: &versioning.AutoApplyBand{MaxChangePerHour: 0.2}}, bob)
	require.ErrorIs(t, err, versioning.ErrForbidden, "only admins set policies")
	require.Equal(t, before, auditCount(t, h), "refused changes are not audited")
	got, err = s.Policy(ctx, "cart")
	require.NoError(t, err)
	require.Equal(t, &versioning.AutoApplyBand{}, got.Band, "nothing half-applied")

	// A nil band hands the service back to the engine's configured band.
	got.Band = nil
	_, err = s.SetPolicy(ctx, got, root)
	require.NoError(t, err)
	got, err = s.Policy(ctx, "cart")
	require.NoError(t, err)
	require.Nil(t, got.Band)
	require.True(t, got.ManualOnly)

	entries, err := s.Audit(ctx, versioning.AuditFilter{Service: "cart", Action: versioning.ActionPolicy})
	require.NoError(t, err)
	require.Len(t, entries, 4)
	require.JSONEq(t, `{"old":{"approvals_required":2,"approver_roles":["approver","admin"],"manual_only":false,"band":null},
		"new":{"approvals_required":2,"approver_roles":["approver","admin"],"manual_only":true,
			"band":{"max_change_per_hour":0.25,"floor":40.5,"ceiling":900}}}`, string(entries[1].Detail))
	require.JSONEq(t, `{"max_change_per_hour":0,"floor":0,"ceiling":0}`, gjsonBand(t, entries[3].Detail, "old"))
	require.JSONEq(t, `null`, gjsonBand(t, entries[3].Detail, "new"))
	_, err = s.VerifyAudit(ctx)
	require.NoError(t, err)
}

// gjsonBand returns the band of a policy audit entry's old or new side.
func gjsonBand(t *testing.T, detail []byte, side string) string {
	t.Helper()
	var d map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(detail, &d))
	return string(d[side]["band"])
}

func testRejectWithdraw(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	a := propose(t, s, "mail", 0, 1)
	r, err := s.Reject(ctx, "mail", a.Number, bob, "too low")
	require.NoError(t, err)
	require.Equal(t, versioning.StateRejected, r.State)
	require.Equal(t, "too low", r.DecisionComment)
	_, err = s.Approve(ctx, "mail", a.Number, carol, "")
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	require.ErrorContains(t, err, "already rejected by bob")

	b := propose(t, s, "mail", 0, 2)
	_, err = s.Withdraw(ctx, "mail", b.Number, engine, "not mine")
	require.ErrorIs(t, err, versioning.ErrForbidden)
	w, err := s.Withdraw(ctx, "mail", b.Number, alice, "changed my mind")
	require.NoError(t, err)
	require.Equal(t, versioning.StateWithdrawn, w.State)
	_, err = s.Withdraw(ctx, "mail", b.Number, alice, "")
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	_, err = s.Approve(ctx, "mail", 42, bob, "")
	require.ErrorIs(t, err, versioning.ErrNotFound)
	_, err = s.Active(ctx, "mail")
	require.ErrorIs(t, err, versioning.ErrNotFound)
}

func testEmergency(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	live(t, s, "api", 10)
	pending := propose(t, s, "api", 1, 20)
	_, err := s.EmergencyPublish(ctx, versioning.Proposal{Ruleset: ruleset("api", 1), Author: root})
	require.Equal(t, []string{"reason"}, fieldsOf(t, err))
	v, err := s.EmergencyPublish(ctx, versioning.Proposal{BaseVersion: 0, Ruleset: ruleset("api", 1),
		Author: root, Reason: "incident 42: shed everything"})
	require.NoError(t, err, "break glass ignores the base version")
	require.True(t, v.Emergency)
	require.True(t, v.Active)
	require.Equal(t, int64(1), v.Parent)
	require.Empty(t, v.Approvals)
	require.Equal(t, int64(1), h.Count(ctx, `SELECT count(*) FROM rule_outbox WHERE service = 'api' AND version = $1 AND kind = 'emergency'`, v.Number))
	entries, err := s.Audit(ctx, versioning.AuditFilter{Service: "api", Action: versioning.ActionEmergency})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "root", entries[0].Actor)
	require.Contains(t, string(entries[0].Detail), `"break_glass":true`)
	// The pending proposal was based on v1 and is now stale.
	_, err = s.Approve(ctx, "api", pending.Number, bob, "")
	require.ErrorIs(t, err, versioning.ErrConflict)
}

func testAutoApply(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	v, err := s.Propose(ctx, versioning.Proposal{Ruleset: ruleset("ads", 50), Author: engine, Reason: "within bands",
		Source: versioning.SourceEngine, AutoApply: true, Evidence: []byte(`{"load": 0.4}`)})
	require.NoError(t, err)
	require.True(t, v.Active)
	require.True(t, v.AutoApplied)
	require.Equal(t, versioning.SourceEngine, v.Source)
	require.Equal(t, int64(1), outboxCount(t, h, "ads", 1))

	_, err = s.Propose(ctx, versioning.Proposal{Ruleset: ruleset("ads", 60), Author: alice, Reason: "x", AutoApply: true})
	require.Equal(t, []string{"auto_apply"}, fieldsOf(t, err), "only engine proposals may apply themselves")

	_, err = s.SetPolicy(ctx, versioning.Policy{Service: "ads", ManualOnly: true}, root)
	require.NoError(t, err)
	before := auditCount(t, h)
	_, err = s.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: ruleset("ads", 60), Author: engine,
		Reason: "within bands", Source: versioning.SourceEngine, AutoApply: true})
	require.ErrorIs(t, err, versioning.ErrForbidden)
	require.ErrorContains(t, err, "manual-only")
	require.Equal(t, before, auditCount(t, h))
	require.Equal(t, int64(1), h.Count(ctx, `SELECT count(*) FROM rule_versions WHERE service = 'ads'`))
	// Without AutoApply the engine's proposal waits for a person.
	p, err := s.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: ruleset("ads", 60), Author: engine,
		Reason: "outside bands", Source: versioning.SourceEngine})
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, p.State)
}

func testDiff(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	live(t, s, "diff", 100)
	next := ruleset("diff", 150)
	next.Routes[0].Concurrency = nil
	next.Downstreams = append(next.Downstreams, rules.Downstream{Name: "cache", Timeout: rules.Duration(50e6)})
	_, err := s.Propose(ctx, versioning.Proposal{BaseVersion: 1, Ruleset: next, Author: alice, Reason: "tune"})
	require.NoError(t, err)
	a, err := s.Get(ctx, "diff", 1)
	require.NoError(t, err)
	b, err := s.Get(ctx, "diff", 2)
	require.NoError(t, err)
	require.Equal(t, []versioning.Change{
		{Path: "downstreams[cache]", Op: versioning.OpAdded, New: []byte(`{"name":"cache","timeout":"50ms"}`)},
		{Path: "routes[api].concurrency", Op: versioning.OpRemoved, Old: []byte(`{"algorithm":"gradient","max":200,"min":4}`)},
		{Path: "routes[api].rate_limit.rate", Op: versioning.OpChanged, Old: []byte(`100`), New: []byte(`150`)},
	}, versioning.Diff(a.Ruleset, b.Ruleset))
}

func testReads(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	pol, err := s.Policy(ctx, "unknown")
	require.NoError(t, err)
	require.Equal(t, versioning.DefaultPolicy("unknown"), pol)
	_, err = s.Get(ctx, "unknown", 1)
	require.ErrorIs(t, err, versioning.ErrNotFound)

	live(t, s, "a", 1)
	live(t, s, "a", 2)
	propose(t, s, "a", 2, 3)
	propose(t, s, "b", 0, 1)
	svcs, err := s.Services(ctx)
	require.NoError(t, err)
	require.Equal(t, []versioning.ServiceInfo{{Name: "a", Active: 2, Latest: 3, Pending: 1}, {Name: "b", Latest: 1, Pending: 1}}, svcs)

	all, err := s.List(ctx, versioning.ListFilter{Service: "a"})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 2, 1}, numbers(all))
	require.Len(t, all[1].Approvals, 1)
	page, err := s.List(ctx, versioning.ListFilter{Service: "a", Before: 3, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []int64{2}, numbers(page))
	pending, err := s.List(ctx, versioning.ListFilter{Service: "a", States: []versioning.State{versioning.StateProposed}})
	require.NoError(t, err)
	require.Equal(t, []int64{3}, numbers(pending))
	none, err := s.List(ctx, versioning.ListFilter{Service: "zzz"})
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = s.List(ctx, versioning.ListFilter{})
	require.Equal(t, []string{"service"}, fieldsOf(t, err))
}

func numbers(vs []versioning.Version) []int64 {
	out := make([]int64, len(vs))
	for i, v := range vs {
		out[i] = v.Number
	}
	return out
}

func testAuditVerifies(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	rep, err := s.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Equal(t, versioning.AuditReport{Entries: 0, Head: versioning.GenesisHash}, rep)
	for i := range 4 {
		live(t, s, "chain", float64(i+1))
	}
	_, err = s.Rollback(ctx, "chain", 2, alice, "back")
	require.NoError(t, err)
	rep, err = s.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Equal(t, auditCount(t, h), rep.Entries)
	entries, err := s.Audit(ctx, versioning.AuditFilter{Limit: 1000})
	require.NoError(t, err)
	require.Equal(t, entries[len(entries)-1].Hash, rep.Head)
	require.Equal(t, versioning.GenesisHash, entries[0].PrevHash)
	for i := 1; i < len(entries); i++ {
		require.Equal(t, entries[i-1].Hash, entries[i].PrevHash)
		require.Equal(t, entries[i].ComputeHash(), entries[i].Hash)
	}
	// Paging by AfterSeq.
	tail, err := s.Audit(ctx, versioning.AuditFilter{AfterSeq: entries[len(entries)-3].Seq})
	require.NoError(t, err)
	require.Len(t, tail, 2)
	latest, err := s.Audit(ctx, versioning.AuditFilter{Newest: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{entries[len(entries)-1].Seq, entries[len(entries)-2].Seq}, []int64{latest[0].Seq, latest[1].Seq})
	older, err := s.Audit(ctx, versioning.AuditFilter{Newest: true, BeforeSeq: latest[1].Seq, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, entries[len(entries)-3].Seq, older[0].Seq)
}

func testAuditTamper(t *testing.T, f Factory) {
	tests := []struct {
		name    string
		tamper  string
		seq     int64
		problem string
	}{
		{"changed actor", `UPDATE rule_audit SET actor = 'mallory' WHERE seq = 3`, 3, "does not match its hash"},
		{"changed detail", `UPDATE rule_audit SET detail = '{"comment":"forged"}' WHERE seq = 5`, 5, "does not match its hash"},
		{"replaced hash", `UPDATE rule_audit SET hash = 'sha256:00' WHERE seq = 2`, 2, "does not match its hash"},
		{"deleted entry", `DELETE FROM rule_audit WHERE seq = 4`, 5, "sequence jumps"},
		{"deleted last entry", `DELETE FROM rule_audit WHERE seq = (SELECT max(seq) FROM rule_audit)`, 0, "missing"},
		// An INSERT the application role may run, with the head left alone:
		// Audit would list it as the newest entry.
		{"entry past the head", `INSERT INTO rule_audit (seq, at, actor, roles, action, service, version, detail, prev_hash, hash)
			SELECT seq + 1, at, 'mallory', roles, action, service, version, detail, hash, 'sha256:forged'
			FROM rule_audit WHERE seq = (SELECT max(seq) FROM rule_audit)`, -1, "past the chain head"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := f(t, Options{})
			for i := range 3 {
				live(t, h.Store, "tamper", float64(i+1))
			}
			_, err := h.Store.VerifyAudit(ctx)
			require.NoError(t, err)
			want := tt.seq
			switch want {
			case 0: // the last entry
				want = auditCount(t, h)
			case -1: // the one after it
				want = auditCount(t, h) + 1
			}
			require.NoError(t, h.Tamper(ctx, tt.tamper))
			_, err = h.Store.VerifyAudit(ctx)
			require.ErrorIs(t, err, versioning.ErrTampered)
			var ce *versioning.ChainError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, want, ce.Seq, "verify must name the first broken entry: %v", err)
			require.Contains(t, ce.Problem, tt.problem)
		})
	}
}

func testAuditAppendOnly(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	live(t, h.Store, "ao", 1)
	for _, q := range []string{
		`UPDATE rule_audit SET actor = 'mallory' WHERE seq = 1`,
		`DELETE FROM rule_audit WHERE seq = 1`,
	} {
		err := h.Exec(ctx, q)
		require.Error(t, err, q)
		require.ErrorContains(t, err, "append-only")
	}
	_, err := h.Store.VerifyAudit(ctx)
	require.NoError(t, err)
	// Version content is immutable too: a decided version's always, an
	// open proposal's except by a revision (the counter going up by one),
	// provenance always.
	err = h.Exec(ctx, `UPDATE rule_versions SET content = '{}' WHERE service = 'ao'`)
	require.ErrorContains(t, err, "immutable")
	err = h.Exec(ctx, `UPDATE rule_versions SET content = '{}', revision = revision + 1 WHERE service = 'ao'`)
	require.ErrorContains(t, err, "immutable")
	p := propose(t, h.Store, "ao", 1, 2)
	for _, q := range []string{
		`UPDATE rule_versions SET evidence = '{}' WHERE service = 'ao' AND number = $1`,
		`UPDATE rule_versions SET reason = 'x', revision = revision + 2 WHERE service = 'ao' AND number = $1`,
		`UPDATE rule_versions SET approval_round = approval_round + 2, revision = revision + 1 WHERE service = 'ao' AND number = $1`,
		`UPDATE rule_versions SET approval_round = approval_round + 1 WHERE service = 'ao' AND number = $1`,
		`UPDATE rule_versions SET author = 'mallory', revision = revision + 1 WHERE service = 'ao' AND number = $1`,
		`UPDATE rule_versions SET state = 'approved', content = '{}', revision = revision + 1 WHERE service = 'ao' AND number = $1`,
	} {
		err = h.Exec(ctx, q, p.Number)
		require.ErrorContains(t, err, "immutable", q)
	}
	require.NoError(t, h.Exec(ctx, `UPDATE rule_versions SET reason = 'revised', revision = revision + 1
		WHERE service = 'ao' AND number = $1`, p.Number), "an open proposal's revision")
	err = h.Exec(ctx, `DELETE FROM rule_versions WHERE service = 'ao'`)
	require.ErrorContains(t, err, "never deleted")
}

func testAppRole(t *testing.T, f Factory) {
	h := f(t, Options{})
	if h.AppRole == nil {
		t.Fatal("Capabilities.Roles is set but the harness has no AppRole")
	}
	ctx := context.Background()
	app, exec := h.AppRole(t)
	// The application works fully under its role...
	v, err := app.Propose(ctx, versioning.Proposal{Ruleset: ruleset("role", 1), Author: alice, Reason: "as app"})
	require.NoError(t, err)
	_, err = app.Approve(ctx, "role", v.Number, bob, "")
	require.NoError(t, err)
	items, err := app.ClaimOutbox(ctx, 10, 60e9)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.NoError(t, app.MarkOutboxDone(ctx, items[0].ID))
	// Relay outcomes too: a row given up on, then requeued.
	u := live(t, app, "role-big", 1)
	items, err = app.ClaimOutbox(ctx, 10, 60e9)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, u.Number, items[0].Version)
	_, recorded, err := app.MarkOutboxUndeliverable(ctx, items[0].ID, tooLarge("app/1"))
	require.NoError(t, err)
	require.True(t, recorded)
	fails, err := app.OutboxFailures(ctx, versioning.FailureFilter{})
	require.NoError(t, err)
	require.Len(t, fails, 1)
	requeued, err := app.RequeueOutbox(ctx, items[0].ID, "app/1")
	require.NoError(t, err)
	require.True(t, requeued)
	// A revision invalidates approvals without deleting anything.
	_, err = app.SetPolicy(ctx, versioning.Policy{Service: "role", ApprovalsRequired: 2}, root)
	require.NoError(t, err)
	r, err := app.Propose(ctx, revision("role", v.Number, 2, `{}`))
	require.NoError(t, err)
	_, err = app.Approve(ctx, "role", r.Number, bob, "")
	require.NoError(t, err)
	r, err = app.Revise(ctx, "role", r.Number, revision("role", v.Number, 3, `{}`))
	require.NoError(t, err)
	require.Empty(t, r.Approvals)
	// ...but may not rewrite the audit log, even with the trigger gone.
	require.NoError(t, h.Exec(ctx, `ALTER TABLE rule_audit DISABLE TRIGGER USER`))
	for _, q := range []string{
		`UPDATE rule_audit SET actor = 'mallory'`,
		`DELETE FROM rule_audit`,
		`TRUNCATE rule_audit`,
	} {
		err := exec(ctx, q)
		require.Error(t, err, q)
		require.ErrorContains(t, err, "permission denied", q)
	}
	require.NoError(t, h.Exec(ctx, `ALTER TABLE rule_audit ENABLE TRIGGER USER`))
	rep, err := app.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(8+3+2), rep.Entries, "8 for role; propose, approve and activate of role-big; undeliverable, requeue")
}

func testRecordAudit(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	e, err := h.Store.RecordAudit(ctx, versioning.AuditRecord{Actor: versioning.Actor{Name: "mallory"},
		Action: versioning.ActionLoginFailure, Detail: []byte(` { "ip" : "10.0.0.9" } `)})
	require.NoError(t, err)
	require.Equal(t, int64(1), e.Seq)
	require.Equal(t, `{"ip":"10.0.0.9"}`, string(e.Detail))
	_, err = h.Store.RecordAudit(ctx, versioning.AuditRecord{Actor: root, Action: versioning.ActionApprove})
	require.Equal(t, []string{"action"}, fieldsOf(t, err))
	_, err = h.Store.RecordAudit(ctx, versioning.AuditRecord{Actor: root, Action: "login", Detail: []byte(`[1]`)})
	require.Equal(t, []string{"detail"}, fieldsOf(t, err))
	_, err = h.Store.RecordAudit(ctx, versioning.AuditRecord{Actor: versioning.Actor{}, Action: "Login!"})
	require.Equal(t, []string{"actor.name"}, fieldsOf(t, err))
	got, err := h.Store.Audit(ctx, versioning.AuditFilter{Actor: "mallory"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	// One person whatever the case: user names are unique ignoring case.
	got, err = h.Store.Audit(ctx, versioning.AuditFilter{Actor: "Mallory"})
	require.NoError(t, err)
	require.Len(t, got, 1, "the actor filter ignores case")
	_, err = h.Store.VerifyAudit(ctx)
	require.NoError(t, err)
}

func testReplace(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	first, err := s.Propose(ctx, versioning.Proposal{Ruleset: ruleset("rep", 10), Author: engine, Reason: "first",
		Source: versioning.SourceEngine})
	require.NoError(t, err)
	second, err := s.Propose(ctx, versioning.Proposal{Ruleset: ruleset("rep", 12), Author: engine, Reason: "newer data",
		Source: versioning.SourceEngine, Replaces: first.Number})
	require.NoError(t, err)
	old, err := s.Get(ctx, "rep", first.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateWithdrawn, old.State)
	require.Equal(t, fmt.Sprintf("replaced by version %d", second.Number), old.DecisionComment)
	open, err := s.List(ctx, versioning.ListFilter{Service: "rep", States: []versioning.State{versioning.StateProposed}})
	require.NoError(t, err)
	require.Equal(t, []int64{second.Number}, numbers(open), "one open proposal")

	before := auditCount(t, h)
	_, err = s.Propose(ctx, versioning.Proposal{Ruleset: ruleset("rep", 13), Author: alice, Reason: "not mine",
		Replaces: second.Number})
	require.ErrorIs(t, err, versioning.ErrForbidden)
	_, err = s.Propose(ctx, versioning.Proposal{Ruleset: ruleset("rep", 13), Author: engine, Reason: "gone",
		Source: versioning.SourceEngine, Replaces: first.Number})
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	_, err = s.Propose(ctx, versioning.Proposal{Ruleset: ruleset("rep", 13), Author: engine, Reason: "missing",
		Source: versioning.SourceEngine, Replaces: 99})
	require.ErrorIs(t, err, versioning.ErrNotFound)
	require.Equal(t, before, auditCount(t, h), "refused replacements write nothing")
	require.Equal(t, int64(2), h.Count(ctx, `SELECT count(*) FROM rule_versions WHERE service = 'rep'`))
}
