package guardrail

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// rangeSource is a signals.Source answering the guardrail's range queries
// (SignalSeries, per service and batched) with synthetic series: every
// service healthy, with an error ratio of 0.2 from its regressAt on. warn,
// when it says so, adds a warning to the answer of a range read, as a
// federated store does while one of its stores is unavailable.
type rangeSource struct {
	services  []string
	regressAt map[string]time.Time
	warn      func(r signals.Range) string
	s         *SignalSeries

	mu      sync.Mutex
	queries map[string]rangeQuery
	reads   int
}

type rangeQuery struct {
	m        Metric
	services []string
}

func newRangeSource(t *testing.T, services []string, regressAt map[string]time.Time, warn func(r signals.Range) string) (*rangeSource, SignalSeries) {
	t.Helper()
	src := &rangeSource{services: slices.Sorted(slices.Values(services)), regressAt: regressAt, warn: warn}
	reader, err := signals.NewReader(src, signals.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := SignalSeries{Source: src, Reader: reader}
	src.s = &s
	src.queries = map[string]rangeQuery{}
	// Every query the guardrail can send: each metric of every set of
	// services, as a batch or alone.
	n := len(src.services)
	for mask := 1; mask < 1<<n; mask++ {
		var set []string
		for i, svc := range src.services {
			if mask&(1<<i) != 0 {
				set = append(set, svc)
			}
		}
		for _, m := range []Metric{OfferedLoad, ErrorRatio, LatencyP99, ShedRatio, AdmittedShare, GoodputShare} {
			q, err := s.query(m, set...)
			if err != nil {
				t.Fatal(err)
			}
			src.queries[q] = rangeQuery{m: m, services: set}
		}
	}
	return src, s
}

func (s *rangeSource) Query(context.Context, string, time.Time) (*signals.Result, error) {
	return nil, errors.New("rangeSource: no instant queries")
}

func (s *rangeSource) value(svc string, m Metric, t time.Time) float64 {
	i := int(t.Unix()/10) % 3
	jitter := float64(i) * 0.01
	er := 0.002 + jitter/10
	if at, ok := s.regressAt[svc]; ok && !t.Before(at) {
		er = 0.2 + float64(i%2)*0.01
	}
	shed := 0.01 + jitter/10
	switch m {
	case OfferedLoad:
		return 500 + 1000*jitter
	case ErrorRatio:
		return er
	case LatencyP99:
		return 0.1 + jitter
	case ShedRatio:
		return shed
	case AdmittedShare:
		return 1 - shed
	case GoodputShare:
		return (1 - shed) * (1 - er)
	}
	return math.NaN()
}

func (s *rangeSource) QueryRange(_ context.Context, q string, r signals.Range) (*signals.Result, error) {
	s.mu.Lock()
	s.reads++
	rq, ok := s.queries[q]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("rangeSource: unexpected query %q", q)
	}
	res := &signals.Result{Type: signals.TypeMatrix}
	for _, svc := range rq.services {
		sr := signals.Series{Labels: signals.Labels{"service": svc}}
		for t := r.Start; !t.After(r.End); t = t.Add(r.Step) {
			sr.Points = append(sr.Points, signals.Point{T: t, V: s.value(svc, rq.m, t)})
		}
		res.Series = append(res.Series, sr)
	}
	if s.warn != nil {
		if w := s.warn(r); w != "" {
			res.Warnings = append(res.Warnings, w)
		}
	}
	return res, nil
}

// serviceByService hides SamplesBy: the Guard reads each service alone.
type serviceByService struct{ s SignalSeries }

func (a serviceByService) Samples(ctx context.Context, service string, m Metric, from, to time.Time, step time.Duration) ([]float64, error) {
	return a.s.Samples(ctx, service, m, from, to, step)
}

