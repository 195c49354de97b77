package evaluate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// lossySource is a PromQL source in front of the embedded store whose
// answers in [from, to) lack the series of the services in hide and carry
// the warning warn, as a federated store answers while one of its stores
// is unavailable; with only set, just the instant queries containing it.
type lossySource struct {
	db       *embedded.DB
	from, to time.Time
	hide     []string
	warn     string
	only     string
	fail     bool // queries containing only fail with warn instead
}

func (s lossySource) on(at time.Time) bool { return !at.Before(s.from) && at.Before(s.to) }

func (s lossySource) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	res, err := s.db.Query(ctx, q, at)
	if err != nil || !s.on(at) || !strings.Contains(q, s.only) {
		return res, err
	}
	if s.fail {
		return nil, errors.New(s.warn)
	}
	out := *res
	out.Samples = slices.DeleteFunc(slices.Clone(res.Samples), func(x signals.Sample) bool { return slices.Contains(s.hide, x.Labels["service"]) })
	out.Warnings = append(slices.Clone(res.Warnings), s.warn)
	return &out, nil
}

func (s lossySource) QueryRange(ctx context.Context, q string, r signals.Range) (*signals.Result, error) {
	res, err := s.db.QueryRange(ctx, q, r)
	if err != nil || !(s.on(r.Start) || s.on(r.End) || (r.Start.Before(s.from) && !r.End.Before(s.to))) {
		return res, err
	}
	out := *res
	out.Series = slices.DeleteFunc(slices.Clone(res.Series), func(x signals.Series) bool { return slices.Contains(s.hide, x.Labels["service"]) })
	out.Warnings = append(slices.Clone(res.Warnings), s.warn)
	return &out, nil
}

func (lossySource) EvaluatesPromQL() {}

// TestPartialReadHoldsTheGuardrailAndProposals: from activation on, the
// store holding checkout's series is unavailable for 4 minutes: the
// federated store answers without them and warns "partial response". The
// guardrail would take checkout for a service that reports nothing after
// v2 (its instances are heard from, cart reports) and roll it back; the
// engine instead holds the guardrail while its signals are partial and
// proposes nothing for the services they cover, saying why. The range
// reads of the outage warn too, so the guardrail holds the watches whose
// windows reach into it (the cycle lists those reads as partial) rather
// than take its points for points without samples. Once its windows are
// past the outage, the guardrail judges again and v2 stays.
func TestPartialReadHoldsTheGuardrailAndProposals(t *testing.T) {
	ctx := context.Background()
	act := benchT0.Add(20 * time.Minute)
	db := embeddedStore(t)
	writeService(t, db, "checkout", benchT0, act.Add(10*time.Minute))
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
	src := lossySource{db: db, from: act, to: act.Add(4 * time.Minute), hide: []string{"checkout"}, warn: "partial response: store 2 unreachable"}
	reader, err := signals.NewReader(src, signals.ReaderOptions{})
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
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: src, Reader: reader}, Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	fleet := heartbeats{clk: clk, until: map[string]time.Time{"checkout": {}, "cart": {}}}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard, Fleet: fleet,
		Events: evs, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	partialTicks, rangeTicks, judgedAfter := 0, 0, 0
	for at := act.Add(-3 * time.Minute); at.Before(act.Add(8 * time.Minute)); at = at.Add(10 * time.Second) {
		clk.Set(at)
		res, err := e.Tick(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Decisions {
			if d.RollbackVersion != 0 {
				t.Fatalf("at +%s: %s v%d rolled back: %s", at.Sub(act), d.Service, d.Version, d.Reason)
			}
		}
		if !src.on(at) {
			if res.GuardrailHeld != "" {
				t.Fatalf("at +%s: held %q on whole reads", at.Sub(act), res.GuardrailHeld)
			}
			// The guardrail's range reads of the outage still warn: they
			// hold its watches, and are the cycle's only partial reads.
			for _, p := range res.Partial {
				if !strings.HasPrefix(p, "metrics partial: ") || !strings.Contains(p, " of cart, checkout from ") || at.After(act.Add(6*time.Minute)) {
					t.Fatalf("at +%s: partial %q on whole instant reads", at.Sub(act), res.Partial)
				}
			}
			if len(res.Partial) > 0 {
				rangeTicks++
			}
			if at.After(act) {
				judgedAfter++
			}
			continue
		}
		partialTicks++
		const want = "metrics partial: request_rate: partial response: store 2 unreachable"
		if res.GuardrailHeld != want || len(res.Decisions) != 0 {
			t.Fatalf("at +%s: guardrail held %q, want %q; decisions %+v", at.Sub(act), res.GuardrailHeld, want, res.Decisions)
		}
		if len(res.Partial) == 0 || !slices.Contains(res.Partial, "metrics partial: latency_p99: partial response: store 2 unreachable") {
			t.Fatalf("at +%s: partial reads %q", at.Sub(act), res.Partial)
		}
		if len(res.Recommendations) != 1 { // checkout is absent from the read
			t.Fatalf("at +%s: %d recommendations", at.Sub(act), len(res.Recommendations))
		}
		for _, r := range res.Recommendations {
			if !strings.HasPrefix(r.Reason, want+"; ") || r.Ruleset != nil || !r.Inconclusive {
				t.Fatalf("at +%s: %s: %q", at.Sub(act), r.Service, r.Reason)
			}
		}
		for _, sc := range res.Scores {
			if lat := sc.Raw.Terms[0]; lat.Term != loadscore.Latency || lat.Known ||
				lat.Reason != "unknown (partial: latency_p99: partial response: store 2 unreachable)" {
				t.Fatalf("at +%s: %s latency term %+v", at.Sub(act), sc.Key, lat)
			}
		}
	}
	if partialTicks != 24 || judgedAfter == 0 {
		t.Fatalf("%d partial ticks, %d judged after", partialTicks, judgedAfter)
	}
	if got := testutil.ToFloat64(e.metrics.partial); got != float64(partialTicks+rangeTicks) {
		t.Fatalf("governor_engine_partial_reads_total %v, want %d", got, partialTicks+rangeTicks)
	}
	passed := 0
	for _, d := range guard.Decisions() {
		if d.Version == 2 && d.Verdict == guardrail.Pass && d.Final {
			passed++
		}
	}
	if passed != 2 {
		t.Fatalf("decisions %+v: want checkout and cart v2 passed once their windows are past the outage", guard.Decisions())
	}
	if v, err := st.Active(ctx, "checkout"); err != nil || v.Number != 2 {
		t.Fatalf("checkout active v%d (%v)", v.Number, err)
	}
	if got := evs.Events(events.AutoRollback); len(got) != 0 {
		t.Fatalf("auto_rollback events %+v", got)
	}
}

