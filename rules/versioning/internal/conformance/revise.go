package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
	"governor.dev/governor/sdk/clock"
)

// revision is a revision of an engine proposal on base with the given rate.
func revision(service string, base int64, rate float64, evidence string) versioning.Proposal {
	return versioning.Proposal{BaseVersion: base, Ruleset: ruleset(service, rate), Author: engine,
		Source: versioning.SourceEngine, Reason: fmt.Sprintf("rate %v", rate), Evidence: []byte(evidence)}
}

func checksumOf(t *testing.T, service string, rate float64) string {
	t.Helper()
	sum, err := ruleset(service, rate).Checksum()
	require.NoError(t, err)
	return sum
}

// testRevise: an open proposal is revised in place (same number, new
// content, revision counter, revised_at), audited as revise; a ruleset
// change invalidates approvals, an evidence-only revision keeps them; an
// approval of a reviewed checksum refuses revised content; decided
// proposals are never revised.
func testRevise(t *testing.T, f Factory) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	h := f(t, Options{Clock: clk})
	s := h.Store
	v1 := live(t, s, "rev", 1)
	_, err := s.SetPolicy(ctx, versioning.Policy{Service: "rev", ApprovalsRequired: 2}, root)
	require.NoError(t, err)
	created := clk.Now().UTC()
	p, err := s.Propose(ctx, revision("rev", v1.Number, 10, `{"load": 0.9}`))
	require.NoError(t, err)
	require.Equal(t, 0, p.Revision)
	require.True(t, p.RevisedAt.IsZero())
	p, err = s.Approve(ctx, "rev", p.Number, bob, "first of two")
	require.NoError(t, err)
	require.Len(t, p.Approvals, 1)

	// Evidence and reason only: approvals stay.
	clk.Advance(time.Minute)
	r1 := revision("rev", v1.Number, 10, `{"load": 0.95}`)
	r1.Reason = "still overloaded"
	got, err := s.Revise(ctx, "rev", p.Number, r1)
	require.NoError(t, err)
	require.Equal(t, p.Number, got.Number)
	require.Equal(t, versioning.StateProposed, got.State)
	require.Equal(t, 1, got.Revision)
	require.Equal(t, clk.Now().UTC(), got.RevisedAt)
	require.Equal(t, created, got.CreatedAt, "created_at is when it was first proposed")
	require.Equal(t, p.Checksum, got.Checksum)
	require.Equal(t, "still overloaded", got.Reason)
	require.JSONEq(t, `{"load": 0.95}`, string(got.Evidence))
	require.Len(t, got.Approvals, 1, "an evidence-only revision keeps approvals")
	require.Equal(t, v1.Number, got.Parent)

	// A new ruleset: approvals are invalidated.
	clk.Advance(time.Minute)
	got, err = s.Revise(ctx, "rev", p.Number, revision("rev", v1.Number, 20, `{"load": 0.97}`))
	require.NoError(t, err)
	require.Equal(t, 2, got.Revision)
	require.Equal(t, checksumOf(t, "rev", 20), got.Checksum)
	require.Equal(t, 20.0, got.Ruleset.Routes[0].RateLimit.Rate)
	require.Empty(t, got.Approvals, "a ruleset change invalidates approvals")
	read, err := s.Get(ctx, "rev", p.Number)
	require.NoError(t, err)
	require.Equal(t, got.Revision, read.Revision)
	require.Equal(t, got.RevisedAt, read.RevisedAt)
	require.Equal(t, got.Checksum, read.Checksum)
	open, err := s.List(ctx, versioning.ListFilter{Service: "rev", States: []versioning.State{versioning.StateProposed}})
	require.NoError(t, err)
	require.Len(t, open, 1, "revising never stacks proposals")

	// An approver who reviewed revision 0 cannot approve revision 2.
	before := auditCount(t, h)
	_, err = s.ApproveChecksum(ctx, "rev", p.Number, p.Checksum, carol, "reviewed the old one")
	require.ErrorIs(t, err, versioning.ErrConflict)
	require.ErrorContains(t, err, "revised since it was reviewed")
	_, err = s.ApproveChecksum(ctx, "rev", p.Number, "", carol, "no checksum")
	require.Equal(t, []string{"checksum"}, fieldsOf(t, err))
	require.Equal(t, before, auditCount(t, h), "refused approvals write nothing")
	got, err = s.ApproveChecksum(ctx, "rev", p.Number, got.Checksum, carol, "reviewed revision 2")
	require.NoError(t, err)
	require.Equal(t, versioning.StateProposed, got.State, "bob's approval went with the old ruleset")
	got, err = s.Approve(ctx, "rev", p.Number, bob, "again, on revision 2")
	require.NoError(t, err)
	require.Equal(t, versioning.StateApproved, got.State)
	require.True(t, got.Active)
	require.Len(t, got.Approvals, 2)
	require.Equal(t, int64(3), h.Count(ctx, `SELECT count(*) FROM rule_approvals WHERE service = 'rev' AND number = $1`, p.Number),
		"the invalidated approval stays as history")
	act, err := s.Active(ctx, "rev")
	require.NoError(t, err)
	require.Equal(t, checksumOf(t, "rev", 20), act.Checksum)
	require.Equal(t, 2, act.Revision)
	items, err := s.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	var published bool
	for _, it := range items {
		if it.Service == "rev" && it.Version == p.Number {
			published = true
			require.Equal(t, act.Checksum, it.Checksum, "the relay publishes the approved revision")
		}
	}
	require.True(t, published)

	// Decided proposals are never revised.
	before = auditCount(t, h)
	_, err = s.Revise(ctx, "rev", p.Number, revision("rev", v1.Number, 30, `{}`))
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	require.ErrorContains(t, err, "cannot revise version 2 of rev: it was already approved by bob")
	rej, err := s.Propose(ctx, revision("rev", p.Number, 40, `{}`))
	require.NoError(t, err)
	_, err = s.Reject(ctx, "rev", rej.Number, bob, "no")
	require.NoError(t, err)
	_, err = s.Revise(ctx, "rev", rej.Number, revision("rev", p.Number, 41, `{}`))
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	require.ErrorContains(t, err, "already rejected")
	wd, err := s.Propose(ctx, revision("rev", p.Number, 50, `{}`))
	require.NoError(t, err)
	_, err = s.Withdraw(ctx, "rev", wd.Number, engine, "stale")
	require.NoError(t, err)
	_, err = s.Revise(ctx, "rev", wd.Number, revision("rev", p.Number, 51, `{}`))
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	require.ErrorContains(t, err, "already withdrawn")
	require.Equal(t, before+4, auditCount(t, h), "two proposals and their decisions; no revision")

	entries, err := s.Audit(ctx, versioning.AuditFilter{Service: "rev", Action: versioning.ActionRevise})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	for _, e := range entries {
		require.Equal(t, "engine", e.Actor)
		require.Equal(t, p.Number, e.Version)
	}
	var d1, d2 map[string]any
	require.NoError(t, json.Unmarshal(entries[0].Detail, &d1))
	require.NoError(t, json.Unmarshal(entries[1].Detail, &d2))
	require.Equal(t, map[string]any{"revision": 1.0, "old_checksum": p.Checksum, "checksum": p.Checksum,
		"ruleset_changed": false, "reason": "still overloaded", "approvals_invalidated": []any{}}, d1)
	require.Equal(t, map[string]any{"revision": 2.0, "old_checksum": p.Checksum, "checksum": checksumOf(t, "rev", 20),
		"ruleset_changed": true, "reason": "rate 20", "approvals_invalidated": []any{"bob"}}, d2)
	_, err = s.VerifyAudit(ctx)
	require.NoError(t, err, "the chain verifies after revisions")
	_, err = s.RecordAudit(ctx, versioning.AuditRecord{Actor: root, Action: versioning.ActionRevise, Service: "rev"})
	require.ErrorIs(t, err, versioning.ErrInvalid, "only the store records revisions")
}

