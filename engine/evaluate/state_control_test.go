package evaluate

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/rules"
)

// controlLoad is service s's load at scrape step i: a slow wave, each
// service out of phase, through the load score's hysteresis band and
// around the controller's setpoint.
func controlLoad(s, i int) float64 { return 0.55 + 0.4*math.Sin(2*math.Pi*float64(i)/48+float64(s)) }

// fillControl writes the SDK series of n services (one instance each), one
// sample every 15 s for steps scrapes, with the load of controlLoad:
// request rate 400 x load, p99 rising with the load, in-flight 20 x load
// against a limit of 25.
func fillControl(t testing.TB, db *embedded.DB, n, steps int) {
	ctx := context.Background()
	classes := []string{"critical", "core", "browse", "batch"}
	type counters struct{ req, err float64 }
	total := make([]counters, n)
	hist := make([][]float64, n)
	for s := range hist {
		hist[s] = make([]float64, len(buckets)+1)
	}
	for step := range steps {
		ts := benchT0.Add(time.Duration(step) * 15 * time.Second).UnixMilli()
		app := db.Appender(ctx)
		add := func(v float64, kv ...string) {
			if _, err := app.Append(0, labels.FromStrings(kv...), ts, v); err != nil {
				t.Fatal(err)
			}
		}
		for s := range n {
			svc := fmt.Sprintf("svc-%04d", s)
			load := controlLoad(s, step)
			base := []string{"job", "governor", "instance", "10.0.0." + strconv.Itoa(s) + ":8080", "service", svc}
			with := func(kv ...string) []string { return append(append([]string{}, base...), kv...) }
			if step > 0 {
				total[s].req += 15 * 100 * load
				total[s].err += 15 * 100 * load * 0.002
				for k := range buckets {
					hist[s][k] += 4 * 15 * 100 * load * min(1, float64(k+1)/float64(len(buckets))*1.5/load)
				}
				hist[s][len(buckets)] += 4 * 15 * 100 * load
			}
			for _, c := range classes {
				add(total[s].req, with("__name__", "governor_sdk_requests_total", "route", "api", "class", c, "outcome", "admitted")...)
				add(total[s].err, with("__name__", "governor_sdk_request_errors_total", "route", "api", "class", c)...)
			}
			for k, le := range buckets {
				add(hist[s][k], with("__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", strconv.FormatFloat(le, 'g', -1, 64))...)
			}
			add(hist[s][len(buckets)], with("__name__", "governor_sdk_request_duration_seconds_bucket", "route", "api", "le", "+Inf")...)
			add(hist[s][len(buckets)], with("__name__", "governor_sdk_request_duration_seconds_count", "route", "api")...)
			add(20*load, with("__name__", "governor_sdk_inflight", "route", "api")...)
			add(25, with("__name__", "governor_sdk_limit", "route", "api")...)
			add(1, with("__name__", "governor_sdk_rules_version")...)
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// controlReplica is one engine replica of the control tests: scores from
// latency and in-flight, recommendations in a dry run (no proposer: the
// rules store stays the same for every replica) over active versions
// with a 250 req/s ceiling.
type controlReplica struct {
	e  *Evaluator
	st *State
}

func newControlReplica(t testing.TB, name string, reader *signals.Reader, versions versioning.Store, store StateStore, every int) controlReplica {
	t.Helper()
	tracker, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	ro := recommend.DefaultOptions()
	ro.Thresholds.MinSamples = 20
	rec, err := recommend.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: versions, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewState(e, StateOptions{Store: store, Leader: name, Every: every, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return controlReplica{e: e, st: st}
}

// controlStores is the metrics store (services x 30 minutes of
// controlLoad) and a rules store where every service has an active
// version limiting its API route to 250 req/s.
func controlStores(t *testing.T, services int) (*signals.Reader, versioning.Store) {
	t.Helper()
	ctx := context.Background()
	mdb := embeddedStore(t)
	fillControl(t, mdb, services, 121)
	reader, err := signals.NewReader(mdb, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	for s := range services {
		svc := fmt.Sprintf("svc-%04d", s)
		rs := &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: 250}, Concurrency: &rules.Concurrency{Min: 2, Max: 50}}}}
		p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs, Author: alice, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	return reader, st
}

// cycleJSON is what a cycle computed, for an exact comparison: the
// scores and recommendations as the API shows them.
func cycleJSON(t *testing.T, res Result) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Scores          []loadscore.Score
		Recommendations []recommend.Recommendation
	}{res.Scores, res.Recommendations})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStateControlTakeover (SQLite, and PostgreSQL) runs whole cycles (Tick, 10 s apart, the clock
// injected as the tick time) over six services whose load moves through the
// hysteresis band and around the setpoint. Leader A runs 60 cycles and
// saves its state after each. B restores it and then runs the same next 40
// cycles as A: every score (smoothed value, hysteresis side, last known)
// and every recommendation (PID terms, ceiling, reason, evidence) is
// exactly A's. C, which starts from nothing at the same cycle, differs: its
// smoothing restarts, and it recommends nothing until it has MinScores
// known scores.
func TestStateControlTakeover(t *testing.T) {
	testStateControlTakeover(t, SQLState{DB: stateSQLite(t), Dialect: migrations.SQLite})
}

func TestStateControlTakeoverPostgres(t *testing.T) {
	testStateControlTakeover(t, SQLState{DB: statePostgres(t)})
}

func testStateControlTakeover(t *testing.T, store StateStore) {
	ctx := context.Background()
	const services = 6
	reader, versions := controlStores(t, services)
	a := newControlReplica(t, "a", reader, versions, store, 1)
	at := benchT0.Add(2 * time.Minute)
	tick := func(r controlReplica, i int) Result {
		t.Helper()
		res, err := r.e.Tick(ctx, at.Add(time.Duration(i)*10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	const before, after = 60, 40
	overloaded := 0
	for i := range before {
		for _, sc := range tick(a, i).Scores {
			if sc.Overloaded {
				overloaded++
			}
		}
		if _, err := a.st.Save(ctx, at.Add(time.Duration(i)*10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if overloaded == 0 {
		t.Fatal("no score was ever overloaded: the hysteresis is not exercised")
	}
	b := newControlReplica(t, "b", reader, versions, store, 1)
	stats, err := b.st.Restore(ctx, at.Add(before*10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if stats.Restored[StateScores] != 1 || stats.Restored[StateControl] != 1 || stats.Restored[StateBaseline] != services {
		t.Fatalf("restored %v, ignored %v", stats.Restored, stats.Ignored)
	}
	c := newControlReplica(t, "c", reader, versions, &MemState{}, 1)
	proposed, controlled := 0, 0
	for i := before; i < before+after; i++ {
		ra, rb, rc := tick(a, i), tick(b, i), tick(c, i)
		ja, jb := cycleJSON(t, ra), cycleJSON(t, rb)
		if ja != jb {
			t.Fatalf("cycle %d: the restored replica computed\n%s\nthe one that kept running\n%s", i, jb, ja)
		}
		for _, r := range ra.Recommendations {
			if r.Ruleset != nil {
				proposed++
			}
			if r.Evidence != nil && r.Evidence.PID.I != 0 {
				controlled++
			}
		}
		if i == before {
			same := 0
			for k := range ra.Scores {
				if math.Float64bits(ra.Scores[k].Value) == math.Float64bits(rc.Scores[k].Value) {
					same++
				}
			}
			if same == len(ra.Scores) {
				t.Fatal("C's first scores equal A's: the contrast is gone")
			}
			for _, r := range rc.Recommendations {
				if !r.Inconclusive || !strings.Contains(r.Reason, "consecutive known load scores") && !strings.Contains(r.Reason, "load score unknown") {
					t.Fatalf("C's first recommendation for %s: %q, want none until it has its known scores", r.Service, r.Reason)
				}
			}
		}
	}
	t.Logf("%d cycles alike: %d recommendations with a ruleset, %d with an integral term; %d overloaded scores before the takeover",
		after, proposed, controlled, overloaded)
	if proposed == 0 || controlled == 0 {
		t.Fatalf("%d recommendations with a ruleset, %d with an integral term: the controllers are not exercised", proposed, controlled)
	}
}

// TestStateControlStale: scores and controllers saved longer ago than
// MaxAge are not restored; the replica starts them afresh.
func TestStateControlStale(t *testing.T) {
	ctx := context.Background()
	reader, versions := controlStores(t, 2)
	store := &MemState{}
	a := newControlReplica(t, "a", reader, versions, store, 1)
	at := benchT0.Add(2 * time.Minute)
	for i := range 10 {
		now := at.Add(time.Duration(i) * 10 * time.Second)
		if _, err := a.e.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
		if _, err := a.st.Save(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	b := newControlReplica(t, "b", reader, versions, store, 1)
	stats, err := b.st.Restore(ctx, at.Add(90*time.Second+time.Hour+time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.Restored) != 0 || stats.Ignored["older than max_age 1h0m0s"] == 0 {
		t.Fatalf("restored %v, ignored %v", stats.Restored, stats.Ignored)
	}
	if data, _ := b.e.o.Tracker.MarshalBinary(); len(data) != 2 {
		t.Fatalf("the tracker holds %d bytes of state after a stale restore", len(data))
	}
	if data, _ := b.e.o.Recommender.SaveControllers(nil); len(data) != 2 {
		t.Fatalf("the recommender holds %d bytes of controllers after a stale restore", len(data))
	}
	// Just inside MaxAge, both are restored.
	stats, err = b.st.Restore(ctx, at.Add(90*time.Second+time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if stats.Restored[StateScores] != 1 || stats.Restored[StateControl] != 1 {
		t.Fatalf("restored %v, ignored %v", stats.Restored, stats.Ignored)
	}
}

// TestStateControlEveryCycle: the scores and control rows are written at
// every cycle they changed, whatever Every; with nothing new (no cycle in
// between) only at the cycle that refreshes every row.
func TestStateControlEveryCycle(t *testing.T) {
	ctx := context.Background()
	reader, versions := controlStores(t, 3)
	store := &MemState{}
	a := newControlReplica(t, "a", reader, versions, store, 10)
	at := benchT0.Add(2 * time.Minute)
	parts := func(i int) map[string]int {
		out := map[string]int{}
		rows, _ := store.Load(ctx)
		for _, r := range rows {
			if r.At.Equal(at.Add(time.Duration(i) * 10 * time.Second)) {
				out[r.Part]++
			}
		}
		return out
	}
	for i := range 5 {
		now := at.Add(time.Duration(i) * 10 * time.Second)
		if _, err := a.e.Tick(ctx, now); err != nil {
			t.Fatal(err)
		}
		if _, err := a.st.Save(ctx, now); err != nil {
			t.Fatal(err)
		}
		if p := parts(i); p[StateScores] != 1 || p[StateControl] != 1 {
			t.Fatalf("cycle %d wrote %v", i, p)
		}
	}
	for i := 5; i < 12; i++ { // saves without a cycle: nothing changed
		st, err := a.st.Save(ctx, at.Add(time.Duration(i)*10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		p := parts(i)
		if want := i%10 == 0; (p[StateScores] == 1) != want || (p[StateControl] == 1) != want {
			t.Fatalf("save %d without a cycle wrote %v (%d rows)", i, p, st.Rows)
		}
	}
}