// TestOnlyPartialDataWarningsWithholdProposals: ten services of which the
// loaded ones get a proposal. A warning that says nothing about missing
// data (a PromQL info annotation, as Prometheus words it) changes
// nothing; a partial response withholds every proposal, and each
// service's recommendation says why. So does a signal whose query failed
// (the store timed out): the load score left its term out and the loaded
// services' ceilings were raised inside the auto-apply band with nothing
// logged; Tick now reports ErrMetricsFailed.
func TestOnlyPartialDataWarningsWithholdProposals(t *testing.T) {
	tests := []struct {
		name, warn, only string
		partial, fail    bool
	}{
		{"info", "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"governor_sdk_inflight\"", "", false, false},
		{"PromQL warning", "PromQL warning: encountered a mix of histograms and floats for metric name \"x\"", "", false, false},
		{"partial response", "partial response: store 2 unreachable", "", true, false},
		{"thanos store timeout", "failed to receive any data from Addr: 10.0.0.7:10901 LabelSets: {replica=\"b\"}: context deadline exceeded", "", true, false},
		// CPU and memory weigh nothing in this score, and the request rate
		// is whole: only the engine's rule withholds the proposals.
		{"process metrics partial", "partial response: store 2 unreachable", "process_cpu_seconds_total", true, false},
		{"in-flight query failed", "query timed out", "governor_sdk_inflight", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const services = 10
			ctx := context.Background()
			db := embeddedStore(t)
			fillStore(t, db, services, 1)
			clk := clock.NewFake(benchT0.Add(-10 * time.Minute))
			st := memStore(t, clk)
			alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
			bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
			for s := range services {
				rs := &rules.Ruleset{Service: fmt.Sprintf("svc-%04d", s), Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
					RateLimit: &rules.RateLimit{Rate: 70}, Concurrency: &rules.Concurrency{Min: 2, Max: 50}}}}
				p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "start", Rebase: true})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := st.Approve(ctx, rs.Service, p.Number, bob, "ok"); err != nil {
					t.Fatal(err)
				}
			}
			at := benchT0.Add(5 * time.Minute)
			clk.Set(at)
			src := lossySource{db: db, from: benchT0, to: at.Add(time.Hour), warn: tt.warn, only: tt.only, fail: tt.fail}
			reader, err := signals.NewReader(src, signals.ReaderOptions{MaxAge: -1})
			if err != nil {
				t.Fatal(err)
			}
			tracker, rec := testScoring(t)
			e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st,
				Proposer: &recommend.Proposer{Store: st, Clock: clk}, Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			var res Result
			submitted := 0
			for i := range 3 {
				res, err = e.Tick(ctx, at.Add(time.Duration(i)*10*time.Second))
				if tt.fail != errors.Is(err, ErrMetricsFailed) || err != nil && !tt.fail {
					t.Fatal(err)
				}
				if len(res.Recommendations) != services {
					t.Fatalf("%d recommendations", len(res.Recommendations))
				}
				submitted += len(res.Submitted)
			}
			if tt.partial != (submitted == 0) {
				t.Fatalf("partial %v: %d submitted: %+v", tt.partial, submitted, e.Recommendations())
			}
			prefix := "metrics partial: "
			if tt.fail {
				prefix = "metrics failed: inflight: "
			}
			for _, r := range e.Recommendations() {
				if got := strings.HasPrefix(r.Reason, prefix); got != tt.partial || tt.partial && !strings.Contains(r.Reason, tt.warn) {
					t.Fatalf("%s: %q", r.Service, r.Reason)
				}
			}
			if tt.partial && !tt.fail != (len(res.Partial) > 0) {
				t.Fatalf("partial reads %q", res.Partial)
			}
		})
	}
}

