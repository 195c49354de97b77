package guardrail

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// rollbackDown refuses every rollback while down, as a store in failover.
type rollbackDown struct {
	versioning.Store
	down bool
}

func (s *rollbackDown) RollbackFrom(ctx context.Context, service string, from, to int64, by versioning.Actor, reason string) (versioning.Version, error) {
	if s.down {
		return versioning.Version{}, versioning.ErrUnavailable
	}
	return s.Store.RollbackFrom(ctx, service, from, to, by, reason)
}

// TestRestartJudgesARegressionWhoseRollbackWasLost: a regression whose
// rollback the store refused (a database failover) when the engine restarts
// (a deploy, a crash, the lead moving), later than Settle + MaxWait after
// activation, loses its retry with the Guard; the new Guard judges the
// version after the fact on its own windows and rolls it back.
func TestRestartJudgesARegressionWhoseRollbackWasLost(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner, at := liveVersions(t, clk)
	st := &rollbackDown{Store: inner, down: true}
	v2, _ := inner.Active(ctx, "checkout")
	g, _ := regressionGuard(t, st, at)
	for range 40 { // 40 cycles of 10 s: the store refuses rollbacks
		clk.Advance(10 * time.Second)
		_, _ = g.Observe(ctx, clk.Now(), []versioning.Version{v2})
	}
	if ds := g.Decisions(); !g.Watching("checkout") || len(ds) != 1 || ds[0].Final || !strings.Contains(ds[0].Reason, "rollback failed") {
		t.Fatalf("old guard: decisions %+v, want an open regression to retry", ds)
	}
	st.down = false
	g2, rec := regressionGuard(t, st, at) // the restarted engine
	for range 30 {
		clk.Advance(10 * time.Second)
		if _, err := g2.Observe(ctx, clk.Now(), []versioning.Version{v2}); err != nil {
			t.Fatal(err)
		}
	}
	cur, _ := inner.Active(ctx, "checkout")
	if cur.Number == v2.Number || cur.RollbackOf != 1 {
		t.Fatalf("active v%d: regressed v%d still live %s after activation", cur.Number, v2.Number, clk.Now().Sub(at))
	}
	ds := g2.Decisions()
	if len(ds) < 1 || ds[len(ds)-1].Version != 2 || ds[len(ds)-1].Verdict != Regression || !ds[len(ds)-1].Late || ds[len(ds)-1].RollbackVersion != cur.Number {
		t.Fatalf("decisions %+v, want v2 a late regression rolled back as v%d", ds, cur.Number)
	}
	if evs := rec.Events(events.AutoRollback); len(evs) != 1 || evs[0].Version != cur.Number {
		t.Fatalf("events %+v, want one auto_rollback", evs)
	}
}

// lateSeries is the series of checkout as regressionGuard's, or healthy,
// plain (Samples) or batched (BatchSeries, grid points); none before gone
// (the metrics store lost them).
func lateSeries(at time.Time, bad, batch bool, gone time.Time) Series {
	value := consistent(func(m Metric, after bool, i int) float64 {
		if bad && after && m == ErrorRatio {
			return 0.5
		}
		return healthy(m, i)
	})
	f := fakeSeries{timed: func(m Metric, ts time.Time, i int) float64 {
		if ts.Before(gone) {
			return math.NaN()
		}
		return value(m, !ts.Before(at.Add(30*time.Second)), i)
	}}
	cs := &countingSeries{by: map[string]fakeSeries{"checkout": f}}
	if batch {
		return batched{cs}
	}
	return cs
}

