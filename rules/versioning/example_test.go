package versioning_test

import (
	"context"
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