// testReviseRefusals: who may revise, with what, and that a refusal writes
// nothing.
func testReviseRefusals(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	v1 := live(t, s, "rr", 1)
	p, err := s.Propose(ctx, revision("rr", v1.Number, 10, `{"n": 1}`))
	require.NoError(t, err)
	human := propose(t, s, "rr", v1.Number, 11)
	before := auditCount(t, h)

	tests := []struct {
		name   string
		number int64
		edit   func(p *versioning.Proposal)
		is     error
		fields []string
		msg    string
	}{
		{"another operator", p.Number, func(q *versioning.Proposal) { q.Author, q.Source = alice, "" }, versioning.ErrForbidden, nil, "only the author (engine)"},
		{"an admin", p.Number, func(q *versioning.Proposal) { q.Author, q.Source = root, "" }, versioning.ErrForbidden, nil, "only the author (engine)"},
		{"the engine on a person's proposal", human.Number, func(q *versioning.Proposal) {}, versioning.ErrForbidden, nil, "only the author (alice)"},
		{"a viewer", p.Number, func(q *versioning.Proposal) { q.Author = viewer }, versioning.ErrForbidden, nil, "revise rule changes"},
		{"another base", p.Number, func(q *versioning.Proposal) { q.BaseVersion = 0 }, versioning.ErrConflict, nil, "propose anew"},
		{"another source", p.Number, func(q *versioning.Proposal) { q.Source = versioning.SourceImport }, versioning.ErrInvalid, []string{"source"}, ""},
		{"no such version", 99, func(q *versioning.Proposal) {}, versioning.ErrNotFound, nil, ""},
		{"bad input", 0, func(q *versioning.Proposal) {
			q.Service, q.AutoApply, q.Rebase, q.Replaces = "other", true, true, 3
		}, versioning.ErrInvalid, []string{"number", "service", "auto_apply", "rebase", "replaces"}, ""},
		{"bad proposal", p.Number, func(q *versioning.Proposal) {
			q.Reason, q.Evidence = "", []byte("nope")
		}, versioning.ErrInvalid, []string{"reason", "evidence"}, ""},
		{"ruleset of another service", p.Number, func(q *versioning.Proposal) { q.Ruleset = ruleset("other", 5) }, versioning.ErrInvalid, []string{"service"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := revision("rr", v1.Number, 20, `{"n": 2}`)
			tt.edit(&q)
			_, err := s.Revise(ctx, "rr", tt.number, q)
			require.ErrorIs(t, err, tt.is)
			if tt.fields != nil {
				require.Equal(t, tt.fields, fieldsOf(t, err))
			}
			if tt.msg != "" {
				require.ErrorContains(t, err, tt.msg)
			}
		})
	}
	require.Equal(t, before, auditCount(t, h))
	got, err := s.Get(ctx, "rr", p.Number)
	require.NoError(t, err)
	require.Equal(t, 0, got.Revision)
	require.Equal(t, p.Checksum, got.Checksum)
	require.JSONEq(t, `{"n": 1}`, string(got.Evidence))

	// A failed transaction writes nothing either.
	var fail sync.Once
	h2 := f(t, Options{BeforeCommit: func(op string, attempt int) error {
		if op != "revise" {
			return nil
		}
		var err error
		fail.Do(func() { err = fmt.Errorf("%w: injected", errPermanent) })
		return err
	}})
	w1 := live(t, h2.Store, "rr", 1)
	q, err := h2.Store.Propose(ctx, revision("rr", w1.Number, 10, `{}`))
	require.NoError(t, err)
	n := auditCount(t, h2)
	_, err = h2.Store.Revise(ctx, "rr", q.Number, revision("rr", w1.Number, 20, `{}`))
	require.ErrorIs(t, err, versioning.ErrUnavailable)
	require.Equal(t, n, auditCount(t, h2))
	got, err = h2.Store.Get(ctx, "rr", q.Number)
	require.NoError(t, err)
	require.Equal(t, 0, got.Revision)
	require.Equal(t, q.Checksum, got.Checksum)

	// A transient failure runs the whole revision again: it counts once.
	var attempts int
	h3 := f(t, Options{BeforeCommit: func(op string, attempt int) error {
		if op != "revise" {
			return nil
		}
		attempts = attempt
		if attempt == 1 {
			return sqlstore.ErrRetryable
		}
		return nil
	}})
	w1 = live(t, h3.Store, "rr", 1)
	q, err = h3.Store.Propose(ctx, revision("rr", w1.Number, 10, `{}`))
	require.NoError(t, err)
	n = auditCount(t, h3)
	got, err = h3.Store.Revise(ctx, "rr", q.Number, revision("rr", w1.Number, 20, `{}`))
	require.NoError(t, err)
	require.Equal(t, 2, attempts)
	require.Equal(t, 1, got.Revision)
	require.Equal(t, n+1, auditCount(t, h3))
}

