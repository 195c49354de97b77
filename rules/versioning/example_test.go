package versioning_test

import (
	"context"
	"errors"
	"fmt"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/rules"
)

// A change goes live only after a second person approves it; the outbox then
// holds it for the relay, and the audit chain records who did what.
func Example() {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator, versioning.RoleApprover}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}

	rs := &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
		Name: "pay", Match: rules.Match{PathPrefix: "/pay"}, RateLimit: &rules.RateLimit{Rate: 100}}}}
	v1, _ := s.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "first limits"})
	_, err = s.Approve(ctx, "checkout", v1.Number, alice, "")
	fmt.Println(err)
	v1, _ = s.Approve(ctx, "checkout", v1.Number, bob, "ok")
	fmt.Println(v1.Number, v1.State, v1.Active)

	next := rs.Clone()
	next.Routes[0].RateLimit.Rate = 150
	v2, _ := s.Propose(ctx, versioning.Proposal{BaseVersion: v1.Number, Ruleset: next, Author: alice, Reason: "promo day"})
	for _, c := range versioning.Diff(v1.Ruleset, v2.Ruleset) {
		fmt.Println(c.Path, c.Op, string(c.Old), "->", string(c.New))
	}

	items, _ := s.ClaimOutbox(ctx, 10, 30e9)
	fmt.Println(len(items), items[0].Service, items[0].Version)
	rep, _ := s.VerifyAudit(ctx)
	fmt.Println(rep.Entries, "audit entries verified")
	// Output:
	// versioning: self-approval refused: alice proposed version 1 of checkout and cannot approve it; another approver must
	// 1 approved true
	// routes[pay].rate_limit.rate changed 100 -> 150
	// 1 checkout 1
	// 4 audit entries verified
}

// The author revises an open proposal in place: the same number, a higher
// revision. A new ruleset invalidates the approval already given, and an
// approval of the checksum reviewed before the revision is refused.
func ExampleStore_Revise() {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	admin := versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}
	engine := versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	carol := versioning.Actor{Name: "carol", Roles: []versioning.Role{versioning.RoleApprover}}
	if _, err := s.SetPolicy(ctx, versioning.Policy{Service: "checkout", ApprovalsRequired: 2}, admin); err != nil {
		panic(err)
	}
	rate := func(r float64) *rules.Ruleset {
		return &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
			Name: "pay", Match: rules.Match{PathPrefix: "/pay"}, RateLimit: &rules.RateLimit{Rate: r}}}}
	}
	p := versioning.Proposal{Ruleset: rate(100), Author: engine, Source: versioning.SourceEngine,
		Reason: "load score 0.9", Evidence: []byte(`{"load_score": 0.9}`)}
	v, _ := s.Propose(ctx, p)
	reviewed := v.Checksum
	v, _ = s.Approve(ctx, "checkout", v.Number, bob, "one of two")
	fmt.Println("v", v.Number, "revision", v.Revision, "approvals", len(v.Approvals))

	p.Evidence = []byte(`{"load_score": 0.93}`)
	v, _ = s.Revise(ctx, "checkout", v.Number, p)
	fmt.Println("v", v.Number, "revision", v.Revision, "approvals", len(v.Approvals), string(v.Evidence))

	p.Ruleset, p.Reason = rate(80), "load score 0.97"
	v, _ = s.Revise(ctx, "checkout", v.Number, p)
	fmt.Println("v", v.Number, "revision", v.Revision, "approvals", len(v.Approvals), v.Ruleset.Routes[0].RateLimit.Rate)

	_, err = s.ApproveChecksum(ctx, "checkout", v.Number, reviewed, carol, "")
	fmt.Println(errors.Is(err, versioning.ErrConflict))
	// Output:
	// v 1 revision 0 approvals 1
	// v 1 revision 1 approvals 1 {"load_score":0.93}
	// v 1 revision 2 approvals 0 80
	// true
}

// A rollback names the version it was decided against: two people preview
// "roll back v2" and confirm; the second is refused, since the first's
// rollback replaced v2, and nothing is written.
func ExampleStore_RollbackFrom() {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	for base, r := range []float64{100, 150} {
		rs := &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
			Name: "pay", Match: rules.Match{PathPrefix: "/pay"}, RateLimit: &rules.RateLimit{Rate: r}}}}
		v, _ := s.Propose(ctx, versioning.Proposal{BaseVersion: int64(base), Ruleset: rs, Author: alice, Reason: "limits"})
		if _, err := s.Approve(ctx, "checkout", v.Number, bob, "ok"); err != nil {
			panic(err)
		}
	}
	active, _ := s.Active(ctx, "checkout")

	v, _ := s.RollbackFrom(ctx, "checkout", active.Number, 1, alice, "errors went up")
	fmt.Println("v", v.Number, "parent", v.Parent, "rollback of", v.RollbackOf)

	_, err = s.RollbackFrom(ctx, "checkout", active.Number, 1, bob, "errors went up")
	var ce *versioning.ConflictError
	fmt.Println(errors.As(err, &ce), ce.Expected, ce.Active)
	fmt.Println(err)
	// Output:
	// v 3 parent 2 rollback of 1
	// true 2 3
	// versioning: conflict: roll back checkout to version 1: version 3 is active, not the expected version 2
}