// scriptedBreakers answers the breaker query with the open breakers of the
// current step, and a warning.
type scriptedBreakers struct {
	signals.Source
	open *[]string
	warn *string
}

func (s scriptedBreakers) Query(_ context.Context, q string, at time.Time) (*signals.Result, error) {
	if q != breakerQuery {
		return nil, fmt.Errorf("unexpected query %q", q)
	}
	res := &signals.Result{Type: signals.TypeVector}
	for _, svc := range *s.open {
		res.Samples = append(res.Samples, signals.Sample{Labels: signals.Labels{"service": svc, "downstream": "payments"}, Point: signals.Point{T: at, V: 1}})
	}
	if *s.warn != "" {
		res.Warnings = []string{*s.warn}
	}
	return res, nil
}

// TestPartialBreakerReadClosesNoBreaker: an open breaker missing from a
// partial answer may be open still: it is not reported again when a whole
// answer shows it, and the guardrail is held for the partial cycle; one
// missing from a whole answer has closed.
func TestPartialBreakerReadClosesNoBreaker(t *testing.T) {
	ctx := context.Background()
	var open []string
	var warn string
	evs := events.NewRecorder(10)
	e := &Evaluator{o: Options{Breakers: scriptedBreakers{open: &open, warn: &warn}, Events: evs}}
	at := benchT0
	step := func(w string, svcs ...string) []guardrail.Incident {
		t.Helper()
		open, warn, at = svcs, w, at.Add(10*time.Second)
		e.incidentsPartial = nil
		got, err := e.breakers(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	step("", "checkout")
	if got := step("partial response: store 2 unreachable"); len(got) != 0 {
		t.Fatalf("incidents %+v", got)
	}
	if got := e.guardHold(&signals.Snapshot{}); got != "metrics partial: breakers: partial response: store 2 unreachable" {
		t.Fatalf("guardrail held %q", got)
	}
	step("PromQL info: metric might not be a counter", "checkout")
	if got := e.guardHold(&signals.Snapshot{}); got != "" {
		t.Fatalf("guardrail held %q on an info", got)
	}
	if got := evs.Events(events.BreakerOpen); len(got) != 1 {
		t.Fatalf("breaker_open events %+v, want the first only", got)
	}
	step("")
	step("", "checkout")
	if got := evs.Events(events.BreakerOpen); len(got) != 2 {
		t.Fatalf("breaker_open events %+v: closed, then open again", got)
	}
}

// oldBlocksDown is the embedded store behind a federated one whose store
// of older data is unavailable until back: its instant answers are whole,
// a range read reaching back before oldest warns warn.
type oldBlocksDown struct {
	*embedded.DB
	clk          *clock.Fake
	oldest, back time.Time
	warn         string
}

func (s oldBlocksDown) QueryRange(ctx context.Context, q string, r signals.Range) (*signals.Result, error) {
	res, err := s.DB.QueryRange(ctx, q, r)
	if err != nil || !r.Start.Before(s.oldest) || !s.clk.Now().Before(s.back) {
		return res, err
	}
	out := *res
	out.Warnings = append(slices.Clone(res.Warnings), s.warn)
	return &out, nil
}

// TestPartialGuardrailReadIsReportedAsTheCyclesPartialReads: the engine
// takes the lead as checkout's v2 goes live, so the guardrail reads the
// window before activation from the store, whose store of older data is
// down: the read warns. The instant reads are whole, so the guardrail is
// not held as a whole (GuardrailHeld empty), but the watch the read covers
// is: inconclusive, nothing rolled back, and the cycle lists the read with
// its partial reads and counts it (governor_engine_partial_reads_total).
// Once the store is back the version is judged.
func TestPartialGuardrailReadIsReportedAsTheCyclesPartialReads(t *testing.T) {
	ctx := context.Background()
	act := benchT0.Add(20 * time.Minute)
	db := embeddedStore(t)
	writeService(t, db, "checkout", benchT0, act.Add(10*time.Minute))
	clk := clock.NewFake(benchT0)
	st := memStore(t, clk)
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	for i, rate := range []float64{100, 50} {
		if i == 1 {
			clk.Set(act)
		}
		rs := &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}}}}
		p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "test", Rebase: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	const warn = "partial response: store 3 (older blocks) unreachable"
	back := act.Add(3 * time.Minute)
	src := oldBlocksDown{DB: db, clk: clk, oldest: act, back: back, warn: warn}
	reader, err := signals.NewReader(src, signals.ReaderOptions{})
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
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: src, Reader: reader}, Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard,
		Fleet: heartbeats{clk: clk, until: map[string]time.Time{"checkout": {}}}, Events: evs, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	held, judged := 0, false
	for at := act.Add(10 * time.Second); at.Before(act.Add(6*time.Minute)) && !judged; at = at.Add(10 * time.Second) {
		clk.Set(at)
		res, err := e.Tick(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if res.GuardrailHeld != "" {
			t.Fatalf("at +%s: guardrail held as a whole: %q", at.Sub(act), res.GuardrailHeld)
		}
		var d guardrail.Decision
		for _, x := range guard.Decisions() {
			if x.Version == 2 {
				d = x
				break
			}
		}
		if d.RollbackVersion != 0 {
			t.Fatalf("at +%s: rolled back: %s", at.Sub(act), d.Reason)
		}
		if !strings.HasPrefix(d.Reason, "metrics partial: ") {
			if len(res.Partial) != 0 {
				t.Fatalf("at +%s: partial reads %q", at.Sub(act), res.Partial)
			}
			judged = d.Final
			continue
		}
		held++
		if d.Verdict != guardrail.Inconclusive || d.Final || !strings.Contains(d.Reason, warn) {
			t.Fatalf("at +%s: %s final %v: %s", at.Sub(act), d.Verdict, d.Final, d.Reason)
		}
		if len(res.Partial) != 1 || !strings.HasPrefix(d.Reason, res.Partial[0]) || !strings.HasPrefix(res.Partial[0], "metrics partial: offered_load of checkout from ") {
			t.Fatalf("at +%s: partial reads %q, reason %q", at.Sub(act), res.Partial, d.Reason)
		}
	}
	if held == 0 || !judged {
		t.Fatalf("held %d cycles, judged %v", held, judged)
	}
	if got := testutil.ToFloat64(e.metrics.partial); got != float64(held) {
		t.Fatalf("governor_engine_partial_reads_total %v, want %d", got, held)
	}
	if v, err := st.Active(ctx, "checkout"); err != nil || v.Number != 2 {
		t.Fatalf("checkout active v%d (%v)", v.Number, err)
	}
}

