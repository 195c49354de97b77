package leader

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the migrations

	"governor.dev/governor/engine/events"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/sdk/clock"
)

func TestLocalClaimsEachTickOnce(t *testing.T) {
	l := &Local{ID: "a"}
	at := time.Unix(100, 0)
	tests := []struct {
		tick time.Time
		want bool
	}{{at, true}, {at, false}, {at.Add(-time.Second), false}, {at.Add(time.Second), true}}
	for i, tt := range tests {
		if got, err := l.ClaimTick(context.Background(), tt.tick); err != nil || got != tt.want {
			t.Fatalf("claim %d: %v %v, want %v", i, got, err, tt.want)
		}
	}
}

func TestRunTicksWithFakeClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan time.Time, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunTicks(ctx, &Local{ID: "a"}, clk, 10*time.Second, func(_ context.Context, tick time.Time) { got <- tick })
	}()
	for i := 1; i <= 3; i++ {
		waitTimer(t, clk)
		clk.Advance(10 * time.Second)
		if tick := <-got; !tick.Equal(time.Unix(1000+int64(i)*10, 0)) {
			t.Fatalf("tick %d at %v", i, tick)
		}
	}
	cancel()
	<-done
}

// waitTimer waits until the ticker goroutine has armed its timer.
func waitTimer(t *testing.T, clk *clock.Fake) {
	t.Helper()
	for range 10000 {
		if clk.Pending() > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no timer armed")
}

func TestPostgresOptions(t *testing.T) {
	for _, o := range []PostgresOptions{
		{URL: "postgres://x", Identity: "a", RetryInterval: -1},
		{URL: "postgres://x", Identity: "a", Lease: -1},
		{URL: "postgres://x", Identity: "a", CheckInterval: time.Second, Lease: time.Second},
		{Identity: "a"},
	} {
		if _, err := NewPostgres(o); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("%+v: %v, want ErrInvalidOption", o, err)
		}
	}
}

// migrated is a fresh PostgreSQL database with Governor's schema, as the
// engine leaves it at start.
func migrated(t *testing.T) string {
	t.Helper()
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrations.Up(context.Background(), db, migrations.Postgres); err != nil {
		t.Fatal(err)
	}
	return url
}

// TestClaimTickPrunes: a tick is claimed once, and ticks older than
// TickRetention leave the table as newer ones are claimed.
func TestClaimTickPrunes(t *testing.T) {
	url := migrated(t)
	ctx := context.Background()
	clk := clock.NewFake(leaseT0)
	e := startTraced(t, url, "a", clk, func(o *PostgresOptions) { o.TickRetention = time.Hour })
	e.lead(t, clk)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		tick time.Time
		won  bool
	}{{t0, true}, {t0, false}, {t0.Add(30 * time.Minute), true}, {t0.Add(2 * time.Hour), true}} {
		won, err := e.ClaimTick(ctx, c.tick)
		if err != nil || won != c.won {
			t.Fatalf("claim %d (%v): %v %v, want %v", i, c.tick, won, err, c.won)
		}
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var n int
	var oldest time.Time
	if err := admin.QueryRow(ctx, "SELECT count(*), min(tick) FROM governor_engine_ticks").Scan(&n, &oldest); err != nil {
		t.Fatal(err)
	}
	if n != 1 || !oldest.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("%d ticks kept, oldest %v; want only the newest", n, oldest)
	}
}

