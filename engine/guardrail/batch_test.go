package guardrail

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// countingSeries answers every service with its own fakeSeries and counts
// the reads: single (Samples) and, through batched, SamplesBy.
type countingSeries struct {
	by     map[string]fakeSeries
	mu     sync.Mutex
	single int
	batch  int
	// windows counts the reads of each service, metric and window.
	windows map[readKey]int
}

func (c *countingSeries) count(k readKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.windows == nil {
		c.windows = map[readKey]int{}
	}
	c.windows[k]++
}

func (c *countingSeries) Samples(ctx context.Context, service string, m Metric, from, to time.Time, step time.Duration) ([]float64, error) {
	c.mu.Lock()
	c.single++
	c.mu.Unlock()
	c.count(readKey{service, m, from, to})
	return c.by[service].Samples(ctx, service, m, from, to, step)
}

// batched is a countingSeries that also reads many services at once.
type batched struct{ *countingSeries }

func (b batched) SamplesBy(ctx context.Context, services []string, m Metric, from, to time.Time, step time.Duration) (map[string][]signals.Point, bool, error) {
	b.mu.Lock()
	b.batch++
	b.mu.Unlock()
	out := map[string][]signals.Point{}
	for _, svc := range services {
		b.count(readKey{svc, m, from, to})
		f := b.by[svc]
		i := 0
		for t := from; !t.After(to); t = t.Add(step) {
			var v float64
			if f.timed != nil {
				v = f.timed(m, t, i)
			} else {
				v = f.value(m, !t.Before(f.switchAt), i)
			}
			if !math.IsNaN(v) {
				out[svc] = append(out[svc], signals.Point{T: t, V: v})
			}
			i++
		}
	}
	return out, true, nil
}

// consistent makes the shares of a behaviour agree with its shed and error
// ratios as the queries do: the admitted share is 1 - shed ratio, the
// goodput share (1 - shed ratio) x (1 - error ratio).
func consistent(b func(m Metric, after bool, i int) float64) func(m Metric, after bool, i int) float64 {
	return func(m Metric, after bool, i int) float64 {
		shed := 1 - b(AdmittedShare, after, i)
		switch m {
		case ShedRatio:
			return shed
		case AdmittedShare:
			return 1 - shed
		case GoodputShare:
			return (1 - shed) * (1 - b(ErrorRatio, after, i))
		}
		return b(m, after, i)
	}
}

// TestBatchedReadsDecideAlike: a guard reading many services per query
// (BatchSeries) decides exactly as one reading each service alone, over
// versions activated at two times with regressions, healthy versions, an
// inconclusive one and one confounded by an incident; it reads with far
// fewer queries, and each window before activation once.
func TestBatchedReadsDecideAlike(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type behaviour func(m Metric, after bool, i int) float64
	errorsAfter := func(m Metric, after bool, i int) float64 {
		if after && m == ErrorRatio {
			return 0.2 + float64(i%2)*0.01
		}
		return healthy(m, i)
	}
	goodputDrop := func(m Metric, after bool, i int) float64 {
		if after && m == AdmittedShare {
			return 0.4 + float64(i%2)/100
		}
		return healthy(m, i)
	}
	fine := func(m Metric, _ bool, i int) float64 { return healthy(m, i) }
	noData := func(m Metric, after bool, i int) float64 {
		if after {
			return math.NaN()
		}
		return healthy(m, i)
	}
	services := []struct {
		name  string
		value behaviour
		late  bool // activated 20s after the others
	}{
		{"a", errorsAfter, false}, {"b", fine, false}, {"c", goodputDrop, false},
		{"d", noData, true}, {"e", fine, true}, {"f", errorsAfter, true}, {"g", fine, false},
	}
	ruleset := func(svc string, rate float64) *rules.Ruleset {
		return &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}}}, Downstreams: []rules.Downstream{{Name: "payments"}}}
	}
	// Two identical stores and guards: one reads alone, one in batches.
	type side struct {
		clk    *clock.Fake
		st     versioning.Store
		series *countingSeries
		g      *Guard
		acts   map[string]time.Time
	}
	newSide := func(batch bool) *side {
		s := &side{clk: clock.NewFake(t0), series: &countingSeries{by: map[string]fakeSeries{}}, acts: map[string]time.Time{}}
		st := memStore(t, s.clk)
		s.st = st
		for _, late := range []bool{false, true} {
			if late {
				s.clk.Advance(20 * time.Second)
			}
			for _, sv := range services {
				if sv.late != late {
					continue
				}
				for i, rate := range []float64{100, 10} {
					p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: int64(i), Ruleset: ruleset(sv.name, rate), Author: alice, Reason: "test"})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := st.Approve(ctx, sv.name, p.Number, bob, "ok"); err != nil {
						t.Fatal(err)
					}
				}
				s.acts[sv.name] = s.clk.Now()
				// The samples are a function of their time, so a point
				// reads alike in any window that holds it.
				switchAt, value := s.clk.Now().Add(30*time.Second), consistent(sv.value)
				s.series.by[sv.name] = fakeSeries{timed: func(m Metric, at time.Time, _ int) float64 {
					return value(m, !at.Before(switchAt), int(at.Sub(t0)/(10*time.Second)))
				}}
			}
		}
		var series Series = s.series
		if batch {
			series = batched{s.series}
		}
		g, err := New(Options{Store: st, Series: series, Window: 2 * time.Minute, Settle: 30 * time.Second, Step: 10 * time.Second, MinSamples: 6})
		if err != nil {
			t.Fatal(err)
		}
		s.g = g
		return s
	}
	alone, batch := newSide(false), newSide(true)
	var finals int
	for step := range 40 {
		var out [2]string
		for k, s := range []*side{alone, batch} {
			s.clk.Advance(10 * time.Second)
			if step >= 8 && step < 20 {
				// g's dependency is in trouble for a while.
				s.g.Note(s.clk.Now(), []Incident{{Service: "g", Kind: "breaker_open", Downstream: "payments", What: "the breaker to payments is open"}})
			} else {
				s.g.Note(s.clk.Now(), nil)
			}
			var active []versioning.Version
			for _, sv := range services {
				v, err := s.st.Active(ctx, sv.name)
				if err != nil {
					t.Fatal(err)
				}
				active = append(active, v)
			}
			final, err := s.g.Observe(ctx, s.clk.Now(), active)
			if err != nil {
				t.Fatal(err)
			}
			if k == 1 {
				finals += len(final)
			}
			all := s.g.Decisions()
			sort.SliceStable(all, func(i, j int) bool { return all[i].Service < all[j].Service })
			raw, err := json.Marshal(struct {
				Final []Decision
				All   []Decision
			}{final, all})
			if err != nil {
				t.Fatal(err)
			}
			out[k] = string(raw)
		}
		if out[0] != out[1] {
			t.Fatalf("step %d: decisions differ\nalone:   %s\nbatched: %s", step, out[0], out[1])
		}
	}
	if finals < 4 {
		t.Fatalf("%d final decisions; the test means to cover regressions, passes and inconclusive ones", finals)
	}
	confounded := false
	for _, d := range batch.g.Decisions() {
		for _, c := range d.Checks {
			confounded = confounded || c.Metric == AdmittedShare
		}
	}
	if !confounded {
		t.Error("no decision judged the admitted share: the incident did not confound g")
	}
	if batch.series.batch == 0 || batch.series.single*4 > alone.series.single {
		t.Errorf("batched guard: %d batch and %d single reads; alone %d single reads", batch.series.batch, batch.series.single, alone.series.single)
	}
	for _, s := range []*side{alone, batch} {
		for k, n := range s.series.windows {
			if k.to.Before(s.acts[k.service]) && n > 1 {
				t.Errorf("%s %s before activation [%s, %s] read %d times", k.service, k.m, k.from.Format(time.TimeOnly), k.to.Format(time.TimeOnly), n)
			}
		}
	}
	t.Logf("reads: alone %d; batched %d batches + %d single", alone.series.single, batch.series.batch, batch.series.single)
}