// TestHeldCyclesLeaveTheVersionUnjudgedAtTheMaximumWait: the store holding
// checkout's series stays unavailable from v2's activation on, so every
// cycle's snapshot is partial and the engine holds the guardrail. At
// MaxWait after activation + Settle (as for the guardrail's own partial
// reads) both v2 watches end inconclusive for good, each with a
// guardrail_inconclusive event saying the metrics were partial; nothing is
// rolled back and the guardrail watches neither service any more.
func TestHeldCyclesLeaveTheVersionUnjudgedAtTheMaximumWait(t *testing.T) {
	ctx := context.Background()
	act := benchT0.Add(20 * time.Minute)
	db := embeddedStore(t)
	writeService(t, db, "checkout", benchT0, act.Add(10*time.Minute))
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
	const warn = "partial response: store 2 unreachable"
	src := lossySource{db: db, from: act, to: act.Add(time.Hour), hide: []string{"checkout"}, warn: warn}
	reader, err := signals.NewReader(src, signals.ReaderOptions{})
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
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: src, Reader: reader}, Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	fleet := heartbeats{clk: clk, until: map[string]time.Time{"checkout": {}, "cart": {}}}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard, Fleet: fleet,
		Events: evs, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	maxWait := act.Add(30*time.Second + 6*time.Minute) // activation + Settle + MaxWait (3 windows)
	const reason = "metrics partial: request_rate: " + warn
	final := map[string]guardrail.Decision{}
	for at := act.Add(-time.Minute); at.Before(act.Add(10 * time.Minute)); at = at.Add(10 * time.Second) {
		clk.Set(at)
		res, err := e.Tick(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if at.After(act) && !at.Before(act.Add(10*time.Second)) && res.GuardrailHeld != reason {
			t.Fatalf("at +%s: guardrail held %q, want %q", at.Sub(act), res.GuardrailHeld, reason)
		}
		for _, d := range res.Decisions {
			if d.RollbackVersion != 0 || !d.Final || d.Verdict != guardrail.Inconclusive {
				t.Fatalf("at +%s: %s v%d %s (rollback v%d): %s", at.Sub(act), d.Service, d.Version, d.Verdict, d.RollbackVersion, d.Reason)
			}
			if _, dup := final[d.Service]; dup {
				t.Fatalf("at +%s: %s decided twice", at.Sub(act), d.Service)
			}
			final[d.Service] = d
		}
		if at.Before(maxWait) && len(final) > 0 {
			t.Fatalf("at +%s: decided %+v before the maximum wait", at.Sub(act), final)
		}
	}
	for _, svc := range []string{"checkout", "cart"} {
		d, ok := final[svc]
		if !ok {
			t.Fatalf("%s v2: no final decision within 10m of a partial store (MaxWait 6m); still watched: %v", svc, guard.Watching(svc))
		}
		if d.Version != 2 || !d.At.Equal(maxWait) || d.Reason != "inconclusive within the maximum wait: "+reason {
			t.Fatalf("%s: v%d at +%s: %q", svc, d.Version, d.At.Sub(act), d.Reason)
		}
		if guard.Watching(svc) {
			t.Fatalf("%s still watched after its final decision", svc)
		}
		if v, err := st.Active(ctx, svc); err != nil || v.Number != 2 {
			t.Fatalf("%s active v%d (%v)", svc, v.Number, err)
		}
	}
	got := evs.Events(events.GuardrailInconclusive)
	if len(got) != 2 {
		t.Fatalf("guardrail_inconclusive events %+v, want one per service", got)
	}
	for _, ev := range got {
		if !strings.Contains(ev.Message, reason) || !ev.At.Equal(maxWait) {
			t.Fatalf("event %+v", ev)
		}
	}
	if rb := evs.Events(events.AutoRollback); len(rb) != 0 {
		t.Fatalf("auto_rollback events %+v", rb)
	}
}

