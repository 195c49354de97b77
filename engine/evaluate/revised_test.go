package evaluate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestTickRevisedProposalEvent: a recommendation that waits for approval is
// proposed once; when the next cycles move it, the open proposal is revised
// in place and the event says "revised", not "proposed".
func TestTickRevisedProposalEvent(t *testing.T) {
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
	for s := range services {
		svc := fmt.Sprintf("svc-%04d", s)
		rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: 80}, Concurrency: &rules.Concurrency{Min: 2, Max: 50}}}}
		p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "start"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
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
	tracker, rec := testScoring(t)
	evs := events.NewRecorder(1000)
	reg := prometheus.NewRegistry()
	// Every change waits for approval; a tiny deadband makes every move of
	// the controller a ruleset revision.
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st,
		Proposer: &recommend.Proposer{Store: st, Clock: clk, OpenDeadband: 1e-6}, Fleet: fleetOf{ins}, Events: evs, Registerer: reg,
		Band: func(string) recommend.Band { return recommend.Band{Manual: true} }})
	if err != nil {
		t.Fatal(err)
	}
	var proposed, revised []recommend.Submitted
	for range 4 {
		res, err := e.Tick(ctx, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Submitted {
			if s.Revised {
				revised = append(revised, s)
			} else {
				proposed = append(proposed, s)
			}
		}
		clk.Advance(10 * time.Second)
	}
	if len(proposed) == 0 || len(revised) == 0 {
		t.Fatalf("%d proposed, %d revised; want both", len(proposed), len(revised))
	}
	numbers := map[string]int64{}
	for _, s := range proposed {
		if s.AutoApplied || s.Version.State != versioning.StateProposed {
			t.Fatalf("proposed %+v", s)
		}
		if n, ok := numbers[s.Version.Service]; ok {
			t.Errorf("%s proposed twice (v%d, v%d) instead of revised", s.Version.Service, n, s.Version.Number)
		}
		numbers[s.Version.Service] = s.Version.Number
	}
	for _, s := range revised {
		if s.Unchanged || s.Version.Revision < 1 || s.Version.Number != numbers[s.Version.Service] {
			t.Errorf("revised %s v%d revision %d unchanged %v; proposed as v%d", s.Version.Service, s.Version.Number,
				s.Version.Revision, s.Unchanged, numbers[s.Version.Service])
		}
	}
	var saidProposed, saidRevised int
	for _, ev := range evs.Events(events.Proposal) {
		switch {
		case strings.Contains(ev.Message, " revised (revision "):
			saidRevised++
		case strings.Contains(ev.Message, " proposed, waits for approval"):
			saidProposed++
		default:
			t.Errorf("proposal event says neither proposed nor revised: %s", ev.Message)
		}
	}
	if saidProposed != len(proposed) || saidRevised != len(revised) {
		t.Errorf("events: %d proposed, %d revised; submitted %d proposed, %d revised", saidProposed, saidRevised, len(proposed), len(revised))
	}
	if got := testutil.ToFloat64(e.metrics.proposals.WithLabelValues("revised")); got != float64(len(revised)) {
		t.Errorf("revised outcome counted %v, want %d", got, len(revised))
	}
	if got := testutil.ToFloat64(e.metrics.proposals.WithLabelValues("proposed")); got != float64(len(proposed)) {
		t.Errorf("proposed outcome counted %v, want %d", got, len(proposed))
	}
}
