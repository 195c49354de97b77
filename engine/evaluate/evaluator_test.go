package evaluate

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestTick runs cycles over ten services with two instances each, whose
// load rises with their index: the overloaded ones get a proposal (inside
// the band it applies itself, and the next cycle holds further changes
// while the guardrail judges it), the others none.
func TestTick(t *testing.T) {
	const services, instances = 10, 2
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillStore(t, db, services, instances)
	clk := clock.NewFake(benchT0.Add(-10 * time.Minute)) // the starting versions are old: not guarded
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ins := liveFleet(t, st, services, instances)
	clk.Set(benchT0.Add(5 * time.Minute))
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	tracker, rec := testScoring(t)
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: db, Reader: reader}})
	if err != nil {
		t.Fatal(err)
	}
	evs := events.NewRecorder(100)
	reg := prometheus.NewRegistry()
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard,
		Proposer: &recommend.Proposer{Store: st, Clock: clk}, Fleet: fleetOf{ins}, Events: evs, Registerer: reg,
		Band: func(string) recommend.Band { return recommend.Band{MaxChangePerHour: 1} }})
	if err != nil {
		t.Fatal(err)
	}
	var submitted []recommend.Submitted
	for i := range 3 {
		res, err := e.Tick(ctx, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Scores) != services || len(res.Recommendations) != services {
			t.Fatalf("tick %d: %d scores, %d recommendations", i, len(res.Scores), len(res.Recommendations))
		}
		submitted = append(submitted, res.Submitted...)
		clk.Advance(10 * time.Second)
	}
	if len(submitted) == 0 {
		t.Fatalf("no proposal; recommendations: %+v", e.Recommendations())
	}
	held := 0
	for _, r := range e.Recommendations() {
		if strings.HasPrefix(r.Reason, "held while the guardrail judges") {
			held++
		}
	}
	seen := map[string]int{}
	for _, s := range submitted {
		if !s.AutoApplied || s.Version.Source != versioning.SourceEngine || len(s.Version.Evidence) == 0 {
			t.Fatalf("submitted %+v", s)
		}
		seen[s.Version.Service]++
	}
	for svc, n := range seen {
		if n > 1 {
			t.Errorf("%s changed %d times while its last change was being judged", svc, n)
		}
	}
	for svc := range seen {
		if !guard.Watching(svc) {
			t.Errorf("%s: the guardrail does not judge the engine's change", svc)
		}
	}
	t.Logf("%d services changed, %d recommendations held for the guardrail", len(seen), held)
	if got := testutil.ToFloat64(e.metrics.ticks); got != 3 {
		t.Errorf("ticks metric %v", got)
	}
	if len(evs.Events(events.AutoApply)) != len(submitted) {
		t.Errorf("%d auto_apply events for %d changes", len(evs.Events(events.AutoApply)), len(submitted))
	}
	// An instance that falls behind is reported once.
	stale := fleetOf{append([]distribution.Instance{{Service: "svc-0000", Instance: "9", State: distribution.StateStale, Running: 1, Target: 2}}, ins...)}
	e.o.Fleet = stale
	for range 2 {
		if _, err := e.Tick(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Second)
	}
	if got := evs.Events(events.InstanceStale); len(got) != 1 || got[0].Service != "svc-0000" {
		t.Fatalf("instance_stale events %+v", got)
	}
	// It catches up: one instance_recovered; another turns NACKED, then
	// leaves the ledger: recovered again, from NACKED.
	nacked := fleetOf{append([]distribution.Instance{{Service: "svc-0000", Instance: "9", State: distribution.StateSynced, Running: 2, Target: 2},
		{Service: "svc-0001", Instance: "8", State: distribution.StateNacked, Running: 1, Target: 2}}, ins...)}
	for _, f := range []fleetOf{nacked, nacked, {ins}, {ins}} {
		e.o.Fleet = f
		if _, err := e.Tick(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Second)
	}
	recovered := evs.Events(InstanceRecovered)
	if len(recovered) != 2 {
		t.Fatalf("instance_recovered events %+v", recovered)
	}
	for i, want := range []Recovery{{Instance: distribution.Instance{Service: "svc-0000", Instance: "9", State: distribution.StateSynced, Running: 2, Target: 2}, From: distribution.StateStale},
		{Instance: distribution.Instance{Service: "svc-0001", Instance: "8"}, From: distribution.StateNacked}} {
		got, ok := recovered[i].Detail.(Recovery)
		if !ok || got.From != want.From || got.Instance.Service != want.Instance.Service || got.Instance.Instance != want.Instance.Instance ||
			got.Instance.State != want.Instance.State || got.Instance.Running != want.Instance.Running || recovered[i].Service != want.Instance.Service {
			t.Errorf("recovery %d: %+v, want %+v", i, recovered[i], want)
		}
	}
	if got := evs.Events(events.InstanceStale); len(got) != 2 {
		t.Fatalf("instance_stale events after the NACK %+v", got)
	}
	// A breaker that opens is reported once.
	app := db.Appender(ctx)
	for i := range 3 {
		ts := clk.Now().Add(time.Duration(i-2) * 10 * time.Second).UnixMilli()
		if _, err := app.Append(0, labels.FromStrings("__name__", "governor_sdk_breaker_state", "service", "svc-0001",
			"instance", "10.0.1.0:8080", "job", "governor", "downstream", "payments"), ts, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	e.o.Breakers = db
	for range 2 {
		if _, err := e.Tick(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if got := evs.Events(events.BreakerOpen); len(got) != 1 || got[0].Service != "svc-0001" || !strings.Contains(got[0].Message, "payments") {
		t.Fatalf("breaker_open events %+v", got)
	}
	// The guardrail knows of it as one incident, so it
	// does not blame svc-0001's version for what the breaker explains.
	if got := guard.Incidents("svc-0001"); len(got) != 1 || got[0].Downstream != "payments" || got[0].Kind != string(events.BreakerOpen) ||
		!strings.Contains(got[0].What, "open on 1 instance(s)") || !got[0].To.Equal(clk.Now()) {
		t.Fatalf("guardrail incidents %+v", got)
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "Reader") {
		t.Fatalf("missing options: %v", err)
	}
}

func TestOverloadedDependencies(t *testing.T) {
	score := func(svc string, value float64, known, over bool) loadscore.Score {
		return loadscore.Score{Key: signals.Key{Service: svc}, Value: value, Known: known, Overloaded: over}
	}
	scores := []loadscore.Score{score("payments", 0.93, true, true), score("search", 0.4, true, false),
		score("ledger", 0.95, false, true), score("checkout", 0.99, true, true)}
	version := func(svc string, downstreams ...string) versioning.Version {
		rs := &rules.Ruleset{Service: svc}
		for _, d := range downstreams {
			rs.Downstreams = append(rs.Downstreams, rules.Downstream{Name: d})
		}
		return versioning.Version{Service: svc, Number: 2, Ruleset: rs}
	}
	got := overloadedDependencies(scores, []versioning.Version{
		version("checkout", "payments", "search", "ledger", "checkout", "https://maps.example"),
		version("cart", "search"), {Service: "bare"}})
	if len(got) != 1 {
		t.Fatalf("incidents %+v, want payments only", got)
	}
	if in := got[0]; in.Service != "checkout" || in.Downstream != "payments" || in.Kind != DependencyOverloaded ||
		in.What != "dependency payments is overloaded (load score 0.93)" {
		t.Fatalf("incident %+v", in)
	}
	if got := overloadedDependencies(scores[1:2], []versioning.Version{version("checkout", "search")}); got != nil {
		t.Fatalf("incidents %+v with nothing overloaded", got)
	}
}

// downstreamSource answers the downstream latency query with p99 for
// checkout's calls to payments (NaN: no sample).
type downstreamSource struct {
	signals.Source
	p99 *float64
}

func (s downstreamSource) Query(_ context.Context, q string, at time.Time) (*signals.Result, error) {
	if q != signals.DownstreamP99.String() {
		return nil, fmt.Errorf("unexpected query %q", q)
	}
	res := &signals.Result{Type: signals.TypeVector}
	if !math.IsNaN(*s.p99) {
		res.Samples = []signals.Sample{{Labels: signals.Labels{"service": "checkout", "downstream": "payments"},
			Point: signals.Point{T: at, V: *s.p99}}}
	}
	return res, nil
}

// memGuard returns a guardrail on an in-memory rules store, closed when the
// test ends.
func memGuard(t *testing.T) *guardrail.Guard {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{}})
	if err != nil {
		t.Fatal(err)
	}
	return guard
}

func TestSlowDownstreams(t *testing.T) {
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
	// A jump before the baseline is learnt is not judged.
	if got := step(0.5); got != nil {
		t.Fatalf("incident on the first sample: %+v", got)
	}
	e.latency = nil
	for i := range baselineCycles {
		if got := step(0.05 + float64(i%2)*0.002); got != nil {
			t.Fatalf("cycle %d of the baseline: %+v", i, got)
		}
	}
	if got := step(0.09); got != nil { // 1.8x: within the usual
		t.Fatalf("incident at 1.8x: %+v", got)
	}
	got := step(0.2)
	if len(got) != 1 || got[0].Service != "checkout" || got[0].Downstream != "payments" || got[0].Kind != SlowDownstream ||
		!strings.Contains(got[0].What, "calls to payments are slow: p99 0.200s") {
		t.Fatalf("incidents %+v", got)
	}
	// It lasts above 1.5x the baseline, which it does not move, and ends
	// below.
	if got := step(0.09); len(got) != 1 {
		t.Fatalf("incident ended at 0.09: %+v", got)
	}
	if got := step(math.NaN()); got != nil {
		t.Fatalf("incident without a sample: %+v", got)
	}
	if len(e.latency) != 1 {
		t.Fatalf("baseline of a downstream without samples for a cycle not kept: %+v", e.latency)
	}
	for range baselineCycles {
		step(0.05)
	}
	if got := step(0.06); got != nil {
		t.Fatalf("incident at 0.06: %+v", got)
	}
	// A tiny latency doubling is no incident.
	e.latency = nil
	for range baselineCycles + 1 {
		step(0.001)
	}
	if got := step(0.003); got != nil {
		t.Fatalf("incident at 3ms over a 1ms baseline: %+v", got)
	}
	// Slow for good: after maxSlowCycles it is the new normal.
	n := 0
	for range maxSlowCycles + 5 {
		if len(step(0.5)) > 0 {
			n++
		}
	}
	if n != maxSlowCycles {
		t.Fatalf("slow for %d cycles, want %d", n, maxSlowCycles)
	}
	if got := step(0.5); got != nil {
		t.Fatalf("incident at the new normal: %+v", got)
	}
}

// TestLatencyAnomaly: once its detector has warmed up on a steady p99, a
// dependency whose p99 rises to 1.6x (short of the 2x SlowDownstream jump)
// is a LatencyAnomaly incident; the steady series before it is none, and a
// fall is none.
func TestLatencyAnomaly(t *testing.T) {
	ctx := context.Background()
	var p99 float64
	e := &Evaluator{o: Options{Breakers: downstreamSource{p99: &p99}, Guard: &guardrail.Guard{}}}
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
	steady := func(i int) float64 { return 0.1 + 0.004*float64((i*7)%5) } // 100-116ms
	warmup := thresholds.DefaultOptions().Warmup
	for i := range warmup + 200 {
		if got := step(steady(i)); got != nil {
			t.Fatalf("cycle %d of a steady p99: %+v", i, got)
		}
	}
	if got := step(0.05); got != nil {
		t.Fatalf("incident when the dependency got faster: %+v", got)
	}
	step(steady(0))
	got := step(0.17)
	if len(got) != 1 || got[0].Kind != LatencyAnomaly || got[0].Service != "checkout" || got[0].Downstream != "payments" ||
		!strings.Contains(got[0].What, "calls to payments are unusually slow: p99 0.170s") {
		t.Fatalf("incidents at 1.6x: %+v", got)
	}
	if got := step(0.17); len(got) != 1 || got[0].Kind != LatencyAnomaly {
		t.Fatalf("a lasting rise no longer counts: %+v", got)
	}
	// The guardrail keeps it as any other incident the version does not
	// control.
	g, err := guardrail.New(guardrail.Options{Store: nopVersions{}, Series: guardrail.SignalSeries{}})
	if err != nil {
		t.Fatal(err)
	}
	g.Note(at, got)
	if n := g.Incidents("checkout"); len(n) != 1 || n[0].Kind != LatencyAnomaly {
		t.Fatalf("noted %+v", n)
	}
}

type nopVersions struct{ versioning.Store }

// readerOf reads a store holding the SDK series of services svc-0000...,
// one instance each (fillStore).
func readerOf(t *testing.T, services int) *signals.Reader {
	t.Helper()
	db := embeddedStore(t)
	fillStore(t, db, services, 1)
	r, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestVanishedServiceLeavesTheGaugeAndTheAPI: a service whose signals are
// gone has no current load score: its governor_engine_load_score series
// goes at once (GovernorLoadHigh must not fire on its last value for good),
// and its last score and recommendation leave the read accessors once the
// tracker forgets it (MaxGap).
func TestVanishedServiceLeavesTheGaugeAndTheAPI(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tracker, err := loadscore.New(loadscore.Options{MaxGap: 30 * time.Second,
		Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recommend.New(recommend.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := New(Options{Reader: readerOf(t, 3), Tracker: tracker, Recommender: rec, Versions: st, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	at := benchT0.Add(5 * time.Minute)
	if _, err := e.Tick(ctx, at); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "governor_engine_load_score"); n != 3 {
		t.Fatalf("%d load score series, want 3", n)
	}
	e.o.Reader = readerOf(t, 2) // svc-0002 is gone
	for i := 1; i <= 4; i++ {
		if _, err := e.Tick(ctx, at.Add(time.Duration(i)*10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if n := testutil.CollectAndCount(reg, "governor_engine_load_score"); n != 2 {
			t.Fatalf("tick %d: %d load score series, want 2", i, n)
		}
		wantShown := 3
		if i == 4 { // 40 s since its last score, max gap 30 s
			wantShown = 2
		}
		if got, recs := len(e.Scores()), len(e.Recommendations()); got != wantShown || recs != wantShown {
			t.Fatalf("tick %d: %d scores, %d recommendations shown, want %d", i, got, recs, wantShown)
		}
	}
}

// writeService writes the SDK series of one instance of svc every 10 s
// over [from, to]: 100 requests/s, 1% shed, 0.1% errors.
func writeService(t *testing.T, db *embedded.DB, svc string, from, to time.Time) {
	t.Helper()
	ctx := context.Background()
	for ts := from; !ts.After(to); ts = ts.Add(10 * time.Second) {
		app := db.Appender(ctx)
		add := func(v float64, kv ...string) {
			l := labels.FromStrings(append([]string{"job", "governor", "instance", svc + ":8080", "service", svc}, kv...)...)
			if _, err := app.Append(0, l, ts.UnixMilli(), v); err != nil {
				t.Fatal(err)
			}
		}
		n := ts.Sub(benchT0).Seconds() * 100
		add(n, "__name__", "governor_sdk_requests_total", "route", "api", "class", "core", "outcome", "admitted")
		add(n*0.01, "__name__", "governor_sdk_requests_total", "route", "api", "class", "core", "outcome", "shed")
		add(n*0.001, "__name__", "governor_sdk_request_errors_total", "route", "api", "class", "core")
		for k, le := range buckets {
			add(n*min(1, float64(k+1)/float64(len(buckets))*2), "__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api",
				"le", strconv.FormatFloat(le, 'g', -1, 64))
		}
		add(n, "__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", "+Inf")
		add(n, "__name__", "governor_sdk_request_duration_seconds_count", "route", "api")
		add(5, "__name__", "governor_sdk_inflight", "route", "api")
		add(25, "__name__", "governor_sdk_limit", "route", "api")
		add(1, "__name__", "governor_sdk_rules_version")
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// heartbeats is a delivery ledger whose instances are heard from at every
// call's time (alive) or never after a given time.
type heartbeats struct {
	clk   *clock.Fake
	until map[string]time.Time // by service; zero: heard from now
}

func (h heartbeats) Instances(context.Context, string) ([]distribution.Instance, error) {
	var out []distribution.Instance
	for svc, until := range h.until {
		in := distribution.Instance{Service: svc, Instance: svc + "-0", State: distribution.StateSynced, LastSeen: h.clk.Now()}
		if !until.IsZero() {
			in.State, in.LastSeen = distribution.StateGone, until
		}
		out = append(out, in)
	}
	return out, nil
}

// TestVersionAfterWhichNoInstanceReportsIsJudged: checkout's instances stop
// reporting right after v2 goes live (no series left), while cart reports
// on. The cycle still hands v2 to the guardrail, which says "no instance
// reported after v2": rolled back while the delivery ledger still hears
// from checkout's instances (they run but report nothing), only flagged
// (inconclusive, with the reason) when they are gone from the ledger too,
// as when the service was removed on purpose. An engine that starts (or
// takes the lead) only after checkout went silent judges v2 all the same.
func TestVersionAfterWhichNoInstanceReportsIsJudged(t *testing.T) {
	tests := []struct {
		alive bool
		start time.Duration // first tick, after activation
	}{{true, -3 * time.Minute}, {false, -3 * time.Minute}, {true, 6 * time.Minute}}
	for _, tt := range tests {
		alive := tt.alive
		t.Run(fmt.Sprintf("alive=%v/start=%s", alive, tt.start), func(t *testing.T) {
			ctx := context.Background()
			act := benchT0.Add(20 * time.Minute)
			db := embeddedStore(t)
			writeService(t, db, "checkout", benchT0, act)
			writeService(t, db, "cart", benchT0, act.Add(10*time.Minute))
			clk := clock.NewFake(benchT0)
			st := memStore(t, clk)
			alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
			bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
			for i, rate := range []float64{100, 50} {
				if i == 1 {
					clk.Set(act)
				}
				for _, svc := range []string{"checkout", "cart"} {
					rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
						RateLimit: &rules.RateLimit{Rate: rate}}}}
					p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "test", Rebase: true})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
						t.Fatal(err)
					}
				}
			}
			reader, err := signals.NewReader(db, signals.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tracker, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := recommend.New(recommend.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			evs := events.NewRecorder(100)
			guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: db, Reader: reader}, Events: evs})
			if err != nil {
				t.Fatal(err)
			}
			fleet := heartbeats{clk: clk, until: map[string]time.Time{"checkout": {}, "cart": {}}}
			if !alive {
				fleet.until["checkout"] = act.Add(5 * time.Second)
			}
			e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard, Fleet: fleet,
				Events: evs, Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			var got *guardrail.Decision
			for at := act.Add(tt.start); at.Before(act.Add(8*time.Minute)) && got == nil; at = at.Add(10 * time.Second) {
				clk.Set(at)
				res, err := e.Tick(ctx, at)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range res.Decisions {
					if d.Service == "checkout" {
						got = &d
					}
				}
			}
			if got == nil {
				t.Fatalf("no decision on checkout v2; open: %+v", guard.Decisions())
			}
			if !got.Final || !strings.Contains(got.Reason, "no instance reported after v2") {
				t.Fatalf("final %v: %s", got.Final, got.Reason)
			}
			if alive != (got.RollbackVersion != 0) || alive != (got.Verdict == guardrail.Regression) {
				t.Fatalf("instances alive %v: %s, rollback v%d: %s", alive, got.Verdict, got.RollbackVersion, got.Reason)
			}
			if act, err := st.Active(ctx, "checkout"); err != nil || alive != (act.Number == 3) {
				t.Fatalf("active v%d (%v), instances alive %v", act.Number, err, alive)
			}
			kind := events.GuardrailInconclusive
			if alive {
				kind = events.AutoRollback
			}
			if got := evs.Events(kind); len(got) != 1 || got[0].Service != "checkout" {
				t.Fatalf("%s events %+v", kind, got)
			}
		})
	}
}

// recommended lists the services the recommender keeps state for.
func recommended(t *testing.T, rec *recommend.Recommender) []string {
	t.Helper()
	var out []string
	if err := rec.SaveBaselines(nil, func(svc string, _ []byte) { out = append(out, svc) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkoutGoneAfter10m is an embedded store in which checkout reports for
// the first 10 minutes after benchT0 and cart for 3 hours, read by a
// signal reader, with an empty rules store.
func checkoutGoneAfter10m(t *testing.T) (*signals.Reader, versioning.Store) {
	t.Helper()
	db := embeddedStore(t)
	writeService(t, db, "checkout", benchT0, benchT0.Add(10*time.Minute))
	writeService(t, db, "cart", benchT0, benchT0.Add(3*time.Hour))
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reader, err := signals.NewReader(db, signals.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return reader, st
}

// TestRecommenderForgetsAServiceAbsentForForgetAfter: a service whose
// signals are gone keeps its recommender state (controller, baseline) while
// it may come back, and loses it once it has been absent for ForgetAfter
// (default 1h), so the state does not grow with every service that ever
// ran; a service that reports on keeps its state.
func TestRecommenderForgetsAServiceAbsentForForgetAfter(t *testing.T) {
	ctx := context.Background()
	reader, st := checkoutGoneAfter10m(t)
	tracker, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recommend.New(recommend.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, ForgetAfter: -time.Minute}); err == nil ||
		!strings.Contains(err.Error(), "ForgetAfter is -1m0s") {
		t.Fatalf("negative ForgetAfter: %v", err)
	}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at   time.Duration
		want string
	}{
		{5 * time.Minute, "cart checkout"},
		{10 * time.Minute, "cart checkout"},
		{20 * time.Minute, "cart checkout"}, // checkout gone since about +15m
		{40 * time.Minute, "cart checkout"},
		{90 * time.Minute, "cart"},
	} {
		res, err := e.Tick(ctx, benchT0.Add(tt.at))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(recommended(t, rec), " "); got != tt.want {
			t.Fatalf("at +%s (%d scores): recommender keeps %q, want %q", tt.at, len(res.Scores), got, tt.want)
		}
	}
}

// TestReadWarningsLoggedOncePerSetPerTenMinutes: the read's non-fatal
// warnings are logged, each distinct set at most once per ten minutes of
// cycle time.
func TestReadWarningsLoggedOncePerSetPerTenMinutes(t *testing.T) {
	var buf bytes.Buffer
	e := &Evaluator{o: Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))}}
	a := []string{"sample lacks service label", "sample lacks service label"}
	b := []string{"other warning"}
	count := func() int { return strings.Count(buf.String(), "metrics read warnings") }
	for _, tt := range []struct {
		after time.Duration
		warn  []string
		want  int
	}{
		{0, a, 1},
		{time.Minute, a, 1},
		{2 * time.Minute, b, 2},
		{3 * time.Minute, nil, 2},
		{9 * time.Minute, a, 2},
		{10 * time.Minute, a, 3},
		{11 * time.Minute, b, 3},
		{12 * time.Minute, b, 4},
	} {
		e.logReadWarnings(benchT0.Add(tt.after), tt.warn)
		if got := count(); got != tt.want {
			t.Fatalf("at +%s: %d log lines, want %d:\n%s", tt.after, got, tt.want, buf.String())
		}
	}
	if strings.Count(buf.String(), "lacks service label") != 2 {
		t.Fatalf("a repeated warning is listed once per line:\n%s", buf.String())
	}
}

// testScoring returns the load-score tracker (latency and in-flight, half
// each) and the recommender (default options, acting on one score) the
// evaluator tests share.
func testScoring(tb testing.TB) (*loadscore.Tracker, *recommend.Recommender) {
	tb.Helper()
	tracker, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
	if err != nil {
		tb.Fatal(err)
	}
	ro := recommend.DefaultOptions()
	ro.MinScores = 1
	rec, err := recommend.New(ro)
	if err != nil {
		tb.Fatal(err)
	}
	return tracker, rec
}

// liveFleet gives each of services services ("svc-0000", ...) two live
// versions in st, rates 80 then 70 (so the second has a parent to return
// to), proposed by alice and approved by bob, and returns their instances,
// instances a service, all synced.
func liveFleet(t *testing.T, st versioning.Store, services, instances int) []distribution.Instance {
	t.Helper()
	ctx := context.Background()
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	var ins []distribution.Instance
	for s := range services {
		svc := fmt.Sprintf("svc-%04d", s)
		for _, rate := range []float64{80, 70} {
			rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
				RateLimit: &rules.RateLimit{Rate: rate}, Concurrency: &rules.Concurrency{Min: 2, Max: 50}}}}
			p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "start", Rebase: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
				t.Fatal(err)
			}
		}
		for i := range instances {
			ins = append(ins, distribution.Instance{Service: svc, Instance: strconv.Itoa(i), State: distribution.StateSynced})
		}
	}
	return ins
}

// embeddedStore is an embedded metrics store, closed when the test ends.
func embeddedStore(t testing.TB) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// memStore is an in-memory rules store on clk, closed when the test ends.
func memStore(t testing.TB, clk clock.Clock) versioning.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