// downBreakers is the embedded store whose breaker query fails, as a
// Prometheus that times out on it.
type downBreakers struct{ *embedded.DB }

func (s downBreakers) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	if q == breakerQuery {
		return nil, errors.New("query timed out")
	}
	return s.DB.Query(ctx, q, at)
}

// failingQueries fails every query.
type failingQueries struct{ signals.Source }

func (failingQueries) Query(context.Context, string, time.Time) (*signals.Result, error) {
	return nil, errors.New("query timed out")
}

// TestFailedIncidentReadHoldsTheGuardrail: checkout's v2 goes live while
// the breaker query fails. A breaker open that the engine cannot see would
// be blamed on v2, so the guardrail is held for every such cycle (its
// reason says which read failed), as for a partial incident read, and v2
// stays watched. A failed downstream latency read holds it too.
func TestFailedIncidentReadHoldsTheGuardrail(t *testing.T) {
	ctx := context.Background()
	act := benchT0.Add(20 * time.Minute)
	db := embeddedStore(t)
	writeService(t, db, "checkout", benchT0, act.Add(10*time.Minute))
	clk := clock.NewFake(benchT0)
	st := memStore(t, clk)
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	for i, rate := range []float64{100, 50} {
		if i == 1 {
			clk.Set(act)
		}
		rs := &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}}}}
		p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "test", Rebase: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
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
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: db, Reader: reader}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard,
		Fleet: heartbeats{clk: clk, until: map[string]time.Time{"checkout": {}}}, Breakers: downBreakers{db},
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	const want = "incident read failed: evaluate: breakers: query timed out"
	for at := act.Add(10 * time.Second); at.Before(act.Add(3 * time.Minute)); at = at.Add(10 * time.Second) {
		clk.Set(at)
		res, err := e.Tick(ctx, at)
		if err == nil || !strings.Contains(err.Error(), "evaluate: breakers: query timed out") {
			t.Fatalf("at +%s: error %v, want the breaker read's", at.Sub(act), err)
		}
		if res.GuardrailHeld != want || len(res.Decisions) != 0 {
			t.Fatalf("at +%s: guardrail held %q, want %q; decisions %+v", at.Sub(act), res.GuardrailHeld, want, res.Decisions)
		}
		if !guard.Watching("checkout") {
			t.Fatalf("at +%s: checkout v2 no longer watched", at.Sub(act))
		}
	}

	// The downstream latency read failing holds it too.
	e2 := &Evaluator{o: Options{Breakers: failingQueries{}, Guard: memGuard(t)}}
	if _, err := e2.slowDownstreams(ctx, act); err == nil {
		t.Fatal("failed downstream latency read: no error")
	}
	if got := e2.guardHold(&signals.Snapshot{}); got != "incident read failed: evaluate: downstream latency: query timed out" {
		t.Fatalf("guardrail held %q after a failed downstream latency read", got)
	}
}

