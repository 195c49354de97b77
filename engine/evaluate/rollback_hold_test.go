package evaluate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// regressedSeries answers a window ending before split as healthy and one
// after it with half the requests failing.
type regressedSeries struct{ split time.Time }

func (s regressedSeries) Samples(_ context.Context, _ string, m guardrail.Metric, from, to time.Time, step time.Duration) ([]float64, error) {
	var out []float64
	for t := from; !t.After(to); t = t.Add(step) {
		after := !to.Before(s.split)
		v := 0.0
		switch m {
		case guardrail.OfferedLoad:
			v = 100
		case guardrail.ErrorRatio:
			if after {
				v = 0.5
			}
		case guardrail.LatencyP99:
			v = 0.05
		case guardrail.ShedRatio:
			v = 0
		case guardrail.GoodputShare, guardrail.AdmittedShare:
			v = 1
			if after && m == guardrail.GoodputShare {
				v = 0.5
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// TestNothingProposedOnTopOfARollbackInItsCycle: a cycle in which the
// guardrail rolls a version back proposes nothing for that service: the
// rollback is watched from the next cycle, and a version made now would
// replace it unwatched and be judged against the regression's window.
func TestNothingProposedOnTopOfARollbackInItsCycle(t *testing.T) {
	const services, instances = 10, 2
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillStore(t, db, services, instances)
	clk := clock.NewFake(benchT0.Add(-10 * time.Minute))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	var ins []distribution.Instance
	split := benchT0.Add(3 * time.Minute)
	for s := range services {
		svc := fmt.Sprintf("svc-%04d", s)
		for i, rate := range []float64{80, 70} {
			if i == 1 {
				clk.Set(split) // the second version went live 2m before the tick: judged now
			} else {
				clk.Set(benchT0.Add(-10 * time.Minute))
			}
			rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
				RateLimit: &rules.RateLimit{Rate: rate}, Concurrency: &rules.Concurrency{Min: 2, Max: 50}}},
				// A slow-call threshold far from what the baseline
				// recommends: the recommender proposes to move it.
				Downstreams: []rules.Downstream{{Name: "payments", Breaker: &rules.Breaker{SlowCallRatio: 0.5, SlowCall: rules.Duration(20 * time.Second)}}}}
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
	ro.Thresholds.MinSamples = 1 // conclusive at once
	rec, err := recommend.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	guard, err := guardrail.New(guardrail.Options{Store: st, Series: regressedSeries{split: split}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard,
		Proposer: &recommend.Proposer{Store: st, Clock: clk}, Fleet: fleetOf{ins}, Events: events.NewRecorder(100),
		Band: func(string) recommend.Band { return recommend.Band{MaxChangePerHour: 1} }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Tick(ctx, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	rolled := map[string]int64{}
	for _, d := range res.Decisions {
		if d.RollbackVersion != 0 {
			rolled[d.Service] = d.RollbackVersion
		}
	}
	if len(rolled) != services {
		t.Fatalf("%d rollbacks, want %d: %+v", len(rolled), services, res.Decisions)
	}
	for _, s := range res.Submitted {
		t.Errorf("%s v%d submitted in the cycle that rolled it back to v%d", s.Version.Service, s.Version.Number, rolled[s.Version.Service])
	}
	held := 0
	for _, r := range res.Recommendations {
		if strings.HasPrefix(r.Reason, "held: the guardrail rolled back") {
			held++
		}
	}
	for svc, n := range rolled {
		if act, err := st.Active(ctx, svc); err != nil || act.Number != n {
			t.Errorf("%s: active v%d (%v), want the rollback v%d", svc, act.Number, err, n)
		}
	}
	if held != services {
		t.Errorf("%d recommendations say they were held for the rollback, want %d", held, services)
	}
	// The next cycle watches the rollbacks: still nothing proposed.
	clk.Advance(10 * time.Second)
	if res, err = e.Tick(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Submitted {
		t.Errorf("%s v%d submitted while the rollback is judged", s.Version.Service, s.Version.Number)
	}
}
