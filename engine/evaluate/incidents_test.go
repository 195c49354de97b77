package evaluate

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
)

// fillSlowdown writes, every 15 s for twelve minutes, the latency buckets of
// services calling the next one from two instances: most calls take 10-25
// ms, and from minute six the calls to svc-1 take 100-500 ms; svc-2's calls
// stop at minute eight (stale markers).
func fillSlowdown(t *testing.T, db *embedded.DB, t0 time.Time) {
	t.Helper()
	les := []string{"0.005", "0.025", "0.1", "0.5", "+Inf"}
	var counts [4][2][5]float64
	for step := 0; step <= 48; step++ {
		ts := t0.Add(time.Duration(step) * 15 * time.Second).UnixMilli()
		app := db.Appender(context.Background())
		for s := range 4 {
			svc, ds := fmt.Sprintf("svc-%d", s), fmt.Sprintf("svc-%d", (s+1)%4)
			for i := range 2 {
				slow := ds == "svc-1" && step >= 24
				for k, le := range les {
					calls := float64(40 + 7*s + 3*i + step%5)
					switch {
					case slow && k >= 3, !slow && k >= 1:
						counts[s][i][k] += calls
					case slow && k == 2, !slow && k == 0:
						counts[s][i][k] += calls / 4
					}
					v := counts[s][i][k]
					if s == 2 && step >= 32 {
						v = math.Float64frombits(value.StaleNaN)
					}
					l := labels.FromStrings("__name__", signals.DownstreamP99.Metric, "job", "sdk", "instance", fmt.Sprintf("%s-%d", svc, i),
						"service", svc, "downstream", ds, "le", le)
					if _, err := app.Append(0, l, ts, v); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSlowDownstreamsFromSamples: the downstream latency incidents and
// baselines are the same, to the bit, whether the p99 is read from the
// embedded store's samples or asked of its PromQL engine, cycle after cycle
// through a slowdown and a downstream whose calls stop (its baseline is
// dropped once ForgetAfter passed).
func TestSlowDownstreamsFromSamples(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fillSlowdown(t, db, t0)
	guard := memGuard(t)
	direct := &Evaluator{o: Options{Breakers: db, Guard: guard, ForgetAfter: 2 * time.Minute}}
	viaPromQL := &Evaluator{o: Options{Breakers: promqlOnly{db}, Guard: guard, ForgetAfter: 2 * time.Minute}}
	byKey := func(a, b guardrail.Incident) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Downstream, b.Downstream), cmp.Compare(a.Kind, b.Kind))
	}
	slow := 0
	for at := t0.Add(time.Minute); at.Before(t0.Add(13 * time.Minute)); at = at.Add(10 * time.Second) {
		want, err := viaPromQL.slowDownstreams(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		got, err := direct.slowDownstreams(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(want, byKey)
		slices.SortFunc(got, byKey)
		if !slices.Equal(want, got) {
			t.Fatalf("%s: incidents\n%+v\nvia PromQL\n%+v", at.Sub(t0), got, want)
		}
		if len(direct.latency) != len(viaPromQL.latency) {
			t.Fatalf("%s: %d baselines, via PromQL %d", at.Sub(t0), len(direct.latency), len(viaPromQL.latency))
		}
		for key, w := range viaPromQL.latency {
			g := direct.latency[key]
			if g == nil || math.Float64bits(g.p99) != math.Float64bits(w.p99) || g.n != w.n || g.slow != w.slow || g.slowFor != w.slowFor {
				t.Fatalf("%s: %s baseline %+v, via PromQL %+v", at.Sub(t0), key, g, w)
			}
		}
		for _, in := range got {
			if in.Kind == SlowDownstream {
				slow++
			}
		}
	}
	if slow == 0 {
		t.Fatal("no slow downstream in the slowdown")
	}
	if _, ok := direct.latency["svc-2/svc-3"]; ok {
		t.Fatal("baseline kept for calls that stopped")
	}
}

// TestDownstreamBaselineOutlivesAGapInItsSeries: checkout's calls to
// payments turn four times slower than their learnt p99, then checkout's
// series are gone for a minute (its scrapes failing under the load, say)
// while payments stays slow. The baseline and detector are kept across the
// gap, so the slowdown is still an incident afterwards (the guardrail does
// not blame checkout's version for it); dropping them learned the slow p99
// anew as the usual one and the incident vanished.
func TestDownstreamBaselineOutlivesAGapInItsSeries(t *testing.T) {
	ctx := context.Background()
	var p99 float64
	e := &Evaluator{o: Options{Breakers: downstreamSource{p99: &p99}, Guard: memGuard(t)}}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := func(v float64) []guardrail.Incident {
		t.Helper()
		p99, at = v, at.Add(10*time.Second)
		got, err := e.slowDownstreams(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for range 30 {
		step(0.05)
	}
	if got := step(0.2); len(got) != 1 {
		t.Fatalf("no incident at 4x: %+v", got)
	}
	for range 6 { // the caller's series gone for a minute
		step(math.NaN())
	}
	for i := range 10 {
		if got := step(0.2); len(got) != 1 || got[0].Kind != SlowDownstream {
			t.Fatalf("cycle %d after the gap, dependency still 4x slower: incidents %+v", i, got)
		}
	}
}