// TestFewerInstancesReportingHoldsCuts: ten services run two instances
// each in the store. While the delivery ledger has a third live instance
// of each that is not scraped, the summed request rates lack its traffic:
// the cycle proposes no ceiling cut, saying how many instances reported of
// how many, and still proposes the raises. With every live instance
// reporting, the same fleet gets its cuts.
func TestFewerInstancesReportingHoldsCuts(t *testing.T) {
	const services = 10
	for _, tt := range []struct {
		name string
		live int // live instances a service in the ledger
		held string
	}{
		{"every instance reports", 2, ""},
		{"one of three not scraped", 3, "metrics partial: 2 of 3 instances reported (expected: the live instances of the delivery ledger)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := embeddedStore(t)
			fillStore(t, db, services, 2)
			clk := clock.NewFake(benchT0.Add(-10 * time.Minute)) // the starting versions are old: not guarded
			st := memStore(t, clk)
			ins := liveFleet(t, st, services, tt.live)
			clk.Set(benchT0.Add(5 * time.Minute))
			reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
			if err != nil {
				t.Fatal(err)
			}
			tracker, rec := testScoring(t)
			e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Fleet: fleetOf{ins},
				Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			cuts, raises, held := 0, 0, 0
			for range 3 {
				res, err := e.Tick(ctx, clk.Now())
				if err != nil {
					t.Fatal(err)
				}
				clk.Advance(10 * time.Second)
				for _, r := range res.Recommendations {
					if r.Ruleset != nil && r.Evidence.Ceiling.To < r.Evidence.Ceiling.From {
						cuts++
					}
					if r.Ruleset != nil && r.Evidence.Ceiling.To > r.Evidence.Ceiling.From {
						raises++
					}
					if tt.held != "" && strings.HasPrefix(r.Reason, tt.held) {
						held++
						if r.Ruleset != nil || !r.Inconclusive || !strings.Contains(r.Reason, "lower the ceiling") {
							t.Errorf("%s: %+v", r.Service, r)
						}
					}
				}
			}
			if raises == 0 {
				t.Errorf("no raise proposed")
			}
			switch {
			case tt.held == "" && cuts == 0:
				t.Fatalf("no cut with every instance reporting: %+v", e.Recommendations())
			case tt.held != "" && (cuts != 0 || held == 0):
				t.Fatalf("%d cuts proposed, %d held: %+v", cuts, held, e.Recommendations())
			}
		})
	}
}

