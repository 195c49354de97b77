package evaluate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// newEmergencyEval is an evaluator reading versions, the audit log of
// audit and the watermark w (nil: in memory).
func newEmergencyEval(t *testing.T, reader *signals.Reader, versions versioning.Reader, audit versioning.Auditor, w Watermark, sink events.Sink) *Evaluator {
	t.Helper()
	tracker, err := loadscore.New(loadscore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recommend.New(recommend.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: versions, Audit: audit, Watermark: w,
		Events: sink, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// flakyVersions fails Get for the services in fail.
type flakyVersions struct {
	versioning.Reader
	fail map[string]bool
}

func (f flakyVersions) Get(ctx context.Context, service string, n int64) (versioning.Version, error) {
	if f.fail[service] {
		return versioning.Version{}, errors.New("store unavailable")
	}
	return f.Reader.Get(ctx, service, n)
}

// TestEmergencyPublish: the evaluator announces each emergency version once,
// when it sees it go active; not again on later cycles, not after a restart,
// not for one that was already active before the engine started, and not
// for ordinary versions.
func TestEmergencyPublish(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk := clock.NewFake(benchT0)
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	root := versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}
	rs := func(svc string, rate float64) *rules.Ruleset {
		return &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}}}}
	}
	publish := func(svc string, rate float64) versioning.Version {
		t.Helper()
		p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs(svc, rate), Author: alice, Reason: "change", Rebase: true})
		if err != nil {
			t.Fatal(err)
		}
		v, err := st.Approve(ctx, svc, p.Number, bob, "ok")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	emergency := func(svc string, rate float64) versioning.Version {
		t.Helper()
		v, err := st.EmergencyPublish(ctx, versioning.Proposal{Ruleset: rs(svc, rate), Author: root, Reason: "stop the bleeding", Rebase: true})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Emergency || !v.Active {
			t.Fatalf("emergency publish gave %+v", v)
		}
		return v
	}
	publish("a", 100)
	publish("b", 100)
	emergency("b", 50) // before the engine starts: announced by an earlier run
	clk.Advance(time.Minute)

	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	newEval := func(versions versioning.Reader, sink events.Sink) *Evaluator {
		return newEmergencyEval(t, reader, versions, st, nil, sink)
	}
	fail := map[string]bool{}
	evs := events.NewRecorder(100)
	e := newEval(flakyVersions{Reader: st, fail: fail}, evs)
	tick := func(e *Evaluator) error {
		t.Helper()
		_, err := e.Tick(ctx, clk.Now())
		clk.Advance(10 * time.Second)
		return err
	}
	announced := func(want ...int64) {
		t.Helper()
		got := evs.Events(events.EmergencyPublish)
		if len(got) != len(want) {
			t.Fatalf("emergency_publish events %+v, want versions %v", got, want)
		}
		for i, ev := range got {
			d, ok := ev.Detail.(Emergency)
			if ev.Version != want[i] || ev.Severity != events.Warning || !ok || d.Version != want[i] || d.Author != "root" ||
				d.Reason != "stop the bleeding" || !strings.Contains(ev.Message, "emergency") {
				t.Fatalf("event %d: %+v, want version %d", i, ev, want[i])
			}
		}
	}

	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"an emergency version active before the start is not announced", func() {}, nil},
		{"a new emergency version is announced", func() { emergency("a", 60) }, []string{"a v2"}},
		{"and only once", func() {}, []string{"a v2"}},
		{"an ordinary publish is not", func() { publish("a", 70) }, []string{"a v2"}},
		{"a service first seen with an emergency version after the start", func() { emergency("c", 10) }, []string{"a v2", "c v1"}},
		{"another emergency on the same service", func() { emergency("b", 40) }, []string{"a v2", "c v1", "b v3"}},
	}
	for _, s := range steps {
		s.do()
		if err := tick(e); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for range 2 { // later cycles add nothing
			if err := tick(e); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, ev := range evs.Events(events.EmergencyPublish) {
			got = append(got, fmt.Sprintf("%s v%d", ev.Service, ev.Version))
		}
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Fatalf("%s: announced %v, want %v", s.name, got, s.want)
		}
	}
	announced(2, 1, 3)

	// A version that cannot be read is reported once per cycle and
	// announced when it can.
	fail["a"] = true
	emergency("a", 80)
	err = tick(e)
	if err == nil || strings.Count(err.Error(), "store unavailable") != 1 {
		t.Fatalf("tick with an unreadable version: %v", err)
	}
	announced(2, 1, 3)
	delete(fail, "a")
	if err := tick(e); err != nil {
		t.Fatal(err)
	}
	announced(2, 1, 3, 4)

	// A restarted engine announces none of them again, but the next one.
	restarted := events.NewRecorder(100)
	e2 := newEval(st, restarted)
	for range 2 {
		if err := tick(e2); err != nil {
			t.Fatal(err)
		}
	}
	if got := restarted.Events(events.EmergencyPublish); len(got) != 0 {
		t.Fatalf("after a restart: %+v", got)
	}
	emergency("c", 20)
	if err := tick(e2); err != nil {
		t.Fatal(err)
	}
	if got := restarted.Events(events.EmergencyPublish); len(got) != 1 || got[0].Service != "c" || got[0].Version != 2 {
		t.Fatalf("after a restart, a new emergency: %+v", got)
	}
}