// TestFailover runs two electors on one fake clock, each evaluating the
// ticks it claims through RunTicks, kills the leader's database session
// (as a crashed process would lose it) and checks that the standby takes
// the lock at its next campaign and leads one lease later, that the two
// never lead at the same time, and that no tick is evaluated twice nor
// claimed without being evaluated. The clock moves only while every loop
// waits on it, so no lease runs out and no call times out for a busy
// machine's scheduling.
func TestFailover(t *testing.T) {
	url := migrated(t)
	clk := clock.NewFake(leaseT0)
	rec := events.NewRecorder(100)
	const lease = 10 * time.Second // also bounds each campaign in real time
	edit := func(o *PostgresOptions) { o.Events, o.Lease = rec, lease }
	reps := map[string]*replica{}
	for _, id := range []string{"a", "b"} {
		reps[id] = &replica{traced: startTraced(t, url, id, clk, edit), armed: make(chan struct{}, 10)}
	}
	var mu sync.Mutex
	evaluated := map[time.Time]string{}
	var dup []time.Time
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stopTicks := func() { cancel(); wg.Wait() }
	t.Cleanup(stopTicks) // before the electors stop
	for id, r := range reps {
		wg.Go(func() {
			RunTicks(ctx, r, armedClock{Fake: clk, armed: r.armed}, testCheck, func(_ context.Context, tick time.Time) {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := evaluated[tick]; ok {
					dup = append(dup, tick)
				}
				evaluated[tick] = id
			})
		})
	}
	// Each campaigned once at the start: one took the lock.
	var first, second string
	for id, r := range reps {
		<-r.armed
		if ev, _ := r.park(t, clk); ev == "wait" {
			first = id
		} else {
			second = id
		}
	}
	if first == "" || second == "" {
		t.Fatal("both or neither took the lock at the start")
	}
	locked := clk.Now()
	// step moves the clock one check and waits until every loop waits on
	// it again; it fails the test if both lead.
	step := func() {
		t.Helper()
		clk.Advance(testCheck)
		for _, r := range reps {
			if !clk.Now().Before(r.due) {
				r.park(t, clk)
			}
			<-r.armed // RunTicks met the tick and waits for the next
		}
		if reps["a"].IsLeader() && reps["b"].IsLeader() {
			t.Fatalf("two leaders at %v", clk.Now())
		}
	}
	evaluatedBy := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, by := range evaluated {
			if by == id {
				n++
			}
		}
		return n
	}
	for evaluatedBy(first) < 3 {
		step()
		if leads := reps[first].IsLeader(); leads != !clk.Now().Before(locked.Add(lease)) {
			t.Fatalf("%s leads %v at %v, %v after taking the lock; want leading from one lease (%v) on", first, leads,
				clk.Now(), clk.Now().Sub(locked), lease)
		}
	}
	// Kill the leader's session from outside; its server ends it and frees
	// the lock.
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	const held = `FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = $1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	key := uint32(DefaultLockKey & 0xffffffff)
	if _, err := admin.Exec(context.Background(), `SELECT pg_terminate_backend(pid) `+held, key); err != nil {
		t.Fatal(err)
	}
	for {
		var n int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) `+held, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond) // the server ends the session
	}
	killed := clk.Now()
	step() // the leader's check fails; the standby campaigns and takes the lock
	if !reps[first].lost || reps[first].IsLeader() {
		t.Fatalf("%s still leads a check after its session ended", first)
	}
	if reps[second].last != "wait" {
		t.Fatalf("%s did not take the free lock at its campaign (%s)", second, reps[second].last)
	}
	for evaluatedBy(second) < 3 {
		step()
		if leads := reps[second].IsLeader(); leads != !clk.Now().Before(killed.Add(testCheck+lease)) {
			t.Fatalf("%s leads %v %v after the session of %s ended; want leading from one lease after taking the lock (%v) on",
				second, leads, clk.Now().Sub(killed), first, testCheck+lease)
		}
	}
	stopTicks()
	mu.Lock()
	defer mu.Unlock()
	if len(dup) > 0 {
		t.Fatalf("ticks evaluated twice: %v", dup)
	}
	var rows int
	if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM governor_engine_ticks").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(evaluated) {
		t.Fatalf("%d ticks recorded, %d evaluated", rows, len(evaluated))
	}
	if len(rec.Events(events.LeaderLost)) != 1 || len(rec.Events(events.LeaderAcquired)) != 2 {
		t.Fatalf("events: %+v; want %s's lead acquired and lost, then %s's acquired", rec.Events(""), first, second)
	}
}

// replica is an elector of TestFailover with the RunTicks that claims its
// ticks (armed: a timer of it armed, so it waits for the next tick).
type replica struct {
	*traced
	armed chan struct{}
	due   time.Time // when its elector's loop wakes next
	last  string    // how it waits: "wait" holding the lock, "campaign" without
	lost  bool      // it gave a lock up
}

// park waits until the elector's loop waits on the clock again, and
// returns how; it notes when the loop wakes next (a check later, or a
// retry later, two after giving a lock up).
func (r *replica) park(t *testing.T, clk *clock.Fake) (string, bool) {
	t.Helper()
	lost := false
	for ev := range r.events {
		switch ev {
		case "lost":
			lost = true
		case "wait", "campaign":
			r.last, r.lost = ev, r.lost || lost
			r.due = clk.Now().Add(testCheck)
			if lost {
				r.due = clk.Now().Add(2 * testCheck)
			}
			return ev, lost
		}
	}
	return "", lost
}

