package guardrail

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// alone hides SamplesBy: a guard with it reads every service alone, on
// every watch's own grid, as guards did before the grid points.
type alone struct{ Series }

// rangeCounter counts the range queries sent to a source, and each query's
// reads of every instant.
type rangeCounter struct {
	signals.Source
	n     atomic.Int64
	mu    sync.Mutex
	reads map[string]int // by query and instant
}

func (c *rangeCounter) QueryRange(ctx context.Context, q string, r signals.Range) (*signals.Result, error) {
	c.n.Add(1)
	c.mu.Lock()
	if c.reads == nil {
		c.reads = map[string]int{}
	}
	for t := r.Start; !t.After(r.End); t = t.Add(r.Step) {
		c.reads[q+"@"+t.Format(time.TimeOnly)]++
	}
	c.mu.Unlock()
	return c.Source.QueryRange(ctx, q, r)
}

// gridBehaviour is what one service of the seeded fixture does after its
// version went live.
type gridBehaviour struct {
	name                 string
	late                 bool    // activated 20 s after the others
	load, errors, shed   float64 // factors after activation
	slow                 bool    // latency moves up a bucket
	stopsAfterActivation bool    // no data after activation
	wantFinal            Verdict // "" any
}

var gridServices = []gridBehaviour{
	{name: "healthy", load: 1, errors: 1, shed: 1, wantFinal: Pass},
	{name: "errors", load: 1, errors: 60, shed: 1, wantFinal: Regression},
	{name: "slow", load: 1, errors: 1, shed: 1, slow: true, wantFinal: Regression},
	{name: "shedding", load: 1, errors: 1, shed: 40, wantFinal: Regression},
	{name: "spike", load: 3, errors: 8, shed: 1, wantFinal: Inconclusive},
	{name: "late", late: true, load: 1, errors: 1, shed: 1, wantFinal: Pass},
	{name: "gone", load: 1, errors: 1, shed: 1, stopsAfterActivation: true, wantFinal: Inconclusive},
}

// fillGrid writes the SDK series of the fixture from t0 to end, a scrape
// every 5 s, two instances per service, with seeded noise: request,
// shed and error counters and a latency histogram.
func fillGrid(t *testing.T, db *embedded.DB, t0, act, end time.Time) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	les := []float64{0.05, 0.1, 0.25, 0.5, 1}
	type counters struct {
		admitted, shed, errors, count float64
		buckets                       []float64
	}
	state := map[string]*counters{}
	for at := t0; !at.After(end); at = at.Add(5 * time.Second) {
		app := db.Appender(ctx)
		for _, b := range gridServices {
			activated := act
			if b.late {
				activated = act.Add(20 * time.Second)
			}
			after := !at.Before(activated)
			if after && b.stopsAfterActivation {
				continue
			}
			for i := range 2 {
				inst := b.name + "-" + strconv.Itoa(i) + ":8080"
				c := state[inst]
				if c == nil {
					c = &counters{buckets: make([]float64, len(les))}
					state[inst] = c
				}
				load, errs, shed, slow := 1.0, 1.0, 1.0, false
				if after {
					load, errs, shed, slow = b.load, b.errors, b.shed, b.slow
				}
				offered := 50 * load * (1 + 0.2*(rng.Float64()-0.5)) * 5
				shedShare := min(0.9, 0.01*shed*(1+0.4*(rng.Float64()-0.5)))
				admitted := offered * (1 - shedShare)
				c.admitted += admitted
				c.shed += offered * shedShare
				c.errors += admitted * min(0.9, 0.002*errs*(1+0.5*(rng.Float64()-0.5)))
				c.count += admitted
				// The share of requests at or below each bound: the p99
				// lies near 0.25 s, or near 1 s once slow.
				shares := []float64{0.5, 0.9, 0.985 + 0.01*rng.Float64(), 1, 1}
				if slow {
					shares = []float64{0.1, 0.3, 0.6, 0.985 + 0.01*rng.Float64(), 1}
				}
				for k := range les {
					c.buckets[k] += admitted * shares[k]
				}
				base := []string{"job", "governor", "instance", inst, "service", b.name}
				add := func(v float64, kv ...string) {
					if _, err := app.Append(0, labels.FromStrings(append(append([]string{}, base...), kv...)...), at.UnixMilli(), v); err != nil {
						t.Fatal(err)
					}
				}
				add(c.admitted, "__name__", "governor_sdk_requests_total", "route", "api", "class", "core", "outcome", "admitted")
				add(c.shed, "__name__", "governor_sdk_requests_total", "route", "api", "class", "core", "outcome", "shed")
				add(c.errors, "__name__", "governor_sdk_request_errors_total", "route", "api", "class", "core")
				for k, le := range les {
					add(c.buckets[k], "__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", strconv.FormatFloat(le, 'g', -1, 64))
				}
				add(c.count, "__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", "+Inf")
				add(1, "__name__", "governor_sdk_rules_version")
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// gridStore makes v1 of every fixture service live at t0 and v2 at act (the
// late one 20 s after).
func gridStore(t *testing.T, t0, act time.Time) (versioning.Store, *clock.Fake) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	st := memStore(t, clk)
	put := func(svc string, base int64, rate float64) {
		rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: rate}}}}
		p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: base, Ruleset: rs, Author: alice, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range gridServices {
		put(b.name, 0, 100)
	}
	for _, late := range []bool{false, true} {
		clk.Set(act)
		if late {
			clk.Set(act.Add(20 * time.Second))
		}
		for _, b := range gridServices {
			if b.late == late {
				put(b.name, 1, 90)
			}
		}
	}
	return st, clk
}

