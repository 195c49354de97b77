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