// TestCampaignThatCannotReachTheDatabaseWarnsOnce: a replica whose
// campaign cannot reach the database (down, refusing connections, out of
// connection slots) never leads; the log says why, once for a run of the
// same failure, instead of only at debug level as before.
func TestCampaignThatCannotReachTheDatabaseWarnsOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	var logs testenv.Buffer
	clk := clock.NewFake(leaseT0)
	e := startTraced(t, "postgres://postgres@"+dead+"/test?sslmode=disable", "a", clk, func(o *PostgresOptions) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for range 3 {
		e.next(t, "campaign") // one failed attempt logged
		clk.Advance(testCheck)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, "cannot campaign") || !strings.Contains(out, dead) {
		t.Fatalf("%d warnings after 3 failed campaigns, want 1 naming the database address %s:\n%s", n, dead, out)
	}
}

// failingClaims leads, but its claims fail with the error the test sets.
type failingClaims struct {
	Local
	mu  sync.Mutex
	err error
}

func (e *failingClaims) fail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
}

func (e *failingClaims) ClaimTick(ctx context.Context, tick time.Time) (bool, error) {
	e.mu.Lock()
	err := e.err
	e.mu.Unlock()
	if err != nil {
		return false, err
	}
	return e.Local.ClaimTick(ctx, tick)
}

// TestRunTicksWarnsWhenClaimsStartFailingAndWhenTheirErrorChanges: a
// leader whose claims keep failing (a read-only database, a role that may
// not write the ticks table) evaluates nothing; the log says why, once per
// run of the same error, instead of nothing at all.
func TestRunTicksWarnsWhenClaimsStartFailingAndWhenTheirErrorChanges(t *testing.T) {
	e := &failingClaims{Local: Local{ID: "a"}}
	clk := armedClock{Fake: clock.NewFake(time.Unix(1000, 0)), armed: make(chan struct{}, 10)}
	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan time.Time, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunTicks(ctx, e, clk, 10*time.Second, func(_ context.Context, tick time.Time) { ran <- tick }, WithLogger(log))
	}()
	readOnly := errors.New("cannot execute INSERT in a read-only transaction")
	denied := errors.New("permission denied for table governor_engine_ticks")
	steps := []struct {
		err   error
		warns int // warnings logged so far
	}{
		{readOnly, 1}, // failures start
		{readOnly, 1}, // the same failure again: debug only
		{readOnly, 1},
		{denied, 2},       // the error changed
		{nil, 2},          // claims work again
		{denied, 3},       // and fail again
		{ErrNotLeader, 3}, // the lead ended before the claim: the elector logs that
	}
	<-clk.armed
	for i, s := range steps {
		e.fail(s.err)
		clk.Advance(10 * time.Second)
		<-clk.armed // the tick is done
		if s.err == nil {
			<-ran
		}
		out := logs.String()
		if n := strings.Count(out, "level=WARN"); n != s.warns {
			t.Fatalf("tick %d: %d warnings, want %d:\n%s", i, n, s.warns, out)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "level=DEBUG"); n != 3 {
		t.Errorf("%d debug lines for the repeated failures and the lost lead, want 3:\n%s", n, out)
	}
	for _, want := range []string{readOnly.Error(), denied.Error(), "identity=a"} {
		if !strings.Contains(out, want) {
			t.Errorf("log does not name %q:\n%s", want, out)
		}
	}
	cancel()
	<-done
}

// TestSessionTimeoutShorterThanTheLeaseIsRefused: a session timeout the
// leader's silence between two checks can reach would end a healthy
// leader's session again and again; it is refused, naming the fields.
func TestSessionTimeoutShorterThanTheLeaseIsRefused(t *testing.T) {
	for _, o := range []PostgresOptions{
		{URL: "postgres://x", Identity: "a", CheckInterval: time.Second, SessionTimeout: 500 * time.Millisecond},
		{URL: "postgres://x", Identity: "a", CheckInterval: time.Second, SessionTimeout: time.Second},
		{URL: "postgres://x", Identity: "a", CheckInterval: time.Second, SessionTimeout: 1100 * time.Millisecond},
		{URL: "postgres://x", Identity: "a", CheckInterval: time.Second, Lease: 5 * time.Second, SessionTimeout: 4 * time.Second},
	} {
		_, err := NewPostgres(o)
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "SessionTimeout") || !strings.Contains(err.Error(), "CheckInterval") {
			t.Errorf("SessionTimeout %s, CheckInterval %s, Lease %s: %v; want ErrInvalidOption naming SessionTimeout and CheckInterval",
				o.SessionTimeout, o.CheckInterval, o.Lease, err)
		}
	}
	for _, o := range []PostgresOptions{
		{URL: "postgres://x", Identity: "a", CheckInterval: time.Second},
		{URL: "postgres://x", Identity: "a", CheckInterval: time.Second, SessionTimeout: -1},
		{URL: "postgres://x", Identity: "a", CheckInterval: time.Second, SessionTimeout: 3 * time.Second},
	} {
		if _, err := NewPostgres(o); err != nil {
			t.Errorf("SessionTimeout %s, CheckInterval %s: %v", o.SessionTimeout, o.CheckInterval, err)
		}
	}
}

