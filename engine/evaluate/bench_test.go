package evaluate

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
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

// BenchmarkTick is one evaluation cycle for 1,000 services x 10 instances
// against the embedded store: signals read, scores, recommendations,
// proposals submitted to SQLite and the guardrail's pass.
func BenchmarkTick(b *testing.B) {
	const services, instances = 1000, 10
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fillStore(b, db, services, instances)
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	var ins []distribution.Instance
	for s := range services {
		svc := fmt.Sprintf("svc-%04d", s)
		rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: 80}, Concurrency: &rules.Concurrency{Min: 2, Max: 50}}}}
		p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
			b.Fatal(err)
		}
		for i := range instances {
			ins = append(ins, distribution.Instance{Service: svc, Instance: strconv.Itoa(i), State: distribution.StateSynced})
		}
	}
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		b.Fatal(err)
	}
	tracker, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
	if err != nil {
		b.Fatal(err)
	}
	ro := recommend.DefaultOptions()
	ro.MinScores = 1
	rec, err := recommend.New(ro)
	if err != nil {
		b.Fatal(err)
	}
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: db, Reader: reader}})
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st,
		Proposer: &recommend.Proposer{Store: st}, Guard: guard, Fleet: fleetOf{ins}, Levels: DefaultAlertLevels()})
	if err != nil {
		b.Fatal(err)
	}
	at := benchT0.Add(5 * time.Minute)
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
	b.Run("cycle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			at = at.Add(time.Millisecond) // the same data, a new tick
			if _, err := e.Tick(ctx, at); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(services*instances), "instances")
	})
	// The signal read alone (the PromQL part of the cycle), for the split.
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reader.Read(ctx, at, signals.PerService); err != nil {
				b.Fatal(err)
			}
		}
	})
}
