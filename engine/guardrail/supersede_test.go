package guardrail

import (
	"context"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// publish makes a version with the given rate limit live at the clock's
// time, based on the active one.
func publish(t *testing.T, st versioning.Store, rate float64) versioning.Version {
	t.Helper()
	ctx := context.Background()
	act, err := st.Active(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: act.Number, Ruleset: ruleset(rate), Author: alice, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.Approve(ctx, "checkout", p.Number, bob, "ok")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// observeActive runs one Observe at the clock's time over the active version.
func observeActive(t *testing.T, g *Guard, st versioning.Store, clk *clock.Fake) []Decision {
	t.Helper()
	ctx := context.Background()
	act, err := st.Active(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	final, err := g.Observe(ctx, clk.Now(), []versioning.Version{act})
	if err != nil {
		t.Fatal(err)
	}
	return final
}

func decisionOf(ds []Decision, version int64) (Decision, bool) {
	for _, d := range ds {
		if d.Version == version {
			return d, true
		}
	}
	return Decision{}, false
}

// TestVersionReplacedBeforeItsVerdictIsRecordedAsSuperseded: a version
// replaced before its watch reached a verdict gets a final "superseded"
// decision (kept by Decisions, returned once, one guardrail_superseded
// event) naming the version that replaced it and when. The next watch
// carries on the chain (baseline before the unjudged version, rollback to
// the version before it) unless it or the replaced one is a rollback.
func TestVersionReplacedBeforeItsVerdictIsRecordedAsSuperseded(t *testing.T) {
	for _, byRollback := range []bool{false, true} {
		t.Run(map[bool]string{false: "by a publication", true: "by a person's rollback"}[byRollback], func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st, at := liveVersions(t, clk)
			rec := events.NewRecorder(10)
			g, err := New(Options{Store: st, Series: fakeSeries{switchAt: at, value: func(m Metric, _ bool, i int) float64 { return healthy(m, i) }}, Events: rec})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				clk.Advance(10 * time.Second)
				observeActive(t, g, st, clk)
			}
			clk.Advance(10 * time.Second)
			var v3 versioning.Version
			if byRollback {
				if v3, err = st.Rollback(ctx, "checkout", 1, alice, "manual"); err != nil {
					t.Fatal(err)
				}
			} else {
				v3 = publish(t, st, 20)
			}
			clk.Advance(10 * time.Second)
			final := observeActive(t, g, st, clk)
			d, ok := decisionOf(final, 2)
			if !ok || d.Verdict != Superseded || !d.Final || d.SupersededBy != 3 || !d.SupersededAt.Equal(at.Add(40*time.Second)) ||
				!d.ActivatedAt.Equal(at) || !d.At.Equal(clk.Now()) {
				t.Fatalf("final %+v, want v2 superseded by v3 40s after it went live", final)
			}
			for _, want := range []string{"superseded by v3", "2026-01-01T00:20:40Z", "40s after", "before a verdict"} {
				if !strings.Contains(d.Reason, want) {
					t.Errorf("reason %q does not say %q", d.Reason, want)
				}
			}
			if carried := strings.Contains(d.Reason, "v3 is judged against the window before v2 and a regression of it rolls back to v1"); carried == byRollback {
				t.Errorf("reason %q: says the chain carries on %v, want %v", d.Reason, carried, !byRollback)
			}
			if got, ok := decisionOf(g.Decisions(), 2); !ok || got.Verdict != Superseded {
				t.Fatalf("Decisions() %+v, want v2's superseded decision kept", g.Decisions())
			}
			evs := rec.Events(events.GuardrailSuperseded)
			if len(evs) != 1 || evs[0].Version != 2 || evs[0].Severity != events.Warning || !strings.Contains(evs[0].Message, "v3") {
				t.Fatalf("events %+v, want one guardrail_superseded for v2", rec.Events(""))
			}
			if !g.Watching("checkout") {
				t.Fatal("v3 is not watched")
			}
			w, _ := decisionOf(g.Decisions(), v3.Number)
			if byRollback {
				// A rollback is never rolled back and starts afresh.
				if w.Parent != 0 || len(w.Unjudged) != 0 || !w.Baseline.IsZero() {
					t.Fatalf("rollback's watch %+v, want no parent and no chain", w)
				}
			} else if w.Parent != 1 || len(w.Unjudged) != 1 || w.Unjudged[0].Version != 2 || !w.Baseline.Equal(at) {
				t.Fatalf("v3's watch %+v, want it judged against the window before v2 and rolled back to v1", w)
			}
			// Observed again: recorded once.
			clk.Advance(10 * time.Second)
			observeActive(t, g, st, clk)
			if evs := rec.Events(events.GuardrailSuperseded); len(evs) != 1 {
				t.Fatalf("events %+v, want one", evs)
			}
			// v4 replaces v3 before its verdict too.
			clk.Advance(10 * time.Second)
			publish(t, st, 30)
			clk.Advance(10 * time.Second)
			if d, ok := decisionOf(observeActive(t, g, st, clk), 3); !ok || d.Verdict != Superseded || d.SupersededBy != 4 {
				t.Fatalf("v3's decision %+v, want superseded by v4", d)
			}
			w, _ = decisionOf(g.Decisions(), 4)
			if byRollback {
				// The period before a rollback is no judged-good one.
				if w.Parent != 3 || len(w.Unjudged) != 0 || !w.Baseline.IsZero() {
					t.Fatalf("v4's watch %+v, want it judged afresh, rolled back to the rollback v3", w)
				}
			} else if w.Parent != 1 || len(w.Unjudged) != 2 || !w.Baseline.Equal(at) {
				t.Fatalf("v4's watch %+v, want it judged against the window before v2 and rolled back to v1", w)
			}
		})
	}
}

// TestRegressionAfterUnjudgedVersionsRollsBackPastThem: v2 regresses, v3
// replaces it 40s later before a verdict; v3 is judged against the window
// before v2 (not v2's bad period) and rolled back to v1, the version in
// force before the chain, with a reason naming the skipped v2.
func TestRegressionAfterUnjudgedVersionsRollsBackPastThem(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	rec := events.NewRecorder(10)
	// v2 (live at at) raises the error ratio; v3 does not fix it.
	bad := fakeSeries{timed: func(m Metric, ts time.Time, i int) float64 {
		if m == ErrorRatio && !ts.Before(at) {
			return 0.5
		}
		return healthy(m, i)
	}}
	g, err := New(Options{Store: st, Series: bad, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.Advance(10 * time.Second)
		observeActive(t, g, st, clk)
	}
	clk.Advance(10 * time.Second)
	publish(t, st, 20)
	var got Decision
	for i := 0; i < 30 && !got.Final; i++ {
		clk.Advance(10 * time.Second)
		if d, ok := decisionOf(observeActive(t, g, st, clk), 3); ok {
			got = d
		}
	}
	if got.Verdict != Regression || !got.Final || got.Parent != 1 || got.RollbackVersion == 0 {
		t.Fatalf("v3 decision %+v, want a regression rolled back to v1", got)
	}
	for _, c := range got.Checks {
		if c.Metric == ErrorRatio && !(c.Before.Mean < 0.01 && c.Before.N == 12) {
			t.Fatalf("error ratio before %+v, want the healthy window before v2", c.Before)
		}
	}
	const note = "rolled back v3 to v1; v2 went live 40s before v3 and was never judged"
	if !strings.Contains(got.Reason, note) {
		t.Fatalf("reason %q does not say %q", got.Reason, note)
	}
	act, err := st.Active(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	if act.Number != got.RollbackVersion || act.RollbackOf != 1 || act.Parent != 3 || act.Ruleset.Routes[0].RateLimit.Rate != 100 ||
		!strings.Contains(act.Reason, note) {
		t.Fatalf("active v%d rollback_of %d parent %d reason %q, want v3 rolled back to v1", act.Number, act.RollbackOf, act.Parent, act.Reason)
	}
	if evs := rec.Events(events.AutoRollback); len(evs) != 1 || !strings.Contains(evs[0].Message, "v3 rolled back to v1") {
		t.Fatalf("events %+v", rec.Events(""))
	}
}

// TestChainLongerThanTheWatchPeriodIsJudgedAgainstTheOldestBaselineWithinReach:
// versions replaced every 2 minutes for 8 minutes (longer than Settle +
// MaxWait): the last is judged against the window before the oldest of them
// that went live within Settle + MaxWait of it, read in full (the grid
// points are kept for it), and still rolled back to the version before the
// whole chain.
func TestChainLongerThanTheWatchPeriodIsJudgedAgainstTheOldestBaselineWithinReach(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	t6 := at.Add(8 * time.Minute)
	cs := &countingSeries{by: map[string]fakeSeries{"checkout": {timed: func(m Metric, ts time.Time, i int) float64 {
		switch {
		case m == ErrorRatio && !ts.Before(t6):
			return 0.5
		case m == ShedRatio:
			return 1 - healthy(AdmittedShare, i)
		}
		return healthy(m, i)
	}}}}
	g, err := New(Options{Store: st, Series: batched{cs}})
	if err != nil {
		t.Fatal(err)
	}
	// v3..v6 go live 2 minutes apart, each before the one before it passed.
	var got Decision
	for i := 0; i < 120 && !got.Final; i++ {
		clk.Advance(10 * time.Second)
		if el := clk.Now().Sub(at); el%(2*time.Minute) == 0 && el <= 8*time.Minute {
			publish(t, st, float64(10+el/time.Minute))
		}
		for _, d := range observeActive(t, g, st, clk) {
			if d.Version < 6 && d.Verdict != Superseded {
				t.Fatalf("v%d decided %s, want superseded", d.Version, d.Verdict)
			}
			if d.Version == 5 && !strings.Contains(d.Reason, "v6 is judged against the window before v3 and a regression of it rolls back to v1") {
				t.Fatalf("v5's reason %q does not name v6's baseline and target", d.Reason)
			}
			if d.Version == 6 {
				got = d
			}
		}
	}
	if got.Verdict != Regression || got.Parent != 1 || got.RollbackVersion == 0 {
		t.Fatalf("v6 decision %+v, want a regression rolled back to v1", got)
	}
	if !got.Baseline.Equal(at.Add(2*time.Minute)) || len(got.Unjudged) != 4 {
		t.Fatalf("baseline %s unjudged %+v, want the window before v3 (the oldest within the watch period) and v2..v5", got.Baseline, got.Unjudged)
	}
	for _, c := range got.Checks {
		if c.Before.N != 12 && c.Metric != ShedRatio {
			t.Fatalf("%s: %d samples before, want the full window of 12", c.Metric, c.Before.N)
		}
	}
	if !strings.Contains(got.Reason, "rolled back v6 to v1; v2, v3, v4 and v5 went live 8m0s, 6m0s, 4m0s and 2m0s before v6 and were never judged") {
		t.Fatalf("reason %q", got.Reason)
	}
	if act, _ := st.Active(ctx, "checkout"); act.RollbackOf != 1 {
		t.Fatalf("active %+v, want a rollback to v1", act)
	}
}

// TestRollbackPastUnjudgedVersionsRacingAPersonIsRefused: a rollback past
// unjudged versions keeps the racing rule: a person's rollback that lands
// first is kept, and the decision does not claim a rollback.
func TestRollbackPastUnjudgedVersionsRacingAPersonIsRefused(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner, at := liveVersions(t, clk)
	st := &racingStore{Store: inner}
	g, rec := regressionGuard(t, st, at)
	clk.Advance(10 * time.Second)
	observeActive(t, g, st, clk)
	clk.Advance(30 * time.Second)
	publish(t, st, 20)
	clk.Advance(5 * time.Minute)
	final := observeActive(t, g, st, clk)
	d, ok := decisionOf(final, 3)
	if !ok || d.Verdict != Regression || d.RollbackVersion != 0 || !strings.Contains(d.Reason, "(not rolled back: v4 replaced it since)") ||
		strings.Contains(d.Reason, "rolled back v3") {
		t.Fatalf("decisions %+v, want v3's regression not rolled back past the person's v4", final)
	}
	if act, _ := inner.Active(ctx, "checkout"); act.Number != 4 || act.Author != "alice" {
		t.Fatalf("active v%d by %s, want the person's rollback v4 kept", act.Number, act.Author)
	}
	if evs := rec.Events(events.AutoRollback); len(evs) != 0 {
		t.Fatalf("events %+v, want no auto_rollback", evs)
	}
}

// TestIncidentBeforeAChainedBaselineIsKeptWhileJudged: v3 replaces v2
// before a verdict and is judged against the window before v2; an incident
// in that window keeps v3 from passing for as long as v3 is judged, though
// it lies further back than Window + Settle + MaxWait.
func TestIncidentBeforeAChainedBaselineIsKeptWhileJudged(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	g, err := New(Options{Store: st, Series: fakeSeries{switchAt: at, value: func(m Metric, _ bool, i int) float64 { return healthy(m, i) }}})
	if err != nil {
		t.Fatal(err)
	}
	incident := Incident{Service: "checkout", Kind: "breaker_open", Downstream: "payments", What: "the breaker to payments is open"}
	g.Note(at.Add(-30*time.Second), []Incident{incident})
	g.Note(at.Add(-20*time.Second), nil)
	clk.Set(at)
	for clk.Now().Before(at.Add(6 * time.Minute)) {
		clk.Advance(10 * time.Second)
		g.Note(clk.Now(), nil)
		observeActive(t, g, st, clk)
	}
	if d, _ := decisionOf(g.Decisions(), 2); d.Final {
		t.Fatalf("v2 %+v, want it still judged (the incident before it keeps it from passing)", d)
	}
	publish(t, st, 20)
	for clk.Now().Before(at.Add(11 * time.Minute)) {
		clk.Advance(10 * time.Second)
		g.Note(clk.Now(), nil)
		observeActive(t, g, st, clk)
		d, ok := decisionOf(g.Decisions(), 3)
		if !ok || !d.Baseline.Equal(at) {
			t.Fatalf("v3 %+v, want it judged against the window before v2", d)
		}
		if d.Verdict == Pass {
			t.Fatalf("v3 passed at %s (%s after v2) with the incident before v2 in its window before: %s", clk.Now(), clk.Now().Sub(at), d.Reason)
		}
		if d.Verdict == Inconclusive && !strings.Contains(strings.Join(d.Confounders, "; "), incident.What) {
			t.Fatalf("v3 inconclusive at %s without naming the incident: %+v", clk.Now(), d)
		}
	}
}
