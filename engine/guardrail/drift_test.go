package guardrail

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
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
			st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
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
					act, _ := st.Active(ctx, "checkout")
					f, err := g.Observe(ctx, clk.Now(), []versioning.Version{act})
					if err != nil {
						t.Fatal(err)
					}
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