// goLive makes v1 and then, at at, v2 of svc live.
func goLive(t *testing.T, st versioning.Store, clk *clock.Fake, svc string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	for i, rate := range []float64{100, 10} {
		if i == 1 {
			clk.Set(at)
		}
		rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}}}}
		p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: int64(i), Ruleset: rs, Author: alice, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
	}
}

const storeDown = "failed to receive any data from Addr: 10.0.0.7:10901 LabelSets: {replica=\"b\"}: context deadline exceeded"

// TestPartialRangeReadNeverRollsBack: v2 of checkout raises its error
// ratio, but while a store of the federated setup is down every range read
// of the guardrail warns that data may be missing: the windows may lack
// the series that matter, so the guardrail holds (inconclusive, the reason
// naming the partial read and the warning) and rolls nothing back, reading
// service by service or in batches. Once the reads are whole it judges
// (and here rolls back). A warning that says nothing about missing data (a
// PromQL info annotation) holds nothing.
func TestPartialRangeReadNeverRollsBack(t *testing.T) {
	for _, batch := range []bool{false, true} {
		for _, warning := range []string{storeDown, "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"x\""} {
			partial := signals.PartialData(warning)
			t.Run(fmt.Sprintf("batch=%v/partial=%v", batch, partial), func(t *testing.T) {
				ctx := context.Background()
				clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				st := memStore(t, clk)
				at := clk.Now().Add(10 * time.Minute)
				goLive(t, st, clk, "checkout", at)
				back := at.Add(4 * time.Minute) // the store is back
				src, s := newRangeSource(t, []string{"checkout"}, map[string]time.Time{"checkout": at.Add(30 * time.Second)},
					func(signals.Range) string {
						if clk.Now().Before(back) {
							return warning
						}
						return ""
					})
				var series Series = serviceByService{s}
				if batch {
					series = s
				}
				rec := events.NewRecorder(10)
				g, err := New(Options{Store: st, Series: series, Events: rec})
				if err != nil {
					t.Fatal(err)
				}
				var got Decision
				held := 0
				for !got.Final && clk.Now().Before(at.Add(8*time.Minute)) {
					clk.Advance(10 * time.Second)
					act, err := st.Active(ctx, "checkout")
					if err != nil {
						t.Fatal(err)
					}
					if _, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
						t.Fatal(err)
					}
					got = g.Decisions()[0]
					if strings.Contains(got.Reason, "metrics partial: ") {
						held++
						if !partial || got.Verdict != Inconclusive || got.Final || !strings.Contains(got.Reason, storeDown) {
							t.Fatalf("at +%s: %s final %v: %s", clk.Now().Sub(at), got.Verdict, got.Final, got.Reason)
						}
						if p := g.Partial(); len(p) != 1 || !strings.HasPrefix(got.Reason, p[0]) {
							t.Fatalf("at +%s: partial reads %q for reason %q", clk.Now().Sub(at), p, got.Reason)
						}
					} else if p := g.Partial(); len(p) != 0 {
						t.Fatalf("at +%s: partial reads %q, reason %q", clk.Now().Sub(at), p, got.Reason)
					}
				}
				if got.Verdict != Regression || got.RollbackVersion == 0 {
					t.Fatalf("%s rollback v%d: %s", got.Verdict, got.RollbackVersion, got.Reason)
				}
				if partial && got.At.Before(back) || !partial && !got.At.Before(back) {
					t.Fatalf("rolled back at +%s, the store back at +%s (partial: %v)", got.At.Sub(at), back.Sub(at), partial)
				}
				if partial && held == 0 {
					t.Fatal("never held")
				}
				if src.reads == 0 {
					t.Fatal("no range read")
				}
			})
		}
	}
}