// TestFewerReporting: only a ceiling cut is held, and only while fewer
// instances report than the ledger has live and expected to report; the
// reason counts those left out as joining or leaving.
func TestFewerReporting(t *testing.T) {
	rec := func(from, to float64) recommend.Recommendation {
		return recommend.Recommendation{Ruleset: &rules.Ruleset{}, Evidence: &recommend.Evidence{Ceiling: recommend.Ceiling{From: from, To: to}}}
	}
	in := func(reporting int) recommend.Input {
		return recommend.Input{Entry: &signals.Entry{Reporting: reporting}}
	}
	for _, tt := range []struct {
		name string
		in   recommend.Input
		rec  recommend.Recommendation
		fc   fleetCount
		held string // the reason's beginning after partialPrefix, "" if not held
	}{
		{"cut, one not scraped", in(2), rec(100, 60), fleetCount{3, 3}, "2 of 3 instances reported (expected: the live instances of the delivery ledger): "},
		{"cut, none reporting", in(0), rec(100, 60), fleetCount{3, 3}, "0 of 3 instances reported"},
		{"cut, one not scraped while one joins", in(2), rec(100, 60), fleetCount{4, 3},
			"2 of 3 instances reported (expected: the live instances of the delivery ledger), not counting 1 joining or leaving (first heard less than 1m0s ago, or silent past a heartbeat): "},
		{"cut, every one reporting", in(3), rec(100, 60), fleetCount{3, 3}, ""},
		{"cut, more reporting than live", in(4), rec(100, 60), fleetCount{3, 3}, ""},
		{"cut, the others joining or leaving", in(2), rec(100, 60), fleetCount{4, 2}, ""},
		{"cut without a ledger", in(1), rec(100, 60), fleetCount{}, ""},
		{"raise", in(2), rec(100, 130), fleetCount{3, 3}, ""},
		{"re-split", in(2), rec(100, 100), fleetCount{3, 3}, ""},
		{"breakers only", in(2), rec(0, 0), fleetCount{3, 3}, ""},
		{"nothing proposed", in(2), recommend.Recommendation{}, fleetCount{3, 3}, ""},
		{"no signals", recommend.Input{}, rec(100, 60), fleetCount{3, 3}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			why := fewerReporting(tt.in, tt.rec, tt.fc, time.Minute)
			if (why != "") != (tt.held != "") {
				t.Fatalf("held %q, want held %v", why, tt.held != "")
			}
			if tt.held != "" && !strings.HasPrefix(why, partialPrefix+tt.held) {
				t.Fatalf("reason %q, want it to begin %q", why, partialPrefix+tt.held)
			}
		})
	}
}

// TestExpectedReporting: a live instance of the ledger is expected to
// report metrics once first heard from a grace ago, while it heartbeats;
// an unknown time does not leave it out.
func TestExpectedReporting(t *testing.T) {
	at := benchT0
	ins := func(lastSeen time.Duration, beatMS int64) distribution.Instance {
		in := distribution.Instance{HeartbeatMS: beatMS}
		if lastSeen >= 0 {
			in.LastSeen = at.Add(-lastSeen)
		}
		return in
	}
	for _, tt := range []struct {
		name  string
		in    distribution.Instance
		first time.Time
		want  bool
	}{
		{"settled, heartbeating", ins(3*time.Second, 10_000), at.Add(-10 * time.Minute), true},
		{"joined 59s ago", ins(0, 10_000), at.Add(-59 * time.Second), false},
		{"joined a grace ago", ins(0, 10_000), at.Add(-time.Minute), true},
		{"one heartbeat late by less than half", ins(14*time.Second, 10_000), at.Add(-time.Hour), true},
		{"missed a heartbeat", ins(16*time.Second, 10_000), at.Add(-time.Hour), false},
		{"a heartbeat of 2s, 4s silent: within the 5s margin", ins(4*time.Second, 2_000), at.Add(-time.Hour), true},
		{"missed a heartbeat of 2s and the margin", ins(8*time.Second, 2_000), at.Add(-time.Hour), false},
		{"heartbeat of 30s", ins(40*time.Second, 30_000), at.Add(-time.Hour), true},
		{"heartbeat unknown: 10s", ins(16*time.Second, 0), at.Add(-time.Hour), false},
		{"heard after the cycle's time", distribution.Instance{LastSeen: at.Add(2 * time.Second), HeartbeatMS: 10_000}, at.Add(-time.Hour), true},
		{"first heard unknown", ins(0, 10_000), time.Time{}, true},
		{"last heard unknown", ins(-1, 10_000), at.Add(-time.Hour), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := expectedReporting(tt.in, tt.first, at, time.Minute); got != tt.want {
				t.Fatalf("expected %v, want %v", got, tt.want)
			}
		})
	}
}

