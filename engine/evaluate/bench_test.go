package evaluate

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

var benchT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fleetOf is a ledger of n instances per service.
type fleetOf struct{ ins []distribution.Instance }

func (f fleetOf) Instances(context.Context, string) ([]distribution.Instance, error) {
	return f.ins, nil
}

var buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// fillStore writes the SDK series of services x instances, one sample every
// 15 s for five minutes, with load that differs per service.
func fillStore(b testing.TB, db *embedded.DB, services, instances int) {
	ctx := context.Background()
	classes := []string{"critical", "core", "browse", "batch"}
	for step := 0; step <= 20; step++ {
		ts := benchT0.Add(time.Duration(step) * 15 * time.Second).UnixMilli()
		app := db.Appender(ctx)
		add := func(v float64, kv ...string) {
			if _, err := app.Append(0, labels.FromStrings(kv...), ts, v); err != nil {
				b.Fatal(err)
			}
		}
		for s := range services {
			svc := fmt.Sprintf("svc-%04d", s)
			load := 0.3 + 0.7*float64(s%10)/10
			for i := range instances {
				inst := fmt.Sprintf("10.%d.%d.%d:8080", s/250, s%250, i)
				base := []string{"job", "governor", "instance", inst, "service", svc}
				with := func(kv ...string) []string { return append(append([]string{}, base...), kv...) }
				n := float64(step) * 15 * 100 * load
				for _, c := range classes {
					add(n, with("__name__", "governor_sdk_requests_total", "route", "api", "class", c, "outcome", "admitted")...)
					add(n*0.02*load, with("__name__", "governor_sdk_requests_total", "route", "api", "class", c, "outcome", "shed")...)
					add(n*0.001, with("__name__", "governor_sdk_request_errors_total", "route", "api", "class", c)...)
				}
				for k, le := range buckets {
					share := min(1, float64(k+1)/float64(len(buckets))*1.5/load)
					add(4*n*share, with("__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", strconv.FormatFloat(le, 'g', -1, 64))...)
				}
				add(4*n, with("__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", "+Inf")...)
				add(4*n, with("__name__", "governor_sdk_request_duration_seconds_count", "route", "api")...)
				add(20*load, with("__name__", "governor_sdk_inflight", "route", "api")...)
				add(25, with("__name__", "governor_sdk_limit", "route", "api")...)
				add(1, with("__name__", "governor_sdk_rules_version")...)
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// fillDownstreams writes, for every service, the SDK series of its calls to
// one downstream (the next service): the breaker state, open on every tenth
// service, and the call latency histogram.
func fillDownstreams(b testing.TB, db *embedded.DB, services, instances int) {
	ctx := context.Background()
	les := []string{"0.005", "0.025", "0.1", "0.5", "+Inf"}
	for step := 0; step <= 20; step++ {
		ts := benchT0.Add(time.Duration(step) * 15 * time.Second).UnixMilli()
		app := db.Appender(ctx)
		for s := range services {
			svc, ds := fmt.Sprintf("svc-%04d", s), fmt.Sprintf("svc-%04d", (s+1)%services)
			state := 0.0
			if s%10 == 0 {
				state = 2
			}
			for i := range instances {
				inst := fmt.Sprintf("10.%d.%d.%d:8080", s/250, s%250, i)
				add := func(v float64, kv ...string) {
					l := labels.FromStrings(append([]string{"job", "governor", "instance", inst, "service", svc, "downstream", ds}, kv...)...)
					if _, err := app.Append(0, l, ts, v); err != nil {
						b.Fatal(err)
					}
				}
				add(state, "__name__", "governor_sdk_breaker_state")
				n := float64(step) * 15 * 50
				for k, le := range les {
					add(n*float64(k+1)/float64(len(les)), "__name__", "governor_sdk_downstream_duration_seconds_bucket", "le", le)
				}
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTick is one evaluation cycle for 1,000 services x 10 instances
// against the embedded store: signals read, scores, downstream breakers and
// latency, recommendations, proposals submitted to SQLite, alert levels and
// the guardrail's pass. Every service calls the next one; every other
// service has a version activated two minutes before the tick that the
// guardrail is judging (its after window still growing, so it is judged at
// every cycle), and every tenth service has its breaker to the next one
// open (a guardrail incident). cpu-ns/op is the process's user+sys CPU time
// per cycle, less sensitive to the machine's load than ns/op.
//
// The first tick lies on the guardrail's grid and reads the windows before
// activation from the store; the measured ticks (1 ms apart, the same
// data) find every grid point of their windows kept, as cycles whose ticks
// fall on the grid do. guard is the guardrail's pass alone with the grid
// tick's snapshot recorded; guard-restart the first pass of a new guard (a
// restart or a leader change), which reads every window from the store.
func BenchmarkTick(b *testing.B) {
	const services, instances = 1000, 10
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fillStore(b, db, services, instances)
	fillDownstreams(b, db, services, instances)
	clk := clock.NewFake(benchT0.Add(-10 * time.Minute))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	version := func(svc string, rate float64) {
		rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}, Concurrency: &rules.Concurrency{Min: 2, Max: 50}}},
			Downstreams: []rules.Downstream{{Name: fmt.Sprintf("svc-%04d", (svcIndex(svc)+1)%services), Breaker: &rules.Breaker{}}}}
		p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "bench", Rebase: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
			b.Fatal(err)
		}
	}
	var ins []distribution.Instance
	for s := range services {
		svc := fmt.Sprintf("svc-%04d", s)
		version(svc, 80)
		for i := range instances {
			ins = append(ins, distribution.Instance{Service: svc, Instance: strconv.Itoa(i), State: distribution.StateSynced})
		}
	}
	clk.Set(benchT0.Add(3 * time.Minute))
	for s := 0; s < services; s += 2 {
		version(fmt.Sprintf("svc-%04d", s), 70) // guarded: it has a parent
	}
	at := benchT0.Add(5 * time.Minute)
	clk.Set(at)
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		b.Fatal(err)
	}
	tracker, rec := testScoring(b)
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: db, Reader: reader}})
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st,
		Proposer: &recommend.Proposer{Store: st, Clock: clk}, Guard: guard, Fleet: fleetOf{ins}, Breakers: db, Levels: DefaultAlertLevels()})
	if err != nil {
		b.Fatal(err)
	}
	res, err := e.Tick(ctx, at)
	if err != nil {
		b.Fatal(err)
	}
	known := 0
	for _, s := range res.Scores {
		if s.Known {
			known++
		}
	}
	if len(res.Scores) != services || known != services {
		b.Fatalf("%d scores, %d known; want %d", len(res.Scores), known, services)
	}
	watching, confounded := 0, 0
	for _, d := range guard.Decisions() {
		if d.Final {
			b.Fatalf("%s v%d decided at the first cycle: %s", d.Service, d.Version, d.Reason)
		}
		if len(d.Checks) > 0 { // watching or inconclusive so far, not settling
			watching++
		}
		if len(d.Confounders) > 0 {
			confounded++
		}
	}
	if watching != services/2 || confounded == 0 {
		b.Fatalf("%d versions judged (want %d), %d with incidents (want some)", watching, services/2, confounded)
	}
	b.Run("cycle", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			at = at.Add(time.Millisecond) // the same data, a new tick
			if _, err := e.Tick(ctx, at); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(services*instances), "instances")
	})
	// The guardrail's pass alone, for the split.
	var active []versioning.Version
	for s := 0; s < services; s += 2 {
		v, err := st.Active(ctx, fmt.Sprintf("svc-%04d", s))
		if err != nil {
			b.Fatal(err)
		}
		active = append(active, v)
	}
	// What a cycle on the guardrail's grid hands it: the snapshot of the
	// first tick (benchT0 + 5m lies on the 10 s grid).
	snap, err := reader.Read(ctx, res.At, signals.PerService)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("guard", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			at = at.Add(time.Millisecond)
			guard.Record(snap)
			if _, err := guard.Observe(ctx, at, active); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
	// The guardrail's first pass after a restart or a leader change: a new
	// guard has seen no snapshot and reads every window from the store.
	b.Run("guard-restart", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			g, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: db, Reader: reader}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := g.Observe(ctx, at, active); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
	// The signal read alone, for the split: as the cycle reads (the shared
	// rate queries from the store's samples), and with every query sent to
	// the store's PromQL engine.
	promqlReader, err := signals.NewReader(promqlOnly{db}, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    *signals.Reader
	}{{"read", reader}, {"read-promql", promqlReader}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if _, err := c.r.Read(ctx, at, signals.PerService); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// promqlOnly hides the store's signals.SeriesSource side: every query goes
// to its PromQL engine.
type promqlOnly struct{ signals.PromQLSource }

// svcIndex is the number in a service name svc-NNNN.
func svcIndex(svc string) int {
	n, _ := strconv.Atoi(svc[len("svc-"):])
	return n
}