// failingMark fails every Advance while fail is set: the process "crashes"
// between the report and the move of the mark.
type failingMark struct {
	Watermark
	fail bool
}

func (f *failingMark) Advance(ctx context.Context, set bool, from, to int64) (bool, error) {
	if f.fail {
		return false, errors.New("injected: crash before the mark moved")
	}
	return f.Watermark.Advance(ctx, set, from, to)
}

// TestEmergencyAtLeastOnce: when the mark cannot move after a report (a
// crash between the two), nothing is lost: the next cycle, and a new
// engine on the same mark, report the publication again under the same
// key; once the mark moved, nobody reports it again.
func TestEmergencyAtLeastOnce(t *testing.T) {
	ctx := context.Background()
	db, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk := clock.NewFake(benchT0)
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	shared := &MemWatermark{}
	mark := &failingMark{Watermark: shared}
	// Every report, as the sink gets it (the Recorder lists a repeated
	// key once).
	var reported []string
	evs := sinkFunc(func(ev events.Event) {
		if ev.Kind == events.EmergencyPublish {
			reported = append(reported, ev.Detail.(Emergency).Key)
		}
	})
	one := newEmergencyEval(t, reader, st, st, mark, evs)
	if _, err := one.Tick(ctx, clk.Now()); err != nil { // sets the mark at the (empty) head
		t.Fatal(err)
	}
	root := versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}
	v, err := st.EmergencyPublish(ctx, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "a", Routes: []rules.Route{{Name: "api",
		Match: rules.Match{PathPrefix: "/"}, RateLimit: &rules.RateLimit{Rate: 5}}}}, Author: root, Reason: "stop the bleeding"})
	if err != nil {
		t.Fatal(err)
	}
	keys := func() []string { return reported }
	mark.fail = true
	clk.Advance(10 * time.Second)
	if _, err := one.Tick(ctx, clk.Now()); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("tick with a failing mark: err %v", err)
	}
	got := keys()
	if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("emergency_publish/a/v%d/audit-", v.Number)) {
		t.Fatalf("reported %q before the failed move, want a's v%d once", got, v.Number)
	}
	// The process dies; a new one (or a new leader) with the same mark.
	two := newEmergencyEval(t, reader, st, st, mark, evs)
	clk.Advance(10 * time.Second)
	if _, err := two.Tick(ctx, clk.Now()); err == nil {
		t.Fatal("the mark still fails: want an error")
	}
	mark.fail = false
	clk.Advance(10 * time.Second)
	if _, err := two.Tick(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if _, err := two.Tick(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	got = keys()
	if len(got) != 3 || got[1] != got[0] || got[2] != got[0] {
		t.Fatalf("reports %q: want the same key three times (two failed moves, one that held), then none", got)
	}
}