// TestPartialRangeReadHoldsOnlyTheWatchesItCovers: the store holding the
// older data is down, so reads reaching back before T warn. cart's v2 went
// live at T, so its window before activation lies behind T: it is held.
// checkout's v2 went live three minutes later, its windows are whole: its
// regression is judged and rolled back, whether read alone or in batches.
func TestPartialRangeReadHoldsOnlyTheWatchesItCovers(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st := memStore(t, clk)
			cartAt := clk.Now().Add(10 * time.Minute)
			goLive(t, st, clk, "cart", cartAt)
			checkoutAt := cartAt.Add(3 * time.Minute)
			goLive(t, st, clk, "checkout", checkoutAt)
			_, s := newRangeSource(t, []string{"checkout", "cart"},
				map[string]time.Time{"checkout": checkoutAt.Add(30 * time.Second), "cart": cartAt.Add(30 * time.Second)},
				func(r signals.Range) string {
					if r.Start.Before(cartAt) {
						return storeDown
					}
					return ""
				})
			var series Series = serviceByService{s}
			if batch {
				series = s
			}
			g, err := New(Options{Store: st, Series: series})
			if err != nil {
				t.Fatal(err)
			}
			decided := map[string]Decision{}
			for clk.Now().Before(checkoutAt.Add(3 * time.Minute)) {
				clk.Advance(10 * time.Second)
				var active []versioning.Version
				for _, svc := range []string{"cart", "checkout"} {
					act, err := st.Active(ctx, svc)
					if err != nil {
						t.Fatal(err)
					}
					active = append(active, act)
				}
				if _, err := g.Observe(ctx, clk.Now(), active); err != nil {
					t.Fatal(err)
				}
				for _, d := range g.Decisions() {
					if d.Service == "cart" && d.RollbackVersion != 0 {
						t.Fatalf("cart rolled back on a partial read: %s", d.Reason)
					}
				}
			}
			for _, d := range g.Decisions() {
				if _, ok := decided[d.Service]; !ok && d.Version == 2 {
					decided[d.Service] = d
				}
			}
			cart, checkout := decided["cart"], decided["checkout"]
			if cart.Verdict != Inconclusive || cart.Final || !strings.HasPrefix(cart.Reason, "metrics partial: ") || !strings.Contains(cart.Reason, storeDown) {
				t.Fatalf("cart: %s final %v: %s", cart.Verdict, cart.Final, cart.Reason)
			}
			if checkout.Verdict != Regression || checkout.RollbackVersion == 0 {
				t.Fatalf("checkout: %s rollback v%d: %s", checkout.Verdict, checkout.RollbackVersion, checkout.Reason)
			}
		})
	}
}

// TestPartialSnapshotIsReadAgainFromTheStore: while a store is down the
// evaluator's snapshots are partial (request rate partial, checkout's
// series lost) and the engine does not judge; once they are whole again
// the grid points those snapshots covered are read from the store, not
// taken for points without samples: the window is judged whole, at once.
func TestPartialSnapshotIsReadAgainFromTheStore(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	fine := consistent(func(m Metric, _ bool, i int) float64 { return healthy(m, i) })
	cs := &countingSeries{by: map[string]fakeSeries{"checkout": {switchAt: at, value: fine}}}
	g, err := New(Options{Store: st, Series: batched{cs}})
	if err != nil {
		t.Fatal(err)
	}
	back := at.Add(150 * time.Second)
	for clk.Now().Before(back) {
		clk.Advance(10 * time.Second)
		snap := snapshotAt(clk.Now(), fakeSeries{switchAt: at, value: silentAfter}, true)
		snap.Partial = map[signals.Signal]string{signals.RequestRate: storeDown}
		for _, e := range snap.Entries {
			e.Values[signals.RequestRate] = signals.Unknown(signals.Partial, string(signals.RequestRate)+": "+storeDown)
		}
		g.Record(snap)
	}
	clk.Advance(10 * time.Second)
	g.Record(snapshotAt(clk.Now(), cs.by["checkout"], true))
	act, err := st.Active(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
		t.Fatal(err)
	}
	d := g.Decisions()[0]
	if d.Verdict != Pass {
		t.Fatalf("%s: %s", d.Verdict, d.Reason)
	}
	for _, c := range d.Checks {
		if c.After.N != 13 {
			t.Fatalf("%s: %d samples after, want the window's 13", c.Metric, c.After.N)
		}
	}
}