// sameDecisions fails unless two guards' decisions agree: verdicts, final
// states, rollbacks, and every check's verdict, sample counts and means (the
// snapshot's values are the queries' up to floating-point summation order).
func sameDecisions(t *testing.T, at time.Time, name string, want, got []Decision) {
	t.Helper()
	sort.SliceStable(want, func(i, j int) bool { return want[i].Service < want[j].Service })
	sort.SliceStable(got, func(i, j int) bool { return got[i].Service < got[j].Service })
	if len(want) != len(got) {
		t.Fatalf("at %s: %s has %d decisions, per-service reads %d", at.Format(time.TimeOnly), name, len(got), len(want))
	}
	close := func(a, b float64) bool { return a == b || math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(a)) }
	for i, w := range want {
		g := got[i]
		same := w.Service == g.Service && w.Version == g.Version && w.Verdict == g.Verdict && w.Final == g.Final &&
			(w.RollbackVersion == 0) == (g.RollbackVersion == 0) && len(w.Checks) == len(g.Checks) && fmt.Sprint(w.Confounders) == fmt.Sprint(g.Confounders)
		for k := 0; same && k < len(w.Checks); k++ {
			a, b := w.Checks[k], g.Checks[k]
			same = a.Metric == b.Metric && a.Verdict == b.Verdict && a.Before.N == b.Before.N && a.After.N == b.After.N &&
				close(a.Before.Mean, b.Before.Mean) && close(a.After.Mean, b.After.Mean) && close(a.Before.SD, b.Before.SD) && close(a.After.SD, b.After.SD)
		}
		if !same {
			t.Fatalf("at %s: %s decided %s v%d differently\nper service: %+v\n%s: %+v", at.Format(time.TimeOnly), name, w.Service, w.Version, w, name, g)
		}
	}
}