// TestLateVersionIsJudgedOnItsOwnWindows: a version that went live while
// no Guard watched it (the engine down for 30 minutes) is judged on the
// windows around its activation: rolled back when it regressed, passed
// when healthy, read alone or in batches (grid points kept long enough).
func TestLateVersionIsJudgedOnItsOwnWindows(t *testing.T) {
	for _, batch := range []bool{false, true} {
		for _, bad := range []bool{false, true} {
			t.Run(fmt.Sprintf("batch=%v/bad=%v", batch, bad), func(t *testing.T) {
				ctx := context.Background()
				clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				st, at := liveVersions(t, clk)
				v2, _ := st.Active(ctx, "checkout")
				clk.Advance(30 * time.Minute)
				rec := events.NewRecorder(10)
				g, err := New(Options{Store: st, Series: lateSeries(at, bad, batch, time.Time{}), Events: rec})
				if err != nil {
					t.Fatal(err)
				}
				var final []Decision
				for range 3 {
					clk.Advance(10 * time.Second)
					f := observeActive(t, g, st, clk)
					final = append(final, f...)
				}
				if len(final) != 1 || final[0].Version != 2 || !final[0].Late || !strings.Contains(final[0].Reason, "judged after the fact") {
					t.Fatalf("final %+v, want one late decision on v2", final)
				}
				act, _ := st.Active(ctx, "checkout")
				if bad {
					if final[0].Verdict != Regression || final[0].RollbackVersion != act.Number || act.RollbackOf != 1 {
						t.Fatalf("final %+v, active v%d: want v2 rolled back", final[0], act.Number)
					}
					if evs := rec.Events(events.AutoRollback); len(evs) != 1 {
						t.Fatalf("events %+v, want one auto_rollback", evs)
					}
					return
				}
				if final[0].Verdict != Pass || act.Number != v2.Number || g.Watching("checkout") || len(rec.Events("")) != 0 {
					t.Fatalf("final %+v, active v%d, watching %v, events %+v: want v2 passed", final[0], act.Number, g.Watching("checkout"), rec.Events(""))
				}
			})
		}
	}
}

// TestLateVersionWithoutDataIsInconclusive: a version live for 30 minutes
// when the Guard first sees it, whose windows the metrics store no longer
// holds, cannot be judged: a final inconclusive decision saying so, one
// event, and Watching ends (proposals resume, as after a live watch ends
// inconclusive); a new version is watched as usual.
func TestLateVersionWithoutDataIsInconclusive(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st, at := liveVersions(t, clk)
			clk.Advance(30 * time.Minute)
			rec := events.NewRecorder(10)
			g, err := New(Options{Store: st, Series: lateSeries(at, false, batch, clk.Now().Add(-10*time.Minute)), Events: rec})
			if err != nil {
				t.Fatal(err)
			}
			observe := func() []Decision {
				clk.Advance(10 * time.Second)
				f := observeActive(t, g, st, clk)
				return f
			}
			var final []Decision
			for range 5 {
				final = append(final, observe()...)
			}
			if len(final) != 1 || final[0].Verdict != Inconclusive || !final[0].Late || !final[0].Final {
				t.Fatalf("final %+v, want v2 inconclusive after the fact", final)
			}
			if evs := rec.Events(events.GuardrailInconclusive); len(evs) != 1 || !strings.Contains(evs[0].Message, "could not judge it after the fact") ||
				!strings.Contains(evs[0].Message, "proposals resume") {
				t.Fatalf("events %+v, want one guardrail_inconclusive", evs)
			}
			if g.Watching("checkout") {
				t.Fatal("proposals still held on top of a version that ended inconclusive")
			}
			// A person publishes v3: watched live, proposals held while
			// it is judged, released once it passes.
			p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: 2, Ruleset: ruleset(50), Author: alice, Reason: "fix"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				observe()
			}
			if !g.Watching("checkout") {
				t.Fatal("v3 not watched")
			}
			final = nil
			for range 20 {
				final = append(final, observe()...)
			}
			if len(final) != 1 || final[0].Version != 3 || final[0].Verdict != Pass || final[0].Late || g.Watching("checkout") {
				t.Fatalf("final %+v, watching %v: want v3 passed live", final, g.Watching("checkout"))
			}
			if evs := rec.Events(""); len(evs) != 1 {
				t.Fatalf("events %+v, want only the first", evs)
			}
		})
	}
}

// TestVersionOlderThanRecoverIsNotJudged: a version live for longer than
// Recover when first seen is taken as judged: no decision, no read, and
// proposals are not held.
func TestVersionOlderThanRecoverIsNotJudged(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	clk.Advance(25 * time.Hour)
	cs := lateSeries(at, true, false, time.Time{}).(*countingSeries)
	g, err := New(Options{Store: st, Series: cs})
	if err != nil {
		t.Fatal(err)
	}
	act, _ := st.Active(ctx, "checkout")
	for range 3 {
		clk.Advance(10 * time.Second)
		if f, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil || len(f) != 0 {
			t.Fatalf("final %+v, err %v", f, err)
		}
	}
	if len(g.Decisions()) != 0 || g.Watching("checkout") || cs.single != 0 {
		t.Fatalf("decisions %+v, watching %v, %d reads: want none", g.Decisions(), g.Watching("checkout"), cs.single)
	}
}