// TestPartialRangeReadsUntilTheMaximumWaitLeaveTheVersionUnjudged: a store
// that stays partial leaves the version inconclusive for good at MaxWait,
// with a guardrail_inconclusive event naming the partial read, and it is
// never rolled back although its data look regressed.
func TestPartialRangeReadsUntilTheMaximumWaitLeaveTheVersionUnjudged(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memStore(t, clk)
	at := clk.Now().Add(10 * time.Minute)
	goLive(t, st, clk, "checkout", at)
	_, s := newRangeSource(t, []string{"checkout"}, map[string]time.Time{"checkout": at.Add(30 * time.Second)},
		func(signals.Range) string { return storeDown })
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: s, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	var final []Decision
	for len(final) == 0 && clk.Now().Before(at.Add(10*time.Minute)) {
		clk.Advance(10 * time.Second)
		act, err := st.Active(ctx, "checkout")
		if err != nil {
			t.Fatal(err)
		}
		if final, err = g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
			t.Fatal(err)
		}
	}
	if len(final) != 1 {
		t.Fatalf("final decisions %+v", final)
	}
	d := final[0]
	if d.Verdict != Inconclusive || d.RollbackVersion != 0 || !d.At.Equal(at.Add(30*time.Second+6*time.Minute)) ||
		!strings.HasPrefix(d.Reason, "inconclusive within the maximum wait: metrics partial: ") || !strings.Contains(d.Reason, storeDown) {
		t.Fatalf("at +%s: %s rollback v%d: %s", d.At.Sub(at), d.Verdict, d.RollbackVersion, d.Reason)
	}
	evs := rec.Events("")
	if len(evs) != 1 || evs[0].Kind != events.GuardrailInconclusive || !strings.Contains(evs[0].Message, "metrics partial: ") {
		t.Fatalf("events %+v", evs)
	}
	if v, err := st.Active(ctx, "checkout"); err != nil || v.Number != 2 {
		t.Fatalf("checkout active v%d (%v)", v.Number, err)
	}
}