// TestGridPointsDecideAsPerServiceReads: on a seeded fixture in the
// embedded store (healthy versions, error, latency and goodput regressions,
// a load spike, a service whose data stops), a guard fed every cycle's
// signal snapshot decides at every tick as a guard reading every window
// service by service with range queries, and sends no range query at all;
// a guard started after the activations (a restart or a new leader) reads
// the windows before activation from the store once, on its first cycle,
// and then decides alike too.
func TestGridPointsDecideAsPerServiceReads(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	act := t0.Add(5 * time.Minute)
	end := act.Add(10 * time.Minute)
	fillGrid(t, db, t0, act, end)
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(st versioning.Store, s Series) Options {
		return Options{Store: st, Series: s, Window: 2 * time.Minute, Settle: 30 * time.Second, Step: 10 * time.Second, MinSamples: 6}
	}
	type side struct {
		st  versioning.Store
		clk *clock.Fake
		src *rangeCounter
		g   *Guard
	}
	newSide := func(perService bool) *side {
		st, clk := gridStore(t, t0, act)
		s := &side{st: st, clk: clk, src: &rangeCounter{Source: db}}
		var series Series = SignalSeries{Source: s.src, Reader: reader}
		if perService {
			series = alone{series}
		}
		g, err := New(opts(st, series))
		if err != nil {
			t.Fatal(err)
		}
		s.g = g
		return s
	}
	old, fed, restarted := newSide(true), newSide(false), newSide(false)
	restartAt := act.Add(90 * time.Second)
	observe := func(s *side, now time.Time) []Decision {
		s.clk.Set(now)
		var active []versioning.Version
		for _, b := range gridServices {
			v, err := s.st.Active(ctx, b.name)
			if err != nil {
				t.Fatal(err)
			}
			active = append(active, v)
		}
		if _, err := s.g.Observe(ctx, now, active); err != nil {
			t.Fatal(err)
		}
		return s.g.Decisions()
	}
	finals := map[string]Verdict{}
	var restartReads int64
	for now := act.Add(-2 * time.Minute); !now.After(end); now = now.Add(10 * time.Second) {
		snap, err := reader.Read(ctx, now, signals.PerService)
		if err != nil {
			t.Fatal(err)
		}
		fed.g.Record(snap)
		want := observe(old, now)
		sameDecisions(t, now, "the guard fed snapshots", want, observe(fed, now))
		if now.Before(restartAt) {
			continue
		}
		restarted.g.Record(snap)
		before := restarted.src.n.Load()
		got := observe(restarted, now)
		// It reads what it missed when a watch is first judged: at its
		// first cycle, and when a later version's settling ends (the late
		// one, the rollbacks).
		n := restarted.src.n.Load() - before
		restartReads += n
		first := now.Equal(restartAt)
		for _, d := range got {
			first = first || d.At.Equal(now) && now.Equal(d.ActivatedAt.Add(30*time.Second+6*10*time.Second))
		}
		if n != 0 && !first {
			t.Fatalf("at %s the restarted guard sent %d range queries, after the first cycle of every watch", now.Format(time.TimeOnly), n)
		}
		// The restarted guard has no decisions of the cycles before it.
		var mine []Decision
		for _, d := range want {
			if !d.Final || !d.At.Before(restartAt) {
				mine = append(mine, d)
			}
		}
		sameDecisions(t, now, "the restarted guard", mine, got)
		for _, d := range want {
			if d.Final && d.Version == 2 {
				finals[d.Service] = d.Verdict
			}
		}
	}
	for _, b := range gridServices {
		if finals[b.name] != b.wantFinal {
			t.Errorf("%s: final verdict %q, the fixture means %q", b.name, finals[b.name], b.wantFinal)
		}
	}
	if n := fed.src.n.Load(); n != 0 {
		t.Errorf("the guard fed every snapshot sent %d range queries", n)
	}
	if restartReads == 0 {
		t.Error("the restarted guard read nothing: its windows before activation came from nowhere")
	}
	t.Logf("range queries: per service %d, fed %d, restarted %d (on the first cycle of its watches)", old.src.n.Load(), fed.src.n.Load(), restartReads)
}

