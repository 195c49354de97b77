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

// TestFencedWriteIsRefusedWhenATickIsClaimedWhileItRuns: a fenced write
// that passed its check after locking the service row, held before its
// audit entry is inserted (another session holds rule_audit in SHARE
// mode) while another replica claims a later tick, is refused with a
// *FencedError once released, and nothing of it lands: no version, no
// audit entry, no outbox row, no approval, the service row unchanged.
func TestFencedWriteIsRefusedWhenATickIsClaimedWhileItRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgURL(t)
	s, err := postgres.Open(ctx, postgres.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	claimer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer claimer.Close(context.Background())

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
	// What a write may change: every table it writes, and the service row.
	state := func() [6]string {
		t.Helper()
		var n [6]string
		for i, q := range []string{
			`SELECT count(*)::text FROM rule_versions`,
			`SELECT count(*)::text FROM rule_audit`,
			`SELECT count(*)::text FROM rule_outbox`,
			`SELECT count(*)::text FROM rule_approvals`,
			`SELECT string_agg(state || ':' || revision::text, ',' ORDER BY number) FROM rule_versions`,
			`SELECT last_number || ':' || coalesce(active_number, 0) || ':' || approvals_required || ':' || policy_revision FROM rule_services WHERE name = 'checkout'`,
		} {
			if err := admin.QueryRow(ctx, q).Scan(&n[i]); err != nil {
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
		{"approve", func(ctx context.Context) error {
			_, err := s.Approve(ctx, "checkout", open.Number, bob, "ok")
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
			_, err := s.SetPolicy(ctx, versioning.Policy{Service: "checkout", ApprovalsRequired: 2}, admins)
			return err
		}},
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, w := range writes {
		// The writer leads under tick fence (no later tick claimed yet), so
		// the check right after its service lock passes.
		fence := base.Add(time.Duration(i) * 10 * time.Second)
		newer := fence.Add(5 * time.Second)
		before := state()

		lock, err := admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lock.Exec(ctx, `LOCK TABLE rule_audit IN SHARE MODE`); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			done <- w.write(versioning.WithFence(ctx, versioning.Fence{Tick: fence, Holder: "engine-a"}))
		}()
		// Wait until the write waits for rule_audit: it has locked the
		// service row and checked its fence.
		for waiting := false; !waiting; {
			select {
			case err := <-done:
				t.Fatalf("%s finished while rule_audit was held: %v", w.name, err)
			default:
			}
			if err := claimer.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
				WHERE relation = 'rule_audit'::regclass AND NOT granted)`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
		}
		// Another replica claims a later tick, committed on its own.
		if _, err := claimer.Exec(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ($1, 'engine-b')`, newer); err != nil {
			t.Fatal(err)
		}
		if err := lock.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		err = <-done
		var fe *versioning.FencedError
		if !errors.As(err, &fe) || !errors.Is(err, versioning.ErrFenced) {
			t.Fatalf("%s held while tick %s was claimed: %v, want a *FencedError", w.name, newer, err)
		}
		if !fe.Newer.Equal(newer) || fe.By != "engine-b" || !fe.Fence.Tick.Equal(fence) || fe.Fence.Holder != "engine-a" {
			t.Fatalf("%s: %+v, want tick %s older than %s claimed by engine-b", w.name, fe, fence, newer)
		}
		if got := state(); got != before {
			t.Fatalf("%s refused, yet it changed versions, audit entries, outbox rows, approvals, states, the service: %v → %v",
				w.name, before, got)
		}
	}
	if act, err := s.Active(ctx, "checkout"); err != nil || act.Number != 2 {
		t.Fatalf("active %+v, %v: want v2", act, err)
	}
	if _, err := s.VerifyAudit(ctx); err != nil {
		t.Fatalf("audit chain after the refusals: %v", err)
	}
}
