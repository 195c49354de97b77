package evaluate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
)

// TestACycleOfATickNoLongerLedWritesNothing: engine-a runs the cycle of
// tick T under its fence after engine-b claimed T+10s (a froze past its
// lease, its context not ended). Of the overloaded services' cuts, which
// would apply themselves, the first is refused with ErrFenced and the cycle
// submits nothing more: the result's errors say, once, that a is not
// leading any more, naming both ticks and b; no version, audit entry or
// auto_apply event is left. b's cycle under its own tick applies them.
func TestACycleOfATickNoLongerLedWritesNothing(t *testing.T) {
	testTickNoLongerLed(t, false)
}

// TestACycleWhoseMarkMoveIsFencedWritesNothingMore: as above, the
// replicas sharing the emergency mark in PostgreSQL (SQLWatermark). Each of
// engine-a's cycles first tries to move the mark past the audit log's head
// and is refused (ErrFenced, once a cycle, naming both ticks and b), which
// ends its writes: no cut is submitted, the mark stays unset. b's cycles
// move it and apply the cuts.
func TestACycleWhoseMarkMoveIsFencedWritesNothingMore(t *testing.T) {
	testTickNoLongerLed(t, true)
}

// testTickNoLongerLed runs the cycles of both tests above; mark: the
// replicas share a SQLWatermark.
func testTickNoLongerLed(t *testing.T, mark bool) {
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
	ins := liveFleet(t, st, services, instances)
	clk.Set(benchT0.Add(5 * time.Minute))
	sqldb, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	newEval := func(name string) (*Evaluator, *events.Recorder) {
		reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
		if err != nil {
			t.Fatal(err)
		}
		tracker, rec := testScoring(t)
		guard, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{Source: db, Reader: reader}})
		if err != nil {
			t.Fatal(err)
		}
		evs := events.NewRecorder(100)
		o := Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Guard: guard,
			Proposer: &recommend.Proposer{Store: st, Clock: clk}, Fleet: fleetOf{ins}, Events: evs, Registerer: prometheus.NewRegistry(),
			Band: func(string) recommend.Band { return recommend.Band{MaxChangePerHour: 1} }}
		if mark {
			o.Watermark = SQLWatermark{DB: sqldb, Name: EmergencyMark, Leader: name}
		}
		e, err := New(o)
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
	a, aEvents := newEval("engine-a")
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

	markSet := func() bool {
		t.Helper()
		_, set, err := (SQLWatermark{DB: sqldb, Name: EmergencyMark}).Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	if mark && markSet() {
		t.Fatal("engine-a's stale cycles moved the emergency mark")
	}

	b, bEvents := newEval("engine-b")
	submitted, fenced = cycles(b, versioning.Fence{Tick: current, Holder: "engine-b"})
	if len(fenced) != 0 || submitted == 0 || len(bEvents.Events(events.AutoApply)) != submitted {
		t.Fatalf("engine-b submitted %d, %d auto_apply events, refusals %q; want its cuts applied", submitted, len(bEvents.Events(events.AutoApply)), fenced)
	}
	if v := count("rule_versions"); v != versions+submitted {
		t.Fatalf("versions %d→%d, want one per cut of engine-b (%d)", versions, v, submitted)
	}
	if mark && !markSet() {
		t.Fatal("engine-b's cycles did not move the emergency mark")
	}
}

