package evaluate

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

// fullState gives f's evaluator the state of n services, each with a
// conclusive healthy baseline and one downstream detector whose daily and
// weekly profiles are full (3,000 samples five minutes apart: ten days),
// the largest a state row gets under the default options, a crossed p99
// warn level, a smoothed load score and a running ceiling controller.
func fullState(b testing.TB, f *failoverEngine, n int) {
	b.Helper()
	ro := recommend.DefaultOptions()
	ro.Thresholds.MinSamples = 100
	thr, err := thresholds.NewRecommender(ro.Thresholds)
	if err != nil {
		b.Fatal(err)
	}
	det, err := thresholds.New(thresholds.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 3000 {
		at := benchT0.Add(time.Duration(i) * 5 * time.Minute)
		p99 := 0.1 + 0.02*math.Sin(2*math.Pi*float64(i)/288) + 0.001*float64(i%7)
		thr.Observe(thresholds.Interval{Time: at, Throughput: 100 + float64(i%13), ErrorRatio: 0.001 * float64(i%5), LatencyP50: p99 / 3, LatencyP99: p99})
		det.Observe(at, p99)
	}
	base, _ := thr.MarshalBinary()
	ds, err := encodeDownstream(&latencyBaseline{p99: 0.1, n: 3000, det: det})
	if err != nil {
		b.Fatal(err)
	}
	f.e.latency = map[string]*latencyBaseline{}
	f.e.o.Levels.raised = map[levelKey]time.Time{}
	for s := range n {
		svc := fmt.Sprintf("svc-%04d", s)
		if err := f.e.o.Recommender.RestoreBaseline(svc, base); err != nil {
			b.Fatal(err)
		}
		lb, err := decodeDownstream(ds)
		if err != nil {
			b.Fatal(err)
		}
		f.e.latency[svc+"/"+fmt.Sprintf("svc-%04d", (s+1)%n)] = lb
		f.e.o.Levels.raised[levelKey{svc, "latency_p99", "warn"}] = benchT0
		controlled(b, f, svc, s)
	}
}

// controlled gives svc a smoothed load score and a ceiling controller
// three cycles into an overload.
func controlled(b testing.TB, f *failoverEngine, svc string, s int) {
	b.Helper()
	active := &versioning.Version{Service: svc, Number: 3, Active: true, Ruleset: &rules.Ruleset{Service: svc,
		Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: 250}}}}}
	for i := range 3 {
		at := benchT0.Add(time.Duration(i) * 10 * time.Second)
		load := 0.8 + 0.01*float64((s+i)%10)
		en := &signals.Entry{Key: signals.Key{Service: svc}, Values: map[signals.Signal]signals.Value{
			signals.CPU: signals.KnownValue(load), signals.Memory: signals.KnownValue(load * (1 << 30)),
			signals.LatencyP99: signals.KnownValue(0.25 * load), signals.LatencyP50: signals.KnownValue(0.05),
			signals.RequestRate: signals.KnownValue(490), signals.ErrorRatio: signals.KnownValue(0.001)}}
		sc := f.e.o.Tracker.Observe(at, en)
		f.e.o.Recommender.Evaluate(recommend.Input{At: at, Service: svc, Score: sc, Entry: en, Active: active, Instances: 2})
	}
}

// BenchmarkStateSave is the cost per cycle of saving the engine state of
// 1,000 services (a baseline and a downstream detector each, profiles
// full, a load score and a ceiling controller each): every=30 (the
// default: about 1/30 of the baselines and detectors a cycle, the scores
// and controllers whole) and every=1 (the whole state every cycle), to
// SQLite (a file) and PostgreSQL.
// bytes/cycle is the state written per cycle, rows/cycle the rows.
func BenchmarkStateSave(b *testing.B) {
	const services = 1000
	for _, db := range []string{"sqlite", "postgres"} {
		for _, every := range []int{30, 1} {
			b.Run(fmt.Sprintf("db=%s/every=%d", db, every), func(b *testing.B) {
				var store StateStore
				if db == "sqlite" {
					store = SQLState{DB: stateSQLite(b), Dialect: migrations.SQLite}
				} else {
					store = SQLState{DB: statePostgres(b)}
				}
				f := newFailoverEngine(b, "a", store)
				fullState(b, f, services)
				st, err := NewState(f.e, StateOptions{Store: store, Leader: "a", Every: every, MaxAge: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				at := benchT0
				var rows, bytes int
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					at = at.Add(10 * time.Second)
					// Between two cycles every score and controller
					// moves: their rows are written each time.
					st.scores, st.ctl = nil, st.ctl[:0]
					s, err := st.Save(ctx, at)
					if err != nil {
						b.Fatal(err)
					}
					rows += s.Rows
					bytes += s.Bytes
				}
				b.ReportMetric(float64(bytes)/float64(b.N), "bytes/cycle")
				b.ReportMetric(float64(rows)/float64(b.N), "rows/cycle")
			})
		}
	}
}

// BenchmarkStateRestore is a takeover: load and restore the state of 1,000
// services (every row) into a fresh evaluator.
func BenchmarkStateRestore(b *testing.B) {
	const services = 1000
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run("db="+db, func(b *testing.B) {
			var store StateStore
			if db == "sqlite" {
				store = SQLState{DB: stateSQLite(b), Dialect: migrations.SQLite}
			} else {
				store = SQLState{DB: statePostgres(b)}
			}
			src := newFailoverEngine(b, "a", store)
			fullState(b, src, services)
			full, _ := NewState(src.e, StateOptions{Store: store, Leader: "a", Every: 1, MaxAge: time.Hour})
			ctx := context.Background()
			if _, err := full.Save(ctx, benchT0); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				f := newFailoverEngine(b, "b", store)
				b.StartTimer()
				s, err := f.st.Restore(ctx, benchT0.Add(time.Second))
				if err != nil || s.Restored[StateBaseline] != services || s.Restored[StateDownstream] != services ||
					s.Restored[StateScores] != 1 || s.Restored[StateControl] != 1 {
					b.Fatalf("restored %+v: %v", s, err)
				}
			}
		})
	}
}

// BenchmarkStateControl is the encoding alone of the two rows written every
// cycle for 1,000 services: the load scores and the controllers.
func BenchmarkStateControl(b *testing.B) {
	const services = 1000
	f := newFailoverEngine(b, "a", &MemState{})
	for s := range services {
		controlled(b, f, fmt.Sprintf("svc-%04d", s), s)
	}
	var buf []byte
	var bytes int
	b.ReportAllocs()
	for b.Loop() {
		sc, err := f.e.o.Tracker.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = f.e.o.Recommender.SaveControllers(buf[:0]); err != nil {
			b.Fatal(err)
		}
		bytes = len(sc) + len(buf)
	}
	b.ReportMetric(float64(bytes), "bytes/cycle")
}
