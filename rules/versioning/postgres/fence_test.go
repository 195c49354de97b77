package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/sdk/rules"
)

// TestFencedWritesAreRefusedOnceALaterTickIsClaimed: every write that
// changes a service, made under the fence of tick t0 after t0+10s was
// claimed by another replica, fails with a *FencedError naming both ticks
// and the new leader, and writes nothing (no version, no audit entry, no
// outbox row). The same writes under the newest tick, or without a fence
// (a person's), go through.
func TestFencedWritesAreRefusedOnceALaterTickIsClaimed(t *testing.T) {
	ctx := context.Background()
	url := pgURL(t)
	reg := prometheus.NewRegistry()
	s, err := postgres.Open(ctx, postgres.Options{URL: url, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	engine := versioning.Actor{Name: "engine", Roles: []versioning.Role{versioning.RoleOperator}}
	admins := versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin, versioning.RoleApprover}}
	rs := func(rate float64) *rules.Ruleset {
		return &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}}}}
	}
	// checkout: v1 live, v2 live (v1 superseded), v3 an open proposal.
	for i, rate := range []float64{100, 90} {
		p, err := s.Propose(ctx, versioning.Proposal{Ruleset: rs(rate), Author: alice, Reason: "start", BaseVersion: int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	open, err := s.Propose(ctx, versioning.Proposal{Ruleset: rs(80), Author: engine, Reason: "cut", BaseVersion: 2,
		Source: versioning.SourceEngine})
	if err != nil {
		t.Fatal(err)
	}
	stale, current := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	for tick, by := range map[time.Time]string{stale: "engine-a", current: "engine-b"} {
		if _, err := admin.Exec(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ($1, $2)`, tick, by); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() [3]int {
		t.Helper()
		var n [3]int
		for i, table := range []string{"rule_versions", "rule_audit", "rule_outbox"} {
			if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n[i]); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	writes := []struct {
		name  string
		write func(ctx context.Context) error
	}{
		{"propose", func(ctx context.Context) error {
			_, err := s.Propose(ctx, versioning.Proposal{Ruleset: rs(85), Author: engine, Reason: "cut", BaseVersion: 2,
				Source: versioning.SourceEngine, Replaces: open.Number})
			return err
		}},
		{"revise", func(ctx context.Context) error {
			_, err := s.Revise(ctx, "checkout", open.Number, versioning.Proposal{Ruleset: rs(75), Author: engine, Reason: "cut more", BaseVersion: 2})
			return err
		}},
		{"withdraw", func(ctx context.Context) error {
			_, err := s.Withdraw(ctx, "checkout", open.Number, engine, "replaced")
			return err
		}},
		{"rollback from", func(ctx context.Context) error {
			_, err := s.RollbackFrom(ctx, "checkout", 2, 1, engine, "guardrail: regression")
			return err
		}},
		{"set policy", func(ctx context.Context) error {
			_, err := s.SetPolicy(ctx, versioning.Policy{Service: "checkout", ApprovalsRequired: 1}, admins)
			return err
		}},
	}
	before := counts()
	aCtx := versioning.WithFence(ctx, versioning.Fence{Tick: stale, Holder: "engine-a"})
	for _, w := range writes {
		err := w.write(aCtx)
		var fe *versioning.FencedError
		if !errors.As(err, &fe) || !errors.Is(err, versioning.ErrFenced) {
			t.Fatalf("%s under the stale tick: %v, want a *FencedError", w.name, err)
		}
		if !fe.Newer.Equal(current) || fe.By != "engine-b" || !fe.Fence.Tick.Equal(stale) {
			t.Fatalf("%s: %+v, want tick %s older than %s claimed by engine-b", w.name, fe, stale, current)
		}
		want := "versioning: fenced: engine-a not leading any more: tick 2026-01-01T00:00:00Z is older than tick 2026-01-01T00:00:10Z claimed by engine-b"
		if err.Error() != want {
			t.Fatalf("%s: error %q, want %q", w.name, err, want)
		}
		if got := counts(); got != before {
			t.Fatalf("%s under the stale tick: versions, audit entries, outbox rows %v → %v", w.name, before, got)
		}
	}
	if got := testutil.ToFloat64(opCounter(t, reg, "rollback", "fenced")); got != 1 {
		t.Fatalf("rollback operations counted fenced: %v, want 1", got)
	}
	if act, err := s.Active(ctx, "checkout"); err != nil || act.Number != 2 {
		t.Fatalf("active %+v, %v: want v2", act, err)
	}

	// The leader, under the newest tick, and a person, under none.
	bCtx := versioning.WithFence(ctx, versioning.Fence{Tick: current, Holder: "engine-b"})
	if _, err := s.Revise(bCtx, "checkout", open.Number, versioning.Proposal{Ruleset: rs(75), Author: engine, Reason: "cut more", BaseVersion: 2}); err != nil {
		t.Fatalf("the leader's revision: %v", err)
	}
	rb, err := s.RollbackFrom(bCtx, "checkout", 2, 1, engine, "guardrail: regression")
	if err != nil {
		t.Fatalf("the leader's rollback: %v", err)
	}
	if _, err := s.RollbackFrom(ctx, "checkout", rb.Number, 2, alice, "the regression was elsewhere"); err != nil {
		t.Fatalf("a person's rollback: %v", err)
	}
}
