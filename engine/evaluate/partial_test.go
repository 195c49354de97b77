package evaluate

import (
	"context"
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
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
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
}

func (s lossySource) on(at time.Time) bool { return !at.Before(s.from) && at.Before(s.to) }

func (s lossySource) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	res, err := s.db.Query(ctx, q, at)
	if err != nil || !s.on(at) || !strings.Contains(q, s.only) {
		return res, err
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
// proposes nothing for the services they cover, saying why. Once the
// store is back, the guardrail judges again and v2 stays.
func TestPartialReadHoldsTheGuardrailAndProposals(t *testing.T) {
	ctx := context.Background()
	act := benchT0.Add(20 * time.Minute)
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	writeService(t, db, "checkout", benchT0, act.Add(10*time.Minute))
	writeService(t, db, "cart", benchT0, act.Add(10*time.Minute))
	clk := clock.NewFake(benchT0)
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
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
	partialTicks, judgedAfter := 0, 0
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
			if res.GuardrailHeld != "" || len(res.Partial) > 0 {
				t.Fatalf("at +%s: held %q, partial %q on whole reads", at.Sub(act), res.GuardrailHeld, res.Partial)
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
	if got := testutil.ToFloat64(e.metrics.partial); got != float64(partialTicks) {
		t.Fatalf("governor_engine_partial_reads_total %v, want %d", got, partialTicks)
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
// service's recommendation says why.
func TestOnlyPartialDataWarningsWithholdProposals(t *testing.T) {
	tests := []struct {
		name, warn, only string
		partial          bool
	}{
		{"info", "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"governor_sdk_inflight\"", "", false},
		{"PromQL warning", "PromQL warning: encountered a mix of histograms and floats for metric name \"x\"", "", false},
		{"partial response", "partial response: store 2 unreachable", "", true},
		{"thanos store timeout", "failed to receive any data from Addr: 10.0.0.7:10901 LabelSets: {replica=\"b\"}: context deadline exceeded", "", true},
		// CPU and memory weigh nothing in this score, and the request rate
		// is whole: only the engine's rule withholds the proposals.
		{"process metrics partial", "partial response: store 2 unreachable", "process_cpu_seconds_total", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const services = 10
			ctx := context.Background()
			db, err := embedded.Open(embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			fillStore(t, db, services, 1)
			clk := clock.NewFake(benchT0.Add(-10 * time.Minute))
			st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
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
			src := lossySource{db: db, from: benchT0, to: at.Add(time.Hour), warn: tt.warn, only: tt.only}
			reader, err := signals.NewReader(src, signals.ReaderOptions{MaxAge: -1})
			if err != nil {
				t.Fatal(err)
			}
			tracker, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
			if err != nil {
				t.Fatal(err)
			}
			ro := recommend.DefaultOptions()
			ro.MinScores = 1
			rec, err := recommend.New(ro)
			if err != nil {
				t.Fatal(err)
			}
			e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st,
				Proposer: &recommend.Proposer{Store: st, Clock: clk}, Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			var res Result
			submitted := 0
			for i := range 3 {
				if res, err = e.Tick(ctx, at.Add(time.Duration(i)*10*time.Second)); err != nil {
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
			for _, r := range e.Recommendations() {
				if got := strings.HasPrefix(r.Reason, "metrics partial: "); got != tt.partial || tt.partial && !strings.Contains(r.Reason, tt.warn) {
					t.Fatalf("%s: %q", r.Service, r.Reason)
				}
			}
			if tt.partial != (len(res.Partial) > 0) {
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