// TestHeldCyclesEndTheWatchInconclusiveAtTheMaximumWait: every cycle from
// v2's activation on is held by the engine (its own reads are partial).
// The guardrail starts watching v2 but reads, judges and rolls back
// nothing although v2's data regress: settling first, then inconclusive
// with the engine's reason, and final at activation + Settle + MaxWait
// with a guardrail_inconclusive event. Whole cycles afterwards judge v2 no
// more.
func TestHeldCyclesEndTheWatchInconclusiveAtTheMaximumWait(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memStore(t, clk)
	at := clk.Now().Add(10 * time.Minute)
	goLive(t, st, clk, "checkout", at)
	src, s := newRangeSource(t, []string{"checkout"}, map[string]time.Time{"checkout": at}, func(signals.Range) string { return "" })
	rec := events.NewRecorder(10)
	g, err := New(Options{Store: st, Series: s, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	const reason = "metrics partial: request_rate: partial response"
	start, maxWait := at.Add(30*time.Second), at.Add(30*time.Second+6*time.Minute)
	var final []Decision
	for len(final) == 0 && clk.Now().Before(at.Add(10*time.Minute)) {
		clk.Advance(10 * time.Second)
		act, err := st.Active(ctx, "checkout")
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		if final, err = g.Hold(ctx, now, []versioning.Version{act}, reason); err != nil {
			t.Fatal(err)
		}
		if len(final) > 0 {
			break
		}
		d := g.Decisions()
		switch {
		case len(d) != 1 || !g.Watching("checkout"):
			t.Fatalf("at +%s: decisions %+v, watching %v", now.Sub(at), d, g.Watching("checkout"))
		case now.Before(start.Add(time.Minute)) && d[0].Verdict != Watching:
			t.Fatalf("at +%s: settling, got %s: %s", now.Sub(at), d[0].Verdict, d[0].Reason)
		case !now.Before(start.Add(time.Minute)) && (d[0].Verdict != Inconclusive || d[0].Reason != reason+"; nothing judged on data that may be missing"):
			t.Fatalf("at +%s: %s: %s", now.Sub(at), d[0].Verdict, d[0].Reason)
		}
	}
	if len(final) != 1 {
		t.Fatalf("final decisions %+v", final)
	}
	d := final[0]
	if d.Verdict != Inconclusive || d.RollbackVersion != 0 || !d.At.Equal(maxWait) || d.Reason != "inconclusive within the maximum wait: "+reason {
		t.Fatalf("at +%s: %s rollback v%d: %s", d.At.Sub(at), d.Verdict, d.RollbackVersion, d.Reason)
	}
	if evs := rec.Events(""); len(evs) != 1 || evs[0].Kind != events.GuardrailInconclusive || !strings.Contains(evs[0].Message, reason) {
		t.Fatalf("events %+v", evs)
	}
	if src.reads != 0 || g.Partial() != nil {
		t.Fatalf("held cycles read %d ranges, partial %q", src.reads, g.Partial())
	}
	act, err := st.Active(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if final, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil || len(final) != 0 || g.Watching("checkout") {
		t.Fatalf("a whole cycle after: final %+v (%v), watching %v", final, err, g.Watching("checkout"))
	}
	if act.Number != 2 {
		t.Fatalf("checkout active v%d", act.Number)
	}
}

// TestFailedFreshnessSnapshotIsReadAgainFromTheStore: while the freshness
// query fails the reader marks every service stale (nothing tells a live
// target from a dead one), so the evaluator's snapshots hold no value for
// anyone. Those grid points are read from the store once needed, not kept
// as points without samples: the window before a regressing version,
// covered only by such snapshots, is judged whole and the version rolled
// back, rather than left inconclusive ("0 samples before") until MaxWait.
func TestFailedFreshnessSnapshotIsReadAgainFromTheStore(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, at := liveVersions(t, clk)
	regress := consistent(func(m Metric, after bool, i int) float64 {
		if after && m == ErrorRatio {
			return 0.2 + float64(i%2)*0.01
		}
		return healthy(m, i)
	})
	cs := &countingSeries{by: map[string]fakeSeries{"checkout": {switchAt: at.Add(30 * time.Second), value: regress}}}
	g, err := New(Options{Store: st, Series: batched{cs}})
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("freshness: query timed out")
	for ts := at.Add(-3 * time.Minute); ts.Before(at); ts = ts.Add(10 * time.Second) {
		snap := snapshotAt(ts, cs.by["checkout"], true)
		snap.Errors[signals.Freshness] = failed
		for _, e := range snap.Entries {
			for s := range e.Values {
				e.Values[s] = signals.Unknown(signals.Stale, "freshness unknown: the freshness query failed")
			}
		}
		g.Record(snap)
	}
	var got Decision
	for clk.Now().Sub(at) < 8*time.Minute && !got.Final {
		clk.Advance(10 * time.Second)
		g.Record(snapshotAt(clk.Now(), cs.by["checkout"], true))
		act, err := st.Active(ctx, "checkout")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
			t.Fatal(err)
		}
		for _, d := range g.Decisions() {
			if d.Version == 2 {
				got = d
				break
			}
		}
	}
	if got.Verdict != Regression || got.RollbackVersion == 0 {
		t.Fatalf("after %s: %s final %v rollback v%d: %s", got.At.Sub(at), got.Verdict, got.Final, got.RollbackVersion, got.Reason)
	}
	if c, ok := checkOf(got, ErrorRatio); !ok || c.Before.N != 12 {
		t.Fatalf("error ratio check %+v, want the 12 samples of the window before", c)
	}
}
