package recommend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/sdk/clock"
)

// TestAStaleLeadersSubmissionIsRefusedAfterANewerTick: engine-a claimed
// the tick t0 and froze mid-cycle (a GC pause, a suspended VM) for longer
// than its lease, its context not ended yet; engine-b claimed t0+10s and
// leads. What engine-a submits when it resumes, computed from what it saw
// at t0 (an auto-applied cut, a proposal), is refused with ErrFenced and
// leaves nothing behind: no version, no audit entry, no outbox row. The
// leader's own submission under its tick goes through, and so does a
// person's change, which carries no fence.
func TestAStaleLeadersSubmissionIsRefusedAfterANewerTick(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	clk := clock.NewFake(t0)
	st, err := postgres.Open(ctx, postgres.Options{URL: url, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := st.Propose(ctx, versioning.Proposal{Ruleset: ruleset(500), Author: alice, Reason: "start"})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := st.Approve(ctx, "checkout", p.Number, bob, "ok")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	claim := func(tick time.Time, by string) {
		t.Helper()
		// As engine/leader's ClaimTick records a claim.
		if _, err := admin.Exec(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ($1, $2)`, tick, by); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() (versions, audit, outbox int) {
		t.Helper()
		for q, n := range map[string]*int{
			`SELECT count(*) FROM rule_versions`: &versions,
			`SELECT count(*) FROM rule_audit`:    &audit,
			`SELECT count(*) FROM rule_outbox`:   &outbox,
		} {
			if err := admin.QueryRow(ctx, q).Scan(n); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	stale, current := t0, t0.Add(10*time.Second)
	claim(stale, "engine-a")
	claim(current, "engine-b")
	clk.Set(current.Add(time.Second))

	pr := &Proposer{Store: st, Clock: clk}
	cut := func(to float64) Recommendation {
		return Recommendation{Service: "checkout", At: stale, Base: v1.Number, Ruleset: ruleset(to / 2), Reason: "small cut",
			Evidence: &Evidence{Ceiling: Ceiling{From: 1000, To: to, Instances: 2, Routes: map[string]float64{"api": to}}}}
	}
	big := func(to float64) Recommendation {
		r := cut(to)
		r.Reason = "large cut"
		return r
	}
	vs, as, os := counts()
	aCtx := versioning.WithFence(ctx, versioning.Fence{Tick: stale, Holder: "engine-a"})
	for _, tt := range []struct {
		name string
		rec  Recommendation
	}{
		{"auto-apply inside the band", cut(950)},
		{"proposal beyond the band", big(500)},
	} {
		sub, err := pr.Submit(aCtx, tt.rec, DefaultBand())
		var fe *versioning.FencedError
		if !errors.Is(err, versioning.ErrFenced) || !errors.As(err, &fe) {
			t.Fatalf("%s by the stale leader: v%d (active %v, auto-applied %v), %v; want ErrFenced",
				tt.name, sub.Version.Number, sub.Version.Active, sub.AutoApplied, err)
		}
		want := "engine-a not leading any more: tick 2026-01-01T00:00:00Z is older than tick 2026-01-01T00:00:10Z claimed by engine-b"
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %q does not say %q", tt.name, err, want)
		}
		if v, a, o := counts(); v != vs || a != as || o != os {
			t.Fatalf("%s by the stale leader left versions %d→%d, audit entries %d→%d, outbox rows %d→%d", tt.name, vs, v, as, a, os, o)
		}
	}
	act, err := st.Active(ctx, "checkout")
	if err != nil || act.Number != v1.Number {
		t.Fatalf("active %+v, %v; want v%d", act, err, v1.Number)
	}

	// The leader's own cut, under its tick, applies itself.
	bCtx := versioning.WithFence(ctx, versioning.Fence{Tick: current, Holder: "engine-b"})
	sub, err := pr.Submit(bCtx, cut(950), DefaultBand())
	if err != nil || !sub.AutoApplied {
		t.Fatalf("the leader's cut: v%d (auto-applied %v), %v; want it applied", sub.Version.Number, sub.AutoApplied, err)
	}
	// A person is never fenced, however new the ticks.
	claim(current.Add(10*time.Second), "engine-c")
	if _, err := st.Rollback(ctx, "checkout", v1.Number, alice, "back to the start"); err != nil {
		t.Fatalf("a person's rollback: %v", err)
	}
}
