package guardrail

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// TestSmallStepsDoNotAddUp: each version raises p99 latency by 20%
// (tolerance 25%), a minute after the last passed. v2 passes; v3 is within
// tolerance of v2's window but 44% above v1's, the window before the
// oldest ancestor within Drift, and is rolled back to v2 by the cumulative
// check, read alone or in batches. With Drift negative every step passes.
func TestSmallStepsDoNotAddUp(t *testing.T) {
	tests := []struct {
		name  string
		batch bool
		drift time.Duration
	}{
		{"alone", false, 0},
		{"batched", true, 0},
		{"drift off", false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
			st := memStore(t, clk)
			var acts []time.Time
			f := fakeSeries{timed: func(m Metric, ts time.Time, _ int) float64 {
				i := int(ts.Unix() / 10) // the jitter of the instant, however read
				v := consistent(func(m Metric, _ bool, i int) float64 { return healthy(m, i) })(m, false, i)
				if m == LatencyP99 {
					for _, a := range acts[1:] {
						if !ts.Before(a.Add(30 * time.Second)) {
							v *= 1.2
						}
					}
				}
				return v
			}}
			var series Series = &countingSeries{by: map[string]fakeSeries{"checkout": f}}
			if tt.batch {
				series = batched{series.(*countingSeries)}
			}
			rec := events.NewRecorder(10)
			g, err := New(Options{Store: st, Series: series, Drift: tt.drift, Events: rec})
			if err != nil {
				t.Fatal(err)
			}
			var got []Decision
			for i, rate := range []float64{100, 110, 121, 133} {
				p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: int64(i), Ruleset: ruleset(rate), Author: alice, Reason: "step"})
				if err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Minute)
				if _, err := st.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
					t.Fatal(err)
				}
				act, _ := st.Active(ctx, "checkout")
				acts = append(acts, act.ActivatedAt)
				if i == 0 {
					clk.Advance(10 * time.Minute)
					continue
				}
				var final []Decision
				for range 40 {
					clk.Advance(10 * time.Second)
					f := observeActive(t, g, st, clk)
					if final = append(final, f...); len(final) > 0 {
						break
					}
				}
				if len(final) != 1 {
					t.Fatalf("v%d: final %+v, want one decision", act.Number, final)
				}
				got = append(got, final[0])
				if final[0].Verdict != Pass {
					break
				}
			}
			if tt.drift < 0 {
				if len(got) != 3 || got[2].Verdict != Pass {
					t.Fatalf("decisions %+v, want v2, v3, v4 passed", got)
				}
				return
			}
			if len(got) != 2 || got[0].Verdict != Pass || got[1].Version != 3 || got[1].Verdict != Regression || got[1].RollbackVersion == 0 {
				t.Fatalf("decisions %+v, want v2 passed, v3 rolled back", got)
			}
			if !strings.Contains(got[1].Reason, "since before v2") || !strings.Contains(got[1].Reason, "p99 latency") {
				t.Fatalf("reason %q does not name the cumulative check", got[1].Reason)
			}
			var cum []Check
			for _, c := range got[1].Checks {
				if !c.Since.IsZero() {
					cum = append(cum, c)
				}
			}
			if len(cum) != len(Metrics) || !cum[0].Since.Equal(acts[1]) {
				t.Fatalf("cumulative checks %+v, want %d since v2's activation %s", cum, len(Metrics), acts[1])
			}
			for _, c := range got[1].Checks {
				if c.Since.IsZero() && c.Verdict == Regression {
					t.Fatalf("check against v3's own window regressed: %+v", c)
				}
			}
			act, _ := st.Active(ctx, "checkout")
			if act.RollbackOf != 2 {
				t.Fatalf("active v%d rollback of v%d, want v2", act.Number, act.RollbackOf)
			}
			if evs := rec.Events(events.AutoRollback); len(evs) != 1 {
				t.Fatalf("events %s", fmt.Sprint(evs))
			}
		})
	}
}