// TestRecordKeepsGridPointsOnly: Record keeps a snapshot taken on the grid,
// ignores one off the grid, one with a failed read of a signal it keeps and
// one per instance, records a service the snapshot lacks as without
// samples, and forgets points no window can reach and services without a
// sample in reach, so the memory stays bounded however long it runs.
func TestRecordKeepsGridPointsOnly(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g, err := New(Options{Store: nopStore{}, Series: SignalSeries{}, Window: time.Minute, Settle: 10 * time.Second, Step: 10 * time.Second, MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	snap := func(at time.Time, services ...string) *signals.Snapshot {
		s := &signals.Snapshot{At: at, Scope: signals.PerService, Entries: map[signals.Key]*signals.Entry{}, Errors: map[signals.Signal]error{}}
		for _, svc := range services {
			e := &signals.Entry{Key: signals.Key{Service: svc}, Values: map[signals.Signal]signals.Value{
				signals.RequestRate: signals.KnownValue(100), signals.ErrorRatio: signals.KnownValue(0.01),
				signals.LatencyP99: signals.KnownValue(0.2), signals.ShedRatio: signals.Unknown(signals.NotFinite, "NaN")}}
			s.Entries[e.Key] = e
		}
		return s
	}
	points := func(svc string) int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.rings[svc])
	}
	g.Record(snap(t0.Add(time.Second), "a"))
	if n := points("a"); n != 0 {
		t.Fatalf("a snapshot off the grid kept %d points", n)
	}
	failed := snap(t0, "a")
	failed.Errors[signals.ErrorRatio] = fmt.Errorf("boom")
	g.Record(failed)
	perInstance := snap(t0, "a")
	perInstance.Scope = signals.PerInstance
	g.Record(perInstance)
	if n := points("a"); n != 0 {
		t.Fatalf("a failed or per-instance snapshot kept %d points", n)
	}
	g.Record(snap(t0, "a", "b"))
	g.Record(snap(t0.Add(10*time.Second), "a"))
	view := gridView{g: g}
	if got := view.samples("a", GoodputShare, t0, t0.Add(10*time.Second)); len(got) != 0 {
		t.Fatalf("goodput share %v without a shed ratio", got)
	}
	if got := view.samples("a", ErrorRatio, t0, t0.Add(10*time.Second)); fmt.Sprint(got) != "[0.01 0.01]" {
		t.Fatalf("error ratio %v", got)
	}
	if p, ok := view.lookup("b", t0.Add(10*time.Second)); !ok || !math.IsNaN(p.value(OfferedLoad)) {
		t.Fatalf("b, absent from the second snapshot: point %v kept %v, want observed without samples", p, ok)
	}
	// Window + Settle + MaxWait + Step is 2m20s: 15 points at most.
	for i := range 200 {
		g.Record(snap(t0.Add(time.Duration(i)*10*time.Second), "a"))
	}
	if n := points("a"); n > 15 {
		t.Fatalf("%d points kept for a; no window reaches back further than 15", n)
	}
	if n := points("b"); n != 0 {
		t.Fatalf("%d points kept for b, without a sample for longer than any window reaches", n)
	}
}

// TestTicksOffTheGrid: with ticks every 10 s and a Step of 15 s (the
// defaults), every other grid point comes from the store, each read once,
// the first time a window reaches it; the regressions are still found.
func TestTicksOffTheGrid(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	act := t0.Add(5 * time.Minute)
	end := act.Add(10 * time.Minute)
	fillGrid(t, db, t0, act, end)
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, clk := gridStore(t, t0, act)
	src := &rangeCounter{Source: db}
	g, err := New(Options{Store: st, Series: SignalSeries{Source: src, Reader: reader}, Window: 2 * time.Minute,
		Settle: 30 * time.Second, Step: 15 * time.Second, MinSamples: 6})
	if err != nil {
		t.Fatal(err)
	}
	for now := act.Add(-2 * time.Minute); !now.After(end); now = now.Add(10 * time.Second) {
		clk.Set(now)
		snap, err := reader.Read(ctx, now, signals.PerService)
		if err != nil {
			t.Fatal(err)
		}
		g.Record(snap)
		var active []versioning.Version
		for _, b := range gridServices {
			v, err := st.Active(ctx, b.name)
			if err != nil {
				t.Fatal(err)
			}
			active = append(active, v)
		}
		if _, err := g.Observe(ctx, now, active); err != nil {
			t.Fatal(err)
		}
	}
	for k, n := range src.reads {
		if n > 1 {
			t.Errorf("%s read %d times", k[strings.LastIndex(k, "@")+1:], n)
		}
	}
	if src.n.Load() == 0 {
		t.Error("no point read: the points between the ticks came from nowhere")
	}
	finals := map[string]Verdict{}
	for _, d := range g.Decisions() {
		if d.Final && d.Version == 2 {
			finals[d.Service] = d.Verdict
		}
	}
	for _, svc := range []string{"errors", "slow", "shedding"} {
		if finals[svc] != Regression {
			t.Errorf("%s: final verdict %q, want a regression", svc, finals[svc])
		}
	}
	t.Logf("%d range queries, %d instants read", src.n.Load(), len(src.reads))
}