// TestGrowingWindowReadsOnce: while the after window grows, the samples
// assembled from the kept points and the newer ones are exactly those one
// read of the whole window gives, at evaluations spaced irregularly, and a
// point a Step in the past is read once.
func TestGrowingWindowReadsOnce(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g, err := New(Options{Store: nopStore{}, Series: fakeSeries{}, Window: 2 * time.Minute, Settle: 30 * time.Second, Step: 10 * time.Second, MinSamples: 6})
	if err != nil {
		t.Fatal(err)
	}
	series := &countingSeries{by: map[string]fakeSeries{"a": {timed: func(_ Metric, at time.Time, _ int) float64 {
		return float64(at.Sub(t0) / time.Second)
	}}}}
	w := watch{d: Decision{Service: "a", ActivatedAt: t0}}
	kept := map[time.Time]bool{}
	for _, dt := range []time.Duration{90 * time.Second, 95*time.Second + 7*time.Millisecond, 101 * time.Second, 130 * time.Second,
		131 * time.Second, 149*time.Second + 999*time.Millisecond} {
		now := t0.Add(dt)
		win := g.windows(now, w.d)
		if win.full || win.settling {
			t.Fatalf("at +%s: full %v settling %v; the test means a growing window", dt, win.full, win.settling)
		}
		var after []float64
		if k, ok := w.grown[ErrorRatio]; ok {
			after = k.vals[:len(k.vals):len(k.vals)]
		}
		for _, sp := range g.afterSpans(win, w, ErrorRatio) {
			v, err := series.Samples(ctx, "a", ErrorRatio, sp.from, sp.to, g.o.Step)
			if err != nil {
				t.Fatal(err)
			}
			for p := sp.from; !p.After(sp.to); p = p.Add(g.o.Step) {
				if kept[p] {
					t.Errorf("at +%s: point +%s kept before, read again", dt, p.Sub(t0))
				}
				kept[p] = sp.keep
			}
			after = append(after, v...)
			if sp.keep {
				w.grown = map[Metric]grownSamples{ErrorRatio: {next: sp.to.Add(g.o.Step), vals: after[:len(after):len(after)]}}
			}
		}
		whole, err := series.Samples(ctx, "a", ErrorRatio, win.aFrom, win.aTo, g.o.Step)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(after) != fmt.Sprint(whole) {
			t.Fatalf("at +%s: assembled %v, whole window %v", dt, after, whole)
		}
	}
}
