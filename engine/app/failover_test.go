package app

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/leader"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestFailover runs two engines on one database and one fake clock, stops
// the leader, and checks that the standby leads at most two campaign
// retries and one lease after (on the engine's clock; one retry when the
// machine keeps up with the elector's real-time bounds), that the two never lead at
// the same time, and that no tick was evaluated twice, by any replica (a,
// b and the engine c started after both): each evaluation is backed by its
// own claim row naming its replica, the claims each replica won are
// exactly the evaluations it counted, and a claim row without an
// evaluation is at most the one a replica's stop cut short (its last).
// Every figure is read after the replica's Run returned, so nothing races
// with the cancellation. An emergency publication made at the leader
// change is reported once, by the new leader, and one made while no
// engine runs by the engine that starts next. The clock moves one interval
// at a time, only while the ticks loop and the elector of every running
// replica wait on it, so no lease runs out and no cycle is cut short for a
// busy machine's scheduling. (engine/leader's TestFailover kills the
// leader's database session instead, as a crashed process loses it.)
func TestFailover(t *testing.T) {
	url := testenv.Postgres(t)
	natsURL := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := fmt.Sprintf("failover%d", time.Now().UnixNano())
	// In the past of the database's clock, which claims compare ticks with
	// (leader.PostgresOptions.MaxClockSkew), and aligned to the interval.
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	// A tick, and the elector's check and campaign retry, every second on a
	// lease of three (the elector's defaults).
	const interval, retry, lease = time.Second, time.Second, 3 * time.Second
	reps := map[string]*steppedApp{} // the replicas running
	t.Cleanup(func() {               // those a failure left running
		cancel()
		for _, r := range reps {
			<-r.done
		}
	})
	start := func(id string) *steppedApp {
		t.Helper()
		cfg := config.Default()
		cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), id
		cfg.Database, cfg.NATS.URL, cfg.NATS.Prefix = url, natsURL, prefix
		cfg.Interval = interval
		r := &steppedApp{clk: &loopClock{Fake: clk, armed: make(chan struct{}, 1)}, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
		a, err := New(ctx, Options{Config: cfg, Registry: r.reg, Clock: r.clk})
		if err != nil {
			t.Fatal(err)
		}
		electOnFakeClock(t, a, retry, lease)
		r.App, r.claims = a, recordClaims(a)
		actx, acancel := context.WithCancel(ctx)
		r.stop = func() {
			t.Helper()
			acancel()
			err := <-r.done
			delete(reps, id)
			if err != nil {
				t.Fatal(err)
			}
		}
		go func() { r.done <- a.Run(actx) }()
		reps[id] = r
		r.clk.settle(t, clk.Now()) // its loops wait on the clock
		return r
	}
	leaderOf := func() string {
		var leads []string
		for id, r := range reps {
			if r.Elector().IsLeader() {
				leads = append(leads, id)
			}
		}
		if len(leads) > 1 {
			t.Fatalf("%v lead at once at %v", leads, clk.Now())
		}
		return strings.Join(leads, "")
	}
	// until moves the clock an interval at a time, each time once every
	// loop of the running replicas waits on it again, until cond holds; it
	// fails the test if cond does not hold within limit on the clock.
	until := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		end := clk.Now().Add(limit)
		for !cond() {
			if !clk.Now().Before(end) {
				t.Fatalf("%s: not within %v on the engine's clock", what, limit)
			}
			clk.Advance(interval)
			for _, r := range reps {
				r.clk.settle(t, clk.Now())
			}
			leaderOf()
		}
	}
	start("a")
	start("b")
	var first string
	// One takes the lock at once and leads one lease later.
	until("a leader", lease, func() bool { first = leaderOf(); return first != "" })
	until("ticks by the first leader", 3*interval, func() bool { return ticks(t, reps[first].reg) >= 3 })
	stopped := map[string]*steppedApp{first: reps[first]}
	reps[first].stop()
	killed := clk.Now()
	standby := "a"
	if first == "a" {
		standby = "b"
	}
	// Published between the leader's end and the standby's first cycle.
	emergency(t, reps[standby].Store(), "pay")
	var second string
	// It takes the free lock at its next campaign and leads one lease later;
	// one retry more for the elector's bounds on real time (the stopped
	// leader's unlock, a lock attempt), which a busy machine can outlast.
	until("the standby to lead", 2*retry+lease, func() bool { second = leaderOf(); return second != "" })
	t.Logf("%s leads %v after %s stopped", second, clk.Now().Sub(killed), first)
	until("ticks by the second leader", 3*interval, func() bool { return ticks(t, reps[second].reg) >= 3 })
	stopped[second] = reps[second]
	reps[second].stop()
	// Published while no engine runs: the next one reports it, and only it.
	st, err := postgres.Open(ctx, postgres.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	emergency(t, st, "ship")
	st.Close()
	c := start("c")
	until("ticks by the restarted engine", lease+3*interval, func() bool { return ticks(t, c.reg) >= 3 })
	stopped["c"] = c
	c.stop()
	if got := c.Events().Events(events.EmergencyPublish); len(got) != 1 || got[0].Service != "ship" {
		t.Fatalf("restarted engine reported %+v, want ship alone", got)
	}
	if got := stopped[second].Events().Events(events.EmergencyPublish); len(got) != 1 || got[0].Service != "pay" {
		t.Fatalf("new leader reported %+v, want pay alone", got)
	}
	if got := stopped[first].Events().Events(events.EmergencyPublish); len(got) != 0 {
		t.Fatalf("old leader reported %+v", got)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	rows, err := admin.Query(context.Background(), "SELECT tick, leader FROM governor_engine_ticks")
	if err != nil {
		t.Fatal(err)
	}
	claimed := map[time.Time]string{} // every claim row: tick -> replica
	for rows.Next() {
		var tick time.Time
		var leader string
		if err := rows.Scan(&tick, &leader); err != nil {
			t.Fatal(err)
		}
		claimed[tick.UTC()] = leader
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Every leader saved the engine state for the next one.
	for _, id := range []string{first, second, "c"} {
		var n int
		if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM governor_engine_state WHERE leader = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 && id == "c" {
			t.Errorf("no engine state saved by %s", id)
		}
		t.Logf("engine state rows last written by %s: %d", id, n)
	}
	won, counted := map[string][]time.Time{}, map[string]float64{}
	for _, id := range []string{"a", "b", "c"} {
		won[id], counted[id] = stopped[id].claims.ticks(), ticks(t, stopped[id].reg)
	}
	for _, p := range tickProblems(claimed, won, counted) {
		t.Error(p)
	}
}

// steppedApp is an engine of TestFailover on the test's fake clock.
type steppedApp struct {
	*App
	clk    *loopClock
	reg    *prometheus.Registry
	claims *claimLog
	done   chan error // Run's result
	stop   func()     // ends Run and waits for it
}

// electOnFakeClock replaces a's elector (before Run) by one as New makes
// it, checking and retrying every retry on a lease of lease, whose
// database session has no idle timeout: the fake clock does not pace the
// real server, which would end the lock's session in real time.
func electOnFakeClock(t *testing.T, a *App, retry, lease time.Duration) {
	t.Helper()
	lo := LeaderOptions(a.cfg)
	lo.Clock, lo.Events, lo.Logger = a.o.Clock, a.sink, a.log
	lo.RetryInterval, lo.CheckInterval, lo.Lease, lo.SessionTimeout = retry, retry, lease, -1
	e, err := leader.NewPostgres(lo)
	if err != nil {
		t.Fatal(err)
	}
	a.elector = e
}

// The loops of a replica whose timers a loopClock follows, by the function
// that arms them: the ticks loop (leader.RunTicks) and the elector's
// (leader.Postgres's campaign and lead); a timer armed by anything else
// (a database call's deadline, the alerts loop, the relay) is not theirs.
var timerLoops = map[string]string{
	"governor.dev/governor/engine/leader.RunTicks":         "ticks",
	"governor.dev/governor/engine/leader.(*Postgres).Run":  "elector",
	"governor.dev/governor/engine/leader.(*Postgres).lead": "elector",
}

// loopClock is a replica's view of the test's fake clock: it notes when
// each of the replica's loops (timerLoops) is due next, as the loop arms
// its timer, so that the test moves the clock only while they all wait on
// it.
type loopClock struct {
	*clock.Fake
	mu    sync.Mutex
	due   map[string]time.Time // loop -> when its timer fires
	armed chan struct{}        // a loop armed a timer
}

func (c *loopClock) NewTimer(d time.Duration) clock.Timer {
	at := c.Now().Add(d)
	t := c.Fake.NewTimer(d)
	if loop := timerLoops[callerOfNewTimer()]; loop != "" {
		c.mu.Lock()
		if c.due == nil {
			c.due = map[string]time.Time{}
		}
		c.due[loop] = at
		c.mu.Unlock()
		select {
		case c.armed <- struct{}{}:
		default:
		}
	}
	return t
}

// callerOfNewTimer names the function that called loopClock.NewTimer.
func callerOfNewTimer() string {
	pcs := make([]uintptr, 8)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for f, more := frames.Next(); more; f, more = frames.Next() {
		if strings.HasSuffix(f.Function, ".(*loopClock).NewTimer") {
			next, _ := frames.Next()
			return next.Function
		}
	}
	return ""
}

// settle waits until every loop of timerLoops waits on the clock for a
// time after now: the work the clock's last move woke (a campaign, a
// check, a cycle) is done. The real-time bound only ends a stuck test.
func (c *loopClock) settle(t *testing.T, now time.Time) {
	t.Helper()
	stuck := time.NewTimer(20 * slack * time.Second)
	defer stuck.Stop()
	for {
		c.mu.Lock()
		var waiting []string
		for _, loop := range []string{"ticks", "elector"} {
			if !c.due[loop].After(now) {
				waiting = append(waiting, loop)
			}
		}
		c.mu.Unlock()
		if len(waiting) == 0 {
			return
		}
		select {
		case <-c.armed:
		case <-stuck.C:
			t.Fatalf("the %v loops armed no timer after %v (are they still the functions timerLoops names?)", waiting, now)
		}
	}
}

// tickProblems checks, for every replica of won (the ticks it claimed, in
// order, each of which it evaluated) against counted (the evaluations its
// metric counted) and claimed (every claim row: tick -> replica), that no
// tick was evaluated twice, that each evaluation has its own claim row
// naming the replica, that the counts agree, that each replica evaluated
// at least 3 ticks, and that a claim row without an evaluation is at most
// the one a replica's stop cut short (the row written, the answer lost to
// the cancellation): one, after every tick it evaluated.
func tickProblems(claimed map[time.Time]string, won map[string][]time.Time, counted map[string]float64) []string {
	var out []string
	evaluatedBy := map[time.Time]string{}
	for _, id := range slices.Sorted(maps.Keys(won)) {
		if got := counted[id]; got != float64(len(won[id])) {
			out = append(out, fmt.Sprintf("%s counted %v evaluations for %d claims won", id, got, len(won[id])))
		}
		if len(won[id]) < 3 {
			out = append(out, fmt.Sprintf("%s evaluated %d ticks, want at least 3", id, len(won[id])))
		}
		var last time.Time
		for _, tick := range won[id] {
			if other, ok := evaluatedBy[tick]; ok {
				out = append(out, fmt.Sprintf("tick %s evaluated twice, by %s and %s", tick, other, id))
			}
			evaluatedBy[tick] = id
			if claimed[tick] != id {
				out = append(out, fmt.Sprintf("%s evaluated tick %s, claimed by %q", id, tick, claimed[tick]))
			}
			last = tick
		}
		var cut []time.Time
		for tick, leader := range claimed {
			if leader == id && evaluatedBy[tick] != id {
				cut = append(cut, tick)
			}
		}
		if len(cut) > 1 || (len(cut) == 1 && !cut[0].After(last)) {
			slices.SortFunc(cut, time.Time.Compare)
			out = append(out, fmt.Sprintf("%s has claim rows %v it did not evaluate (last evaluated %s)", id, cut, last))
		}
	}
	for tick, leader := range claimed {
		if _, ok := won[leader]; !ok {
			out = append(out, fmt.Sprintf("tick %s claimed by unknown replica %q", tick, leader))
		}
	}
	return out
}

// TestTickProblems: the failover accounting accepts a claim cut short by a
// replica's stop (which a count of rows against evaluations took for a
// tick run twice) and flags every real fault, for every replica.
func TestTickProblems(t *testing.T) {
	tk := func(i int) time.Time {
		return time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * 200 * time.Millisecond)
	}
	base := func() (map[time.Time]string, map[string][]time.Time, map[string]float64) {
		claimed := map[time.Time]string{}
		won := map[string][]time.Time{}
		for i, id := range []string{"a", "a", "a", "b", "b", "b", "c", "c", "c"} {
			claimed[tk(i)] = id
			won[id] = append(won[id], tk(i))
		}
		return claimed, won, map[string]float64{"a": 3, "b": 3, "c": 3}
	}
	tests := []struct {
		name   string
		change func(claimed map[time.Time]string, won map[string][]time.Time, counted map[string]float64)
		want   string // "" for no problem
	}{
		{"clean", func(map[time.Time]string, map[string][]time.Time, map[string]float64) {}, ""},
		{"a claim cut short by a's stop, after its last evaluation", func(c map[time.Time]string, _ map[string][]time.Time, _ map[string]float64) {
			c[tk(20)] = "a"
		}, ""},
		{"a claim without evaluation before the last", func(c map[time.Time]string, w map[string][]time.Time, n map[string]float64) {
			c[tk(7)] = "c"
			w["c"] = []time.Time{tk(6), tk(8), tk(9)}
		}, "c has claim rows"},
		{"c evaluated a tick b evaluated", func(c map[time.Time]string, w map[string][]time.Time, n map[string]float64) {
			w["c"] = append(w["c"], tk(5))
			n["c"] = 4
		}, "evaluated twice, by b and c"},
		{"an evaluation without its claim row", func(c map[time.Time]string, _ map[string][]time.Time, _ map[string]float64) {
			delete(c, tk(8))
		}, `c evaluated tick 2026-03-02 10:00:01.6 +0000 UTC, claimed by ""`},
		{"c counted an evaluation it did not claim", func(_ map[time.Time]string, _ map[string][]time.Time, n map[string]float64) {
			n["c"] = 4
		}, "c counted 4 evaluations for 3 claims won"},
		{"c evaluated too little", func(c map[time.Time]string, w map[string][]time.Time, n map[string]float64) {
			delete(c, tk(8))
			w["c"], n["c"] = w["c"][:2], 2
		}, "c evaluated 2 ticks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claimed, won, counted := base()
			tt.change(claimed, won, counted)
			got := strings.Join(tickProblems(claimed, won, counted), "\n")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

// claimLog records the ticks a replica won, each of which it evaluates
// (leader.RunTicks runs the evaluation after every won claim).
type claimLog struct {
	leader.Elector
	mu  sync.Mutex
	won []time.Time
}

// recordClaims wraps a's elector (before Run) to record its claims.
func recordClaims(a *App) *claimLog {
	c := &claimLog{Elector: a.elector}
	a.elector = c
	return c
}

func (c *claimLog) ClaimTick(ctx context.Context, tick time.Time) (bool, error) {
	ok, err := c.Elector.ClaimTick(ctx, tick)
	if ok && err == nil {
		c.mu.Lock()
		c.won = append(c.won, tick.UTC())
		c.mu.Unlock()
	}
	return ok, err
}

func (c *claimLog) ticks() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.won)
}

// emergency publishes a ruleset for service in emergency mode.
func emergency(t *testing.T, st versioning.Store, service string) {
	t.Helper()
	rs := &rules.Ruleset{Service: service, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
		RateLimit: &rules.RateLimit{Rate: 10}}}}
	root := versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}
	if _, err := st.EmergencyPublish(context.Background(), versioning.Proposal{Ruleset: rs, Author: root, Reason: "stop the bleeding", Rebase: true}); err != nil {
		t.Fatal(err)
	}
}

// ticks reads governor_engine_ticks_total from a registry.
func ticks(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "governor_engine_ticks_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
