package recommend

import (
	"context"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/rules/versioning"
)

// TestRolledBackChangeIsNotAppliedAgainByItself: a cut that applied itself
// and was rolled back (by the guardrail, or a person) is not applied again by
// the engine within RollbackHold: the same cut, still inside the band, waits
// for a person, while a change the other way applies itself. Without the
// hold the engine cut, the guardrail rolled back, the engine cut again, every
// few minutes.
func TestRolledBackChangeIsNotAppliedAgainByItself(t *testing.T) {
	ctx := context.Background()
	clk, st, v1 := checkoutAt500(t)
	pr := &Proposer{Store: st, Clock: clk}
	cut := func(base int64) Recommendation {
		return Recommendation{Service: "checkout", Base: base, Ruleset: ruleset(475), Reason: "small cut",
			Evidence: &Evidence{Ceiling: Ceiling{From: 1000, To: 950, Instances: 2, Routes: map[string]float64{"api": 950}}}}
	}
	first, err := pr.Submit(ctx, cut(v1.Number), DefaultBand())
	if err != nil || !first.AutoApplied {
		t.Fatalf("the first cut: %+v %v", first, err)
	}
	clk.Advance(5 * time.Minute)
	back, err := st.RollbackFrom(ctx, "checkout", first.Version.Number, v1.Number, EngineActor(), "goodput regressed")
	if err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Minute)
	again, err := pr.Submit(ctx, cut(back.Number), DefaultBand())
	if err != nil {
		t.Fatal(err)
	}
	if again.AutoApplied || again.Version.State != versioning.StateProposed ||
		!strings.Contains(again.Policy, "rolled back") || !strings.Contains(again.Policy, "v2") {
		t.Fatalf("the rolled-back cut again: auto-applied %v, %s, policy %q; want it proposed, waiting for a person, saying v2 was rolled back",
			again.AutoApplied, again.Version.State, again.Policy)
	}

	raise := Recommendation{Service: "checkout", Base: back.Number, Ruleset: ruleset(525), Reason: "small raise",
		Evidence: &Evidence{Ceiling: Ceiling{From: 1000, To: 1050, Instances: 2, Routes: map[string]float64{"api": 1050}}}}
	up, err := pr.Submit(ctx, raise, DefaultBand())
	if err != nil || !up.AutoApplied {
		t.Fatalf("a raise after a rolled-back cut: %+v %v; want it applied", up, err)
	}

	// After the hold, a cut applies itself again.
	clk.Advance(DefaultRollbackHold)
	later := cut(up.Version.Number)
	later.Evidence.Ceiling.From = 1050
	later.Evidence.Ceiling.To = 1000
	later.Ruleset = ruleset(500)
	done, err := pr.Submit(ctx, later, DefaultBand())
	if err != nil || !done.AutoApplied {
		t.Fatalf("a cut after the hold: %+v %v; want it applied", done, err)
	}
}

// TestCeilingFlappingWithinTheHourWaitsForAPerson: the band bounds how far
// the automatic changes of an hour move the ceiling in all, not only where
// they leave it: a cut that applied itself followed by a raise back to
// where it started (1000 -> 920 -> 1000, back and forth every few minutes)
// is no change by the net measure, yet it is 17% of movement; the raise
// waits for a person within the hour, and applies itself after it.
func TestCeilingFlappingWithinTheHourWaitsForAPerson(t *testing.T) {
	ctx := context.Background()
	clk, st, v1 := checkoutAt500(t)
	pr := &Proposer{Store: st, Clock: clk}
	move := func(base int64, from, to float64) Recommendation {
		return Recommendation{Service: "checkout", Base: base, Ruleset: ruleset(to / 2), Reason: "move",
			Evidence: &Evidence{Ceiling: Ceiling{From: from, To: to, Instances: 2, Routes: map[string]float64{"api": to}}}}
	}
	cut, err := pr.Submit(ctx, move(v1.Number, 1000, 920), DefaultBand())
	if err != nil || !cut.AutoApplied {
		t.Fatalf("the cut: %+v %v", cut, err)
	}
	clk.Advance(5 * time.Minute)
	back, err := pr.Submit(ctx, move(cut.Version.Number, 920, 1000), DefaultBand())
	if err != nil {
		t.Fatal(err)
	}
	if back.AutoApplied || back.Version.State != versioning.StateProposed || !strings.Contains(back.Policy, "moved the ceiling by") {
		t.Fatalf("the raise back: auto-applied %v, %s, policy %q; want it waiting for a person", back.AutoApplied, back.Version.State, back.Policy)
	}
	if _, err := st.Withdraw(ctx, "checkout", back.Version.Number, EngineActor(), "test"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(BandWindow)
	later, err := pr.Submit(ctx, move(cut.Version.Number, 920, 1000), DefaultBand())
	if err != nil || !later.AutoApplied {
		t.Fatalf("the raise after the hour: %+v %v; want it applied", later, err)
	}
}
