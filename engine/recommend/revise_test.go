package recommend

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/rules/versioning"
)

var carol = versioning.Actor{Name: "carol", Roles: []versioning.Role{versioning.RoleApprover}}

// TestProposerRevisesInPlace: with an open engine proposal waiting for
// approval, new recommendations revise it in place (same number): the
// evidence always (at most once per EvidenceRefresh while the ruleset
// stays), the ruleset when it moved beyond the deadband, which invalidates
// the approvals already given. A person's proposal is never touched; a
// proposal on another base is replaced, not stacked.
func TestProposerRevisesInPlace(t *testing.T) {
	ctx := context.Background()
	clk, st, v1 := checkoutAt500(t)
	if _, err := st.SetPolicy(ctx, versioning.Policy{Service: "checkout", ApprovalsRequired: 2}, admin); err != nil {
		t.Fatal(err)
	}
	manual := Band{Manual: true, MaxChangePerHour: 0.1}
	pr := &Proposer{Store: st, Clock: clk}
	// rec recommends perInstance req/s on 2 instances with a load score.
	rec := func(base int64, perInstance, load float64) Recommendation {
		return Recommendation{Service: "checkout", Base: base, Ruleset: ruleset(perInstance),
			Reason: fmt.Sprintf("cut the ceiling to %v", 2*perInstance),
			Evidence: &Evidence{At: clk.Now(), LoadScore: load,
				Ceiling: Ceiling{From: 1000, To: 2 * perInstance, Instances: 2, Routes: map[string]float64{"api": 2 * perInstance}}}}
	}
	submit := func(r Recommendation) Submitted {
		t.Helper()
		sub, err := pr.Submit(ctx, r, manual)
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	get := func(n int64) versioning.Version {
		t.Helper()
		v, err := st.Get(ctx, "checkout", n)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	evidence := func(v versioning.Version) (load float64, kept string) {
		t.Helper()
		var e struct {
			LoadScore   float64 `json:"load_score"`
			RulesetKept string  `json:"ruleset_kept"`
		}
		if err := json.Unmarshal(v.Evidence, &e); err != nil {
			t.Fatal(err)
		}
		return e.LoadScore, e.RulesetKept
	}
	rate := func(v versioning.Version) float64 { return v.Ruleset.Routes[0].RateLimit.Rate }

	open := submit(rec(v1.Number, 400, 0.9))
	n := open.Version.Number
	if open.Revised || open.Version.State != versioning.StateProposed {
		t.Fatalf("first proposal %+v", open)
	}
	if _, err := st.Approve(ctx, "checkout", n, bob, "one of two"); err != nil {
		t.Fatal(err)
	}

	// 10 s later, the same ruleset: nothing written (evidence refreshed at
	// most once a minute).
	clk.Advance(10 * time.Second)
	sub := submit(rec(v1.Number, 400, 0.91))
	if !sub.Unchanged || sub.Revised || sub.Version.Number != n {
		t.Fatalf("same ruleset within a minute: %+v", sub)
	}
	if load, _ := evidence(get(n)); load != 0.9 {
		t.Fatalf("evidence load %v, want the first 0.9", load)
	}
	// A minute on: the evidence is refreshed, bob's approval stays.
	clk.Advance(time.Minute)
	sub = submit(rec(v1.Number, 400, 0.92))
	v := get(n)
	if !sub.Unchanged || !sub.Revised || v.Revision != 1 || !v.RevisedAt.Equal(clk.Now()) || len(v.Approvals) != 1 {
		t.Fatalf("evidence refresh: %+v, stored %+v", sub, v)
	}
	if load, _ := evidence(v); load != 0.92 {
		t.Fatalf("evidence load %v, want 0.92", load)
	}
	// A 5% move inside the deadband: the ruleset and its reason stay, the
	// evidence says why; bob's approval stays.
	clk.Advance(time.Minute)
	sub = submit(rec(v1.Number, 420, 0.93))
	v = get(n)
	if !sub.Unchanged || !sub.Revised || sub.Kept == "" || v.Revision != 2 || rate(v) != 400 || v.Reason != open.Version.Reason || len(v.Approvals) != 1 {
		t.Fatalf("move inside the deadband: %+v, stored %+v", sub, v)
	}
	if load, kept := evidence(v); load != 0.93 || kept != sub.Kept {
		t.Fatalf("evidence load %v kept %q, want 0.93 and %q", load, kept, sub.Kept)
	}
	// A 25% move, 10 s later: the ruleset is revised at once and bob's
	// approval is invalidated.
	clk.Advance(10 * time.Second)
	sub = submit(rec(v1.Number, 300, 0.95))
	v = get(n)
	if sub.Unchanged || !sub.Revised || sub.Replaced != 0 || v.Revision != 3 || rate(v) != 300 || len(v.Approvals) != 0 ||
		v.Reason != "cut the ceiling to 600" {
		t.Fatalf("move beyond the deadband: %+v, stored %+v", sub, v)
	}
	proposed := func() []versioning.Version {
		t.Helper()
		vs, err := st.List(ctx, versioning.ListFilter{Service: "checkout", States: []versioning.State{versioning.StateProposed}})
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	if ps := proposed(); len(ps) != 1 || ps[0].Number != n {
		t.Fatalf("open proposals %+v, want v%d alone", ps, n)
	}

	// A person's proposal is never touched by the engine.
	human, err := st.Propose(ctx, versioning.Proposal{BaseVersion: v1.Number, Ruleset: ruleset(450), Author: alice, Reason: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	sub = submit(rec(v1.Number, 250, 0.97))
	if !sub.Revised || sub.Version.Number != n || get(n).Revision != 4 {
		t.Fatalf("engine revision next to a person's proposal: %+v", sub)
	}
	if h := get(human.Number); h.Revision != 0 || h.State != versioning.StateProposed || h.Checksum != human.Checksum {
		t.Fatalf("a person's proposal was touched: %+v", h)
	}

	// The person's proposal goes live: the engine's, based on v1, is
	// replaced by one on the new active version (withdrawn in the same
	// transaction), never stacked.
	for _, a := range []versioning.Actor{bob, carol} {
		if _, err := st.Approve(ctx, "checkout", human.Number, a, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(10 * time.Second)
	sub = submit(rec(human.Number, 250, 0.97))
	if sub.Revised || sub.Replaced != n || sub.Version.Number == n || sub.Version.Parent != human.Number {
		t.Fatalf("stale engine proposal: %+v", sub)
	}
	if old := get(n); old.State != versioning.StateWithdrawn {
		t.Fatalf("stale v%d is %s, want withdrawn", n, old.State)
	}
	if ps := proposed(); len(ps) != 1 || ps[0].Number != sub.Version.Number {
		t.Fatalf("open proposals %+v", ps)
	}

	// The audit log names every revision as the engine's; the chain holds.
	entries, err := st.Audit(ctx, versioning.AuditFilter{Service: "checkout", Action: versioning.ActionRevise})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Fatalf("%d revise entries, want 4", len(entries))
	}
	for _, e := range entries {
		if e.Actor != "engine" || e.Version != n {
			t.Fatalf("revise entry %+v", e)
		}
	}
	if !strings.Contains(string(entries[2].Detail), `"approvals_invalidated":["bob"]`) {
		t.Fatalf("ruleset revision detail %s", entries[2].Detail)
	}
	if _, err := st.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestProposerUnstacks: open engine proposals stacked by an older engine
// collapse into one: the newest is revised, the others withdrawn.
func TestProposerUnstacks(t *testing.T) {
	ctx := context.Background()
	clk, st, v1 := checkoutAt500(t)
	var stacked []int64
	for _, r := range []float64{400, 350} {
		v, err := st.Propose(ctx, versioning.Proposal{BaseVersion: v1.Number, Ruleset: ruleset(r), Author: EngineActor(),
			Source: versioning.SourceEngine, Reason: "stacked"})
		if err != nil {
			t.Fatal(err)
		}
		stacked = append(stacked, v.Number)
	}
	pr := &Proposer{Store: st, Clock: clk, EvidenceRefresh: -1}
	sub, err := pr.Submit(ctx, Recommendation{Service: "checkout", Base: v1.Number, Ruleset: ruleset(300), Reason: "cut",
		Evidence: &Evidence{Ceiling: Ceiling{From: 1000, To: 600, Instances: 2}}}, Band{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Revised || sub.Version.Number != stacked[1] || sub.Version.Revision != 1 {
		t.Fatalf("want the newest v%d revised, got %+v", stacked[1], sub)
	}
	old, err := st.Get(ctx, "checkout", stacked[0])
	if err != nil {
		t.Fatal(err)
	}
	if old.State != versioning.StateWithdrawn {
		t.Fatalf("older stacked v%d is %s, want withdrawn", old.Number, old.State)
	}
	// EvidenceRefresh < 0: the same ruleset is refreshed on every submission.
	again, err := pr.Submit(ctx, Recommendation{Service: "checkout", Base: v1.Number, Ruleset: ruleset(300), Reason: "cut",
		Evidence: &Evidence{Ceiling: Ceiling{From: 1000, To: 600, Instances: 2}}}, Band{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Revised || !again.Unchanged || again.Version.Revision != 2 {
		t.Fatalf("refresh every submission: %+v", again)
	}
}

// TestProposerDoesNotReproposeWhatAPersonRejected: a person rejects the
// engine's proposal of an 800 req/s ceiling; the same recommendation, or
// one inside the open deadband of it (840, +5%), is not proposed again on
// the next cycles; one beyond it (700, -12.5%) is.
func TestProposerDoesNotReproposeWhatAPersonRejected(t *testing.T) {
	ctx := context.Background()
	clk, st, v1 := checkoutAt500(t)
	cur, _ := currentCeiling(&v1, 2)
	recFor := func(to float64) Recommendation {
		rs, c, conc := apply(v1.Ruleset, cur, to, 2)
		return Recommendation{Service: "checkout", Base: v1.Number, Ruleset: rs, Reason: fmt.Sprintf("ceiling %v", to),
			Evidence: &Evidence{Ceiling: c, Concurrency: conc}}
	}
	manual := Band{Manual: true, MaxChangePerHour: 0.1}
	pr := &Proposer{Store: st, Clock: clk}
	open, err := pr.Submit(ctx, recFor(800), manual)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reject(ctx, "checkout", open.Version.Number, bob, "no: the promo starts"); err != nil {
		t.Fatal(err)
	}
	proposed := func() []versioning.Version {
		t.Helper()
		vs, err := st.List(ctx, versioning.ListFilter{Service: "checkout", States: []versioning.State{versioning.StateProposed}})
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	for _, to := range []float64{800, 840, 800} {
		clk.Advance(10 * time.Second)
		sub, err := pr.Submit(ctx, recFor(to), manual)
		if err != nil {
			t.Fatal(err)
		}
		if !sub.Unchanged || sub.Rejected != open.Version.Number || sub.Version.Number != open.Version.Number ||
			!strings.Contains(sub.Kept, "bob rejected v") {
			t.Fatalf("ceiling %v after the rejection: v%d %s, unchanged %v, rejected %d, kept %q", to, sub.Version.Number, sub.Version.State, sub.Unchanged, sub.Rejected, sub.Kept)
		}
		if vs := proposed(); len(vs) != 0 {
			t.Fatalf("ceiling %v: rejected v%d proposed again as v%d", to, open.Version.Number, vs[0].Number)
		}
	}
	clk.Advance(10 * time.Second)
	sub, err := pr.Submit(ctx, recFor(700), manual)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Unchanged || sub.Rejected != 0 || len(proposed()) != 1 {
		t.Fatalf("a recommendation beyond the deadband of the rejected one: v%d %s, unchanged %v, rejected %d", sub.Version.Number, sub.Version.State, sub.Unchanged, sub.Rejected)
	}
}