// churningFleet is a delivery ledger whose records change with the clock:
// at returns the instances of every service at a time.
type churningFleet struct {
	clk *clock.Fake
	at  func(now time.Time) []distribution.Instance
}

func (f churningFleet) Instances(context.Context, string) ([]distribution.Instance, error) {
	return f.at(f.clk.Now()), nil
}

// heartbeating is the ledger record at now of an instance first heard at
// first that heartbeats every 10 s until it stops at stop (zero: never):
// GONE once silent for 35 s, as the ledger's defaults.
func heartbeating(svc, name string, first, stop, now time.Time) distribution.Instance {
	last := first.Add(now.Sub(first).Truncate(10 * time.Second))
	if !stop.IsZero() && last.After(stop) {
		last = stop
	}
	in := distribution.Instance{Service: svc, Instance: name, State: distribution.StateSynced, Since: first,
		LastSeen: last, HeartbeatMS: 10_000}
	if now.Sub(last) > 35*time.Second {
		in.State, in.Since = distribution.StateGone, last.Add(35*time.Second)
	}
	return in
}

// TestChurnDoesNotHoldCuts: ten services run two instances each in the
// store, which reports two instances of each throughout. In a rolling
// deploy the ledger hears from each replacement as its predecessor stops,
// every 30 s, and keeps the predecessor live until GONE: it has three live
// most cycles. The metrics count an instance only once scraped and drop
// it as soon as it stops, so two report: no cut is held for it. An
// instance that has heartbeated for minutes without being scraped is a
// scrape gap: every cut is held.
func TestChurnDoesNotHoldCuts(t *testing.T) {
	const services = 10
	start := benchT0.Add(2 * time.Minute)
	old := benchT0.Add(-10 * time.Minute)
	for _, tt := range []struct {
		name  string
		fleet func(svc string, now time.Time) []distribution.Instance
		held  bool
	}{
		{"rolling deploy", func(svc string, now time.Time) []distribution.Instance {
			var out []distribution.Instance
			for k := range 2 { // old-k replaced by new-k at start+30k s
				at := start.Add(time.Duration(k) * 30 * time.Second)
				out = append(out, heartbeating(svc, fmt.Sprint("old-", k), old, at, now))
				if !now.Before(at) {
					out = append(out, heartbeating(svc, fmt.Sprint("new-", k), at, time.Time{}, now))
				}
			}
			return out
		}, false},
		{"scrape gap", func(svc string, now time.Time) []distribution.Instance {
			return []distribution.Instance{
				heartbeating(svc, "0", old, time.Time{}, now),
				heartbeating(svc, "1", old, time.Time{}, now),
				heartbeating(svc, "not-scraped", start.Add(-3*time.Minute), time.Time{}, now),
			}
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := embeddedStore(t)
			fillStore(t, db, services, 2)
			clk := clock.NewFake(old)
			st := memStore(t, clk)
			liveFleet(t, st, services, 0)
			fleet := churningFleet{clk: clk, at: func(now time.Time) []distribution.Instance {
				var out []distribution.Instance
				for s := range services {
					out = append(out, tt.fleet(fmt.Sprintf("svc-%04d", s), now)...)
				}
				return out
			}}
			clk.Set(start)
			reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
			if err != nil {
				t.Fatal(err)
			}
			tracker, rec := testScoring(t)
			e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Fleet: fleet,
				Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			cuts, held := 0, 0
			for range 12 {
				res, err := e.Tick(ctx, clk.Now())
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range res.Recommendations {
					if r.Evidence == nil || !(r.Evidence.Ceiling.To < r.Evidence.Ceiling.From) {
						continue
					}
					switch {
					case r.Ruleset != nil:
						cuts++
					case strings.HasPrefix(r.Reason, partialPrefix):
						held++
						if !tt.held {
							t.Errorf("%s: cut held at %s: %s", r.Service, clk.Now().Sub(start), r.Reason)
						}
					}
				}
				clk.Advance(10 * time.Second)
			}
			switch {
			case tt.held && (cuts != 0 || held == 0):
				t.Fatalf("%d cuts proposed, %d held", cuts, held)
			case !tt.held && cuts == 0:
				t.Fatalf("no cut proposed")
			}
		})
	}
}