// TestRunTicksWarnsWhenATickOutlastsItsInterval: an evaluation that takes
// longer than the interval makes the ticks that pass meanwhile be skipped,
// not run late; the log says so, with how long the tick took and how many
// were skipped, instead of the evaluations silently thinning out.
func TestRunTicksWarnsWhenATickOutlastsItsInterval(t *testing.T) {
	clk := armedClock{Fake: clock.NewFake(time.Unix(1000, 0)), armed: make(chan struct{}, 10)}
	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan time.Time, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunTicks(ctx, &Local{ID: "a"}, clk, 10*time.Second, func(_ context.Context, tick time.Time) {
			if tick.Equal(time.Unix(1010, 0)) {
				clk.Advance(25 * time.Second) // a slow evaluation
			}
			ran <- tick
		}, WithLogger(log))
	}()
	<-clk.armed
	clk.Advance(10 * time.Second)
	if tick := <-ran; !tick.Equal(time.Unix(1010, 0)) {
		t.Fatalf("first tick %v", tick)
	}
	<-clk.armed
	clk.Advance(5 * time.Second)
	if tick := <-ran; !tick.Equal(time.Unix(1040, 0)) {
		t.Fatalf("tick after the slow one %v, want the next aligned one", tick)
	}
	<-clk.armed
	out := logs.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "skipped=2") || !strings.Contains(out, "took=25s") {
		t.Fatalf("log after a tick of 25s at an interval of 10s; want one warning naming the 2 ticks skipped:\n%s", out)
	}
	cancel()
	<-done
}

// TestShutdownDuringACheckIsNoLostLeadership: the engine stopping while a
// check is in flight cuts the check short; that is a shutdown, whose lock is
// released, not a lost leadership with a warning and a LeaderLost event
// (which pages as the leader being lost).
func TestShutdownDuringACheckIsNoLostLeadership(t *testing.T) {
	dsn := migrated(t)
	clk := clock.NewFake(leaseT0)
	rec := events.NewRecorder(10)
	e, err := NewPostgres(PostgresOptions{URL: dsn, Identity: "a", RetryInterval: testCheck, CheckInterval: testCheck,
		Lease: testLease, SessionTimeout: -1, Clock: clk, Events: rec})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	trace := make(chan string, 1000)
	var leading atomic.Bool
	e.trace = func(ev string) {
		if ev == "call check" && leading.Load() {
			cancel() // the engine shuts down while a check is in flight
		}
		trace <- ev
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	for !leading.Load() {
		switch <-trace {
		case "lead":
			leading.Store(true)
		case "wait":
			clk.Advance(testCheck)
		}
	}
	for ev := range trace {
		if ev == "wait" {
			clk.Advance(testCheck)
		}
		if ev == "released" || ev == "lost" {
			if ev == "lost" {
				t.Errorf("a shutdown during a check gave the lock up as lost")
			}
			break
		}
	}
	<-done
	if lost := rec.Events(events.LeaderLost); len(lost) != 0 {
		t.Fatalf("a shutdown reported as a lost leadership: %+v", lost)
	}
}

// TestRunTicksWarnsOnceWhileTheClockStaysSkewed: the errors of claims
// refused for a clock skew name their tick and skew, so each differs from
// the last; a skew that stays is still one failure, warned about once, not
// a warning every tick.
func TestRunTicksWarnsOnceWhileTheClockStaysSkewed(t *testing.T) {
	e := &failingClaims{Local: Local{ID: "a"}}
	clk := armedClock{Fake: clock.NewFake(time.Unix(1000, 0)), armed: make(chan struct{}, 10)}
	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunTicks(ctx, e, clk, 10*time.Second, func(context.Context, time.Time) {}, WithLogger(log))
	}()
	<-clk.armed
	for i := range 5 {
		// Each claim names its own tick and skew.
		e.fail(fmt.Errorf("leader: claim tick: %w: tick %d is %ds behind the newest claimed tick", ErrClockSkew, 1010+10*i, 3600-10*i))
		clk.Advance(10 * time.Second)
		<-clk.armed
	}
	if out := logs.String(); strings.Count(out, "level=WARN") != 1 {
		t.Fatalf("5 claims failing with a clock skew that stays: want 1 warning:\n%s", out)
	}
	cancel()
	<-done
}