// TestHeldLateVersionStaysOpen: a cycle held (the engine's reads partial)
// right after a restart does not end a late version's watch, although
// MaxWait after its activation has long passed (it ends MaxWait after this
// Guard first saw it, see TestHeldLateVersionEndsAtMaxWait): it stays
// open, proposals held, and is judged at the next cycle that is not held.
func TestHeldLateVersionStaysOpen(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	clk.Advance(30 * time.Minute)
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: lateSeries(at, true, false, time.Time{}), Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := st.Active(ctx, "checkout")
	for range 3 {
		clk.Advance(10 * time.Second)
		final, err := g.Hold(ctx, clk.Now(), []versioning.Version{v2}, "metrics partial: error_ratio: store unavailable")
		if err != nil || len(final) != 0 {
			t.Fatalf("final %+v, err %v: want nothing decided while held", final, err)
		}
	}
	if ds := g.Decisions(); len(ds) != 1 || ds[0].Final || ds[0].Verdict != Inconclusive || !g.Watching("checkout") || len(rec.Events("")) != 0 {
		t.Fatalf("decisions %+v, events %+v: want v2 open, held", ds, rec.Events(""))
	}
	clk.Advance(10 * time.Second)
	final, err := g.Observe(ctx, clk.Now(), []versioning.Version{v2})
	if err != nil {
		t.Fatal(err)
	}
	if len(final) != 1 || final[0].Verdict != Regression || final[0].RollbackVersion == 0 {
		t.Fatalf("final %+v, want v2 rolled back", final)
	}
}

// TestLateRegressionThatNoLongerShowsIsNotRolledBack: v2 went live during
// an incident (p99 50% higher for 4 minutes) that the live Guard knew of
// and this one does not; an hour later a restarted engine judges v2 after
// the fact, finds the regression on its first full window, but not on the
// current one: v2 is not rolled back, the decision is final Inconclusive
// and says so. A regression that still shows is rolled back (see
// TestLateVersionIsJudgedOnItsOwnWindows).
func TestLateRegressionThatNoLongerShowsIsNotRolledBack(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	f := fakeSeries{timed: func(m Metric, ts time.Time, _ int) float64 {
		v := consistent(func(m Metric, _ bool, i int) float64 { return healthy(m, i) })(m, false, int(ts.Unix()/10))
		if m == LatencyP99 && !ts.Before(at) && ts.Before(at.Add(4*time.Minute)) {
			v *= 1.5
		}
		return v
	}}
	clk.Advance(time.Hour)
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: f, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := st.Active(ctx, "checkout")
	var final []Decision
	for range 3 {
		clk.Advance(10 * time.Second)
		fs, err := g.Observe(ctx, clk.Now(), []versioning.Version{v2})
		if err != nil {
			t.Fatal(err)
		}
		final = append(final, fs...)
	}
	if act, _ := st.Active(ctx, "checkout"); act.Number != v2.Number || len(rec.Events(events.AutoRollback)) != 0 {
		t.Fatalf("active v%d (rollback of v%d): v2 rolled back for a regression that no longer shows", act.Number, act.RollbackOf)
	}
	if len(final) != 1 || !final[0].Late || !final[0].Final || final[0].Verdict != Inconclusive ||
		!strings.Contains(final[0].Reason, "no longer shows on the current window") || !strings.Contains(final[0].Reason, "p99 latency") {
		t.Fatalf("final %+v, want v2 late, final inconclusive: the regression no longer shows", final)
	}
	if evs := rec.Events(events.GuardrailInconclusive); len(evs) != 1 {
		t.Fatalf("events %+v, want one guardrail_inconclusive", rec.Events(""))
	}
}

// TestHeldLateVersionEndsAtMaxWait: a late version whose cycles stay held
// (the engine's reads partial) ends inconclusive MaxWait after this Guard
// first saw it, with an event, so proposals resume.
func TestHeldLateVersionEndsAtMaxWait(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	clk.Advance(30 * time.Minute)
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: lateSeries(at, true, false, time.Time{}), Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := st.Active(ctx, "checkout")
	first := clk.Now().Add(10 * time.Second)
	maxWait := 3 * DefaultOptions().Window
	var final []Decision
	for len(final) == 0 && clk.Now().Before(first.Add(2*maxWait)) {
		clk.Advance(10 * time.Second)
		fs, err := g.Hold(ctx, clk.Now(), []versioning.Version{v2}, "metrics partial: error_ratio: store unavailable")
		if err != nil {
			t.Fatal(err)
		}
		final = fs
	}
	if len(final) != 1 || !final[0].Late || final[0].Verdict != Inconclusive || !final[0].Final || clk.Now().Sub(first) != maxWait {
		t.Fatalf("final %+v after %s held, want v2 final inconclusive after %s", final, clk.Now().Sub(first), maxWait)
	}
	if g.Watching("checkout") || len(rec.Events(events.GuardrailInconclusive)) != 1 {
		t.Fatalf("watching %v, events %+v: want the watch ended with one event", g.Watching("checkout"), rec.Events(""))
	}
}