// TestSQLWatermarkRefusesAMoveOfATickNoLongerLed: engine-a read the
// emergency mark and reported past it under tick t0, then froze past its
// lease; engine-b has claimed t0+10s since. a's move of the mark, made
// under t0's fence, is refused with ErrFenced naming both ticks and b, and
// leaves the mark where it was, so b (which reads the mark after its claim)
// reports those publications itself rather than skip them. b's moves
// under its own tick, and moves without a fence, land.
func TestSQLWatermarkRefusesAMoveOfATickNoLongerLed(t *testing.T) {
	db := statePostgres(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	current := t0.Add(10 * time.Second)
	for tick, by := range map[time.Time]string{t0: "engine-a", current: "engine-b"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ($1, $2)`, tick, by); err != nil {
			t.Fatal(err)
		}
	}
	a := SQLWatermark{DB: db, Name: EmergencyMark, Leader: "engine-a"}
	b := SQLWatermark{DB: db, Name: EmergencyMark, Leader: "engine-b"}
	actx := versioning.WithFence(ctx, versioning.Fence{Tick: t0, Holder: "engine-a"})
	bctx := versioning.WithFence(ctx, versioning.Fence{Tick: current, Holder: "engine-b"})
	mark := func() (int64, bool) {
		t.Helper()
		seq, set, err := b.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return seq, set
	}
	want := fmt.Sprintf("engine-a not leading any more: tick %s is older than tick %s claimed by engine-b",
		t0.Format(time.RFC3339Nano), current.Format(time.RFC3339Nano))
	refused := func(ok bool, err error) {
		t.Helper()
		var fe *versioning.FencedError
		if ok || !errors.Is(err, versioning.ErrFenced) || !errors.As(err, &fe) || !strings.Contains(err.Error(), want) ||
			!fe.Newer.Equal(current) || fe.By != "engine-b" {
			t.Fatalf("a's move: moved %v, %v; want it refused: %q", ok, err, want)
		}
	}
	refused(a.Advance(actx, false, 0, 5))
	if _, set := mark(); set {
		t.Fatal("a's refused first move set the mark")
	}
	if ok, err := b.Advance(bctx, false, 0, 5); !ok || err != nil {
		t.Fatalf("b's first move: %v %v", ok, err)
	}
	refused(a.Advance(actx, true, 5, 9))
	if seq, _ := mark(); seq != 5 {
		t.Fatalf("mark %d after a's refused move, want 5", seq)
	}
	if ok, err := b.Advance(bctx, true, 5, 7); !ok || err != nil {
		t.Fatalf("b's move: %v %v", ok, err)
	}
	if ok, err := a.Advance(ctx, true, 7, 8); !ok || err != nil {
		t.Fatalf("an unfenced move: %v %v", ok, err)
	}
	if seq, _ := mark(); seq != 8 {
		t.Fatalf("mark %d, want 8", seq)
	}
}

// TestSQLWatermarkFencedMovesInSQLite: the one-node SQLite mode claims no
// ticks in the table, so moves under a fence land as unfenced ones do.
func TestSQLWatermarkFencedMovesInSQLite(t *testing.T) {
	db := stateSQLite(t)
	ctx := versioning.WithFence(context.Background(), versioning.Fence{Tick: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Holder: "local"})
	w := SQLWatermark{DB: db, Name: EmergencyMark, Leader: "local"}
	for i, s := range []struct {
		set      bool
		from, to int64
		ok       bool
	}{{false, 0, 3, true}, {false, 0, 4, false}, {true, 3, 5, true}, {true, 3, 6, false}} {
		if ok, err := w.Advance(ctx, s.set, s.from, s.to); ok != s.ok || err != nil {
			t.Fatalf("move %d: %v %v, want %v", i, ok, err, s.ok)
		}
	}
	if seq, set, err := w.Load(ctx); seq != 5 || !set || err != nil {
		t.Fatalf("mark %d %v %v, want 5", seq, set, err)
	}
}

// leadEndingStore ends the cycle's context (the lead lost, or the
// tick_timeout reached) at the first proposal's policy read, as a lease
// running out mid-cycle does, and counts the proposals begun.
type leadEndingStore struct {
	versioning.Store
	end   context.CancelCauseFunc
	cause error
	began atomic.Int32
}

func (s *leadEndingStore) Policy(ctx context.Context, service string) (versioning.Policy, error) {
	if s.end == nil { // not armed yet
		return s.Store.Policy(ctx, service)
	}
	if s.began.Add(1) == 1 {
		s.end(s.cause)
	}
	if err := ctx.Err(); err != nil {
		return versioning.Policy{}, context.Cause(ctx)
	}
	return s.Store.Policy(ctx, service)
}

// TestCycleWhoseLeadEndsSubmitsNothingMoreAndCountsNoFailures: the lead
// ends (its lease runs out, or the tick_timeout is reached) while the
// cycle submits its proposals. The submissions left would all fail with
// the ended context: they are not made, governor_engine_proposals_total
// does not count one failure per service (an alert on failed proposals
// would page at every leader change), and the cycle's error says once why
// it stopped rather than once per service.
func TestCycleWhoseLeadEndsSubmitsNothingMoreAndCountsNoFailures(t *testing.T) {
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
	ins := liveFleet(t, st, services, instances)
	clk.Set(benchT0.Add(5 * time.Minute))
	reader, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	tracker, rec := testScoring(t)
	lost := errors.New("leader: lease expired")
	ending := &leadEndingStore{Store: st, cause: lost}
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st,
		Proposer: &recommend.Proposer{Store: ending, Clock: clk}, Fleet: fleetOf{ins}, Events: events.NewRecorder(100),
		Registerer: prometheus.NewRegistry(), Band: func(string) recommend.Band { return recommend.Band{Manual: true} }})
	if err != nil {
		t.Fatal(err)
	}
	// Warm-up cycles, until recommendations would be submitted; the
	// band lets none apply itself, so each cycle submits again.
	var res Result
	want := 0
	for i := 0; i < 5 && want < 2; i++ {
		clk.Advance(10 * time.Second)
		if res, err = e.Tick(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
		want = 0
		for _, r := range res.Recommendations {
			if r.Ruleset != nil {
				want++
			}
		}
	}
	failedBefore := testutil.ToFloat64(e.metrics.proposals.WithLabelValues("failed"))
	cctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	ending.end = end
	clk.Advance(10 * time.Second)
	_, err = e.Tick(cctx, clk.Now())
	if want < 2 {
		t.Fatalf("%d recommendations to submit: the test shows nothing", want)
	}
	if !errors.Is(err, lost) {
		t.Fatalf("Tick: %v, want the cause the cycle ended with", err)
	}
	if n := ending.began.Load(); n != 1 {
		t.Errorf("%d proposals begun after the lead ended, want only the one it ended in", n)
	}
	if got := testutil.ToFloat64(e.metrics.proposals.WithLabelValues("failed")) - failedBefore; got != 0 {
		t.Errorf("failed proposals counted %v for a cycle whose lead ended, want 0", got)
	}
	if n := strings.Count(err.Error(), lost.Error()); n != 1 {
		t.Errorf("the cycle's error names its end %d times, want once: %v", n, err)
	}
}