// TestTrafficDriftIsNotRolledBack: v2 and v3 raise the ceiling and change
// no latency; over the 40 minutes between them p99 rises 35% (the window
// before v2 to v3's after window), with the offered load (a daily ramp,
// below LoadRatio) or alone (the service drifting). Each passes against
// its own parent's window; the cumulative check against the window before
// v2 does not hold the drift against v3: the load moved beyond 1.1x, or
// the versions' own steps add up to a few percent only.
func TestTrafficDriftIsNotRolledBack(t *testing.T) {
	for _, withLoad := range []bool{true, false} {
		t.Run(fmt.Sprintf("load=%v", withLoad), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
			st := memStore(t, clk)
			var rampFrom time.Time
			factor := func(ts time.Time) float64 {
				if rampFrom.IsZero() || ts.Before(rampFrom) {
					return 1
				}
				return 1 + 0.35*min(float64(ts.Sub(rampFrom))/float64(40*time.Minute), 1)
			}
			f := fakeSeries{timed: func(m Metric, ts time.Time, _ int) float64 {
				v := consistent(func(m Metric, _ bool, i int) float64 { return healthy(m, i) })(m, false, int(ts.Unix()/10))
				if m == LatencyP99 || m == OfferedLoad && withLoad {
					v *= factor(ts)
				}
				return v
			}}
			rec := events.NewRecorder(10)
			g, err := New(Options{Store: st, Series: f, Drift: time.Hour, Events: rec})
			if err != nil {
				t.Fatal(err)
			}
			var got []Decision
			for i, rate := range []float64{100, 110, 121} {
				p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: int64(i), Ruleset: ruleset(rate), Author: alice, Reason: "step"})
				if err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Minute)
				if _, err := st.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					clk.Advance(10 * time.Minute)
					continue
				}
				if i == 1 {
					rampFrom = clk.Now().Add(time.Minute)
				}
				for range 40 {
					clk.Advance(10 * time.Second)
					final := observeActive(t, g, st, clk)
					if got = append(got, final...); len(final) > 0 {
						break
					}
				}
				if i == 1 {
					clk.Advance(40 * time.Minute)
				}
			}
			if len(got) != 2 || got[0].Verdict != Pass || got[1].Verdict != Pass {
				t.Fatalf("decisions %+v, want v2 and v3 passed", got)
			}
			if act, _ := st.Active(ctx, "checkout"); act.RollbackOf != 0 || len(rec.Events(events.AutoRollback)) != 0 {
				t.Fatalf("active v%d, a rollback of v%d: a version that changed no latency was rolled back for the drift", act.Number, act.RollbackOf)
			}
			want := "not held against the versions: their own steps add up to"
			if withLoad {
				want = "offered load moved"
			}
			var cum int
			for _, c := range got[1].Checks {
				if c.Since.IsZero() {
					continue
				}
				cum++
				if c.Metric == LatencyP99 && (c.Verdict != Inconclusive || !strings.Contains(c.Detail, want)) {
					t.Fatalf("cumulative p99 check %+v, want inconclusive: %s", c, want)
				}
			}
			if cum == 0 {
				t.Fatalf("v3 checks %+v, want cumulative checks", got[1].Checks)
			}
		})
	}
}

// v2 raises p99 20% and is superseded 20s later by v3 (no change); v3 is
// judged against the window before v2 (+20%, passes). v4 raises p99 20%
// again: 44% above the window before v2, as in TestSmallStepsDoNotAddUp,
// which rolls such a v3 back. v2's decision is Superseded: its effect is
// inside v3's own, so the versions' own steps still add up and v4 is
// rolled back.
func TestSupersededAncestorCountsInTheCumulativeCheck(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	st := memStore(t, clk)
	var bumps []time.Time
	f := fakeSeries{timed: func(m Metric, ts time.Time, _ int) float64 {
		i := int(ts.Unix() / 10)
		v := consistent(func(m Metric, _ bool, i int) float64 { return healthy(m, i) })(m, false, i)
		if m == LatencyP99 {
			for _, a := range bumps {
				if !ts.Before(a.Add(30 * time.Second)) {
					v *= 1.2
				}
			}
		}
		return v
	}}
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: f, Drift: time.Hour, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(base int64, rate float64) versioning.Version {
		p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: base, Ruleset: ruleset(rate), Author: alice, Reason: "step"})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		if _, err := st.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
		act, _ := st.Active(ctx, "checkout")
		return act
	}
	run := func() []Decision {
		var got []Decision
		for range 60 {
			clk.Advance(10 * time.Second)
			f := observeActive(t, g, st, clk)
			got = append(got, f...)
			for _, d := range f {
				if d.Verdict != Superseded {
					return got
				}
			}
		}
		return got
	}
	publish(0, 100)
	clk.Advance(10 * time.Minute)
	v2 := publish(1, 110)
	bumps = append(bumps, v2.ActivatedAt)
	clk.Advance(10 * time.Second)
	observeActive(t, g, st, clk)
	publish(2, 115) // v3 supersedes v2, changes nothing
	if got := run(); len(got) == 0 || got[len(got)-1].Version != 3 || got[len(got)-1].Verdict != Pass {
		t.Fatalf("after v3: %+v, want v3 passed", got)
	}
	v4 := publish(3, 121)
	bumps = append(bumps, v4.ActivatedAt)
	run()
	if act, _ := st.Active(ctx, "checkout"); act.RollbackOf == 0 {
		t.Fatalf("active v%d: v4, 44%% p99 above the window before v2 (v2 +20%%, v4 +20%%), not rolled back", act.Number)
	}
}