var errPermanent = fmt.Errorf("permanent failure")

// testReviseApproveRace: a revision of the ruleset and the approval that
// would complete the proposal race; whichever commits first wins, and a
// version never goes live with approvals given to other content. Bob has
// approved revision 0 (one of two); carol approves the checksum she
// reviewed while the engine revises the ruleset.
func testReviseApproveRace(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	const n = 12
	reviewed := make([]string, n)
	numbers := make([]int64, n)
	for i := range n {
		svc := fmt.Sprintf("race%d", i)
		v1 := live(t, s, svc, 1)
		_, err := s.SetPolicy(ctx, versioning.Policy{Service: svc, ApprovalsRequired: 2}, root)
		require.NoError(t, err)
		p, err := s.Propose(ctx, revision(svc, v1.Number, 10, `{}`))
		require.NoError(t, err)
		_, err = s.Approve(ctx, svc, p.Number, bob, "one")
		require.NoError(t, err)
		reviewed[i], numbers[i] = p.Checksum, p.Number
	}
	approveErr := make([]error, n)
	reviseErr := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		svc := fmt.Sprintf("race%d", i)
		wg.Go(func() {
			<-start
			_, approveErr[i] = s.ApproveChecksum(ctx, svc, numbers[i], reviewed[i], carol, "two")
		})
		wg.Go(func() {
			<-start
			_, reviseErr[i] = s.Revise(ctx, svc, numbers[i], revision(svc, 1, 20, `{"revised": true}`))
		})
	}
	close(start)
	wg.Wait()
	approvalsWon := 0
	for i := range n {
		svc := fmt.Sprintf("race%d", i)
		v, err := s.Get(ctx, svc, numbers[i])
		require.NoError(t, err)
		switch {
		case approveErr[i] == nil:
			approvalsWon++
			require.ErrorIs(t, reviseErr[i], versioning.ErrInvalidState, svc)
			require.Equal(t, versioning.StateApproved, v.State, svc)
			require.Equal(t, reviewed[i], v.Checksum, "%s: live content is what both approved", svc)
			require.Equal(t, 0, v.Revision, svc)
			require.Len(t, v.Approvals, 2, svc)
		default:
			require.NoError(t, reviseErr[i], svc)
			require.ErrorIs(t, approveErr[i], versioning.ErrConflict, svc)
			require.Equal(t, versioning.StateProposed, v.State, svc)
			require.Equal(t, checksumOf(t, svc, 20), v.Checksum, svc)
			require.Equal(t, 1, v.Revision, svc)
			require.Empty(t, v.Approvals, "%s: bob's approval went with the old ruleset", svc)
		}
	}
	t.Logf("the approval won %d of %d races, the revision %d", approvalsWon, n, n-approvalsWon)
	_, err := s.VerifyAudit(ctx)
	require.NoError(t, err)
}