// partialSince answers every read that reaches since as partial.
type partialSince struct {
	Series
	since time.Time
}

func (p partialSince) Samples(ctx context.Context, service string, m Metric, from, to time.Time, step time.Duration) ([]float64, error) {
	if !to.Before(p.since) {
		return nil, &PartialError{Read: fmt.Sprintf("%s %s", service, m), Warning: "store unavailable"}
	}
	return p.Series.Samples(ctx, service, m, from, to, step)
}

// TestLateRegressionUncheckedOnPartialData: a late regression whose current
// window reads partial is neither rolled back nor decided while MaxWait
// from when this Guard first saw it has not passed; then it ends final
// inconclusive, not rolled back.
func TestLateRegressionUncheckedOnPartialData(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	clk.Advance(30 * time.Minute)
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: partialSince{lateSeries(at, true, false, time.Time{}), clk.Now()}, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := st.Active(ctx, "checkout")
	first := clk.Now().Add(10 * time.Second)
	maxWait := 3 * DefaultOptions().Window
	var final []Decision
	for len(final) == 0 && clk.Now().Before(first.Add(2*maxWait)) {
		clk.Advance(10 * time.Second)
		if final, err = g.Observe(ctx, clk.Now(), []versioning.Version{v2}); err != nil {
			t.Fatal(err)
		}
		if len(final) == 0 && (!g.Watching("checkout") || !strings.Contains(g.Decisions()[0].Reason, "whether it still shows on the current window: metrics partial")) {
			t.Fatalf("decisions %+v, want v2 open, the current window held", g.Decisions())
		}
	}
	if act, _ := st.Active(ctx, "checkout"); act.Number != v2.Number {
		t.Fatalf("active v%d: rolled back on a partial read", act.Number)
	}
	if len(final) != 1 || final[0].Verdict != Inconclusive || !final[0].Final || clk.Now().Sub(first) != maxWait ||
		!strings.Contains(final[0].Reason, "cannot be confirmed on the current window") || len(rec.Events(events.GuardrailInconclusive)) != 1 {
		t.Fatalf("final %+v after %s, events %+v: want v2 final inconclusive after %s", final, clk.Now().Sub(first), rec.Events(""), maxWait)
	}
}

// As TestLateRegressionThatNoLongerShowsIsNotRolledBack (an incident at
// v2's activation the live Guard knew of), but the engine restarts 6h
// later at the daily peak: offered load 1.3x (below LoadRatio) and p99
// 35% higher than in the window before v2, for every version. The recheck
// does not take the ramp for the regression: under another load the
// current window cannot confirm it, and v2 stays.
func TestLateRecheckUnderAnotherLoadDoesNotRollBack(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	f := fakeSeries{timed: func(m Metric, ts time.Time, _ int) float64 {
		v := consistent(func(m Metric, _ bool, i int) float64 { return healthy(m, i) })(m, false, int(ts.Unix()/10))
		if m == LatencyP99 && !ts.Before(at) && ts.Before(at.Add(4*time.Minute)) {
			v *= 1.5
		}
		if !ts.Before(at.Add(5 * time.Hour)) {
			switch m {
			case LatencyP99:
				v *= 1.35
			case OfferedLoad:
				v *= 1.3
			}
		}
		return v
	}}
	clk.Advance(6 * time.Hour)
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: f, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := st.Active(ctx, "checkout")
	for range 3 {
		clk.Advance(10 * time.Second)
		fs, err := g.Observe(ctx, clk.Now(), []versioning.Version{v2})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range fs {
			if d.Verdict != Inconclusive || !strings.Contains(d.Reason, "cannot be confirmed") || !strings.Contains(d.Reason, "offered load moved 1.30x") {
				t.Fatalf("v%d %s: %s; want inconclusive, the load moved", d.Version, d.Verdict, d.Reason)
			}
		}
	}
	if act, _ := st.Active(ctx, "checkout"); act.Number != v2.Number {
		t.Fatalf("active v%d (rollback of v%d): v2 rolled back: the recheck compared a 6h-old baseline with the daily peak", act.Number, act.RollbackOf)
	}
}
