package evaluate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestACycleOfATickNoLongerLedWritesNothing: engine-a runs the cycle of
// tick T under its fence after engine-b claimed T+10s (a froze past its
// lease, its context not ended). Of the overloaded services' cuts, which
// would apply themselves, the first is refused with ErrFenced and the cycle
// submits nothing more: the result's errors say, once, that a is not
// leading any more, naming both ticks and b; no version, audit entry or
// auto_apply event is left. b's cycle under its own tick applies them.
func TestACycleOfATickNoLongerLedWritesNothing(t *testing.T) {
	const services, instances = 10, 2
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillStore(t, db, services, instances)
	clk := clock.NewFake(benchT0.Add(-10 * time.Minute)) // the starting versions are old: not guarded
	url := testenv.Postgres(t)
	st, err := postgres.Open(ctx, postgres.Options{URL: url, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
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
	clk.Set(benchT0.Add(5 * time.Minute))
	newEval := func() (*Evaluator, *events.Recorder) {
		reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
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
		guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: db, Reader: reader}})
		if err != nil {
			t.Fatal(err)
		}
		evs := events.NewRecorder(100)
		e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard,
			Proposer: &recommend.Proposer{Store: st, Clock: clk}, Fleet: fleetOf{ins}, Events: evs, Registerer: prometheus.NewRegistry(),
			Band: func(string) recommend.Band { return recommend.Band{MaxChangePerHour: 1} }})
		if err != nil {
			t.Fatal(err)
		}
		return e, evs
	}
	count := func(table string) int {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	stale := clk.Now().Truncate(10 * time.Second)
	current := stale.Add(10 * time.Second)
	for tick, by := range map[time.Time]string{stale: "engine-a", current: "engine-b"} {
		if _, err := admin.Exec(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ($1, $2)`, tick, by); err != nil {
			t.Fatal(err)
		}
	}
	versions, audit := count("rule_versions"), count("rule_audit")

	// Three cycles each, the last at the replica's tick: the first ones
	// warm the recommender up. A cycle's writes carry the fence of the
	// tick the replica claimed last.
	cycles := func(e *Evaluator, f versioning.Fence) (submitted int, fencedErrors []string) {
		for i := 2; i >= 0; i-- {
			at := f.Tick.Add(-time.Duration(i) * 10 * time.Second)
			clk.Set(at)
			res, _ := e.Tick(versioning.WithFence(ctx, f), at)
			submitted += len(res.Submitted)
			for _, msg := range res.Errors {
				if strings.Contains(msg, versioning.ErrFenced.Error()) {
					fencedErrors = append(fencedErrors, msg)
				}
			}
			if n := len(res.Errors); n > 1 {
				t.Fatalf("%s's cycle at %s: errors %q, want at most one: a refused write ends the cycle's writes", f.Holder, at, res.Errors)
			}
		}
		return submitted, fencedErrors
	}
	a, aEvents := newEval()
	submitted, fenced := cycles(a, versioning.Fence{Tick: stale, Holder: "engine-a"})
	want := fmt.Sprintf("engine-a not leading any more: tick %s is older than tick %s claimed by engine-b",
		stale.Format(time.RFC3339Nano), current.Format(time.RFC3339Nano))
	if len(fenced) == 0 || !strings.Contains(fenced[len(fenced)-1], want) {
		t.Fatalf("engine-a's refusals %q, want them to say %q", fenced, want)
	}
	if submitted != 0 || len(aEvents.Events(events.AutoApply)) != 0 {
		t.Fatalf("engine-a submitted %d, events %+v; want nothing", submitted, aEvents.Events(events.AutoApply))
	}
	if v, n := count("rule_versions"), count("rule_audit"); v != versions || n != audit {
		t.Fatalf("engine-a's stale cycles left versions %d→%d, audit entries %d→%d", versions, v, audit, n)
	}

	b, bEvents := newEval()
	submitted, fenced = cycles(b, versioning.Fence{Tick: current, Holder: "engine-b"})
	if len(fenced) != 0 || submitted == 0 || len(bEvents.Events(events.AutoApply)) != submitted {
		t.Fatalf("engine-b submitted %d, %d auto_apply events, refusals %q; want its cuts applied", submitted, len(bEvents.Events(events.AutoApply)), fenced)
	}
	if v := count("rule_versions"); v != versions+submitted {
		t.Fatalf("versions %d→%d, want one per cut of engine-b (%d)", versions, v, submitted)
	}
}
