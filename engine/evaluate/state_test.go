package evaluate

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

// stateDB opens a fresh SQLite database with the migrations applied.
func stateSQLite(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "state.db"), sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(context.Background(), db, migrations.SQLite); err != nil {
		t.Fatal(err)
	}
	return db
}

func statePostgres(t testing.TB) *sql.DB {
	t.Helper()
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if err := migrations.Up(ctx, db, migrations.Postgres); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM governor_engine_state`); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestSQLStateRefusesACycleOlderThanTheNewestClaim: leader a lost the lead
// in the middle of its cycle at t0 (its lease ran out on a hung database,
// say) and b has since claimed the cycle at t0+10s. What a still tries to
// save of its cycle is refused as a whole, so the rows b restored from and
// writes are not mixed with a's; b's own cycle, and later ones, are saved.
func TestSQLStateRefusesACycleOlderThanTheNewestClaim(t *testing.T) {
	db := statePostgres(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	claimed := t0.Add(10 * time.Second)
	if _, err := db.ExecContext(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ($1, 'b')`, claimed); err != nil {
		t.Fatal(err)
	}
	st := SQLState{DB: db}
	row := func(at time.Time, leader string) StateRow {
		return StateRow{Part: StateEvents, Format: stateFormat, At: at, Leader: leader, Data: []byte{1}}
	}
	err := st.Save(ctx, []StateRow{row(t0, "a"), {Part: StateBaseline, Key: "svc", Format: stateFormat, At: t0, Leader: "a", Data: []byte{2}}}, time.Time{})
	require.ErrorIs(t, err, ErrSuperseded)
	rows, err := st.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, rows, "a refused save writes nothing")
	for _, at := range []time.Time{claimed, claimed.Add(10 * time.Second)} {
		require.NoError(t, st.Save(ctx, []StateRow{row(at, "b")}, time.Time{}))
	}
	rows, err = st.Load(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.True(t, rows[0].At.Equal(claimed.Add(10*time.Second)))
}

func TestStateFailoverSQLite(t *testing.T) {
	testStateFailover(t, SQLState{DB: stateSQLite(t), Dialect: migrations.SQLite})
}
func TestStateFailoverPostgres(t *testing.T) { testStateFailover(t, SQLState{DB: statePostgres(t)}) }
func TestStateFailoverMemory(t *testing.T)   { testStateFailover(t, &MemState{}) }

// readings is one cycle's service-level entries: p99 seconds and error
// ratio per service, 50 requests per second, p50 a third of the p99.
func readings(p99, errRatio map[string]float64) map[signals.Key]*signals.Entry {
	out := map[signals.Key]*signals.Entry{}
	for svc, v := range p99 {
		k := signals.Key{Service: svc}
		out[k] = &signals.Entry{Key: k, Values: map[signals.Signal]signals.Value{
			signals.LatencyP99: signals.KnownValue(v), signals.LatencyP50: signals.KnownValue(v / 3),
			signals.ErrorRatio: signals.KnownValue(errRatio[svc]), signals.RequestRate: signals.KnownValue(50)}}
	}
	return out
}

// failoverEngine is one replica: an evaluator with alert levels (fixed p99
// levels of 200ms and 400ms, learned error-ratio levels over a 1% floor),
// a recommender that is conclusive after 100 healthy intervals, and the
// downstream latency of checkout's calls to payments (p99).
type failoverEngine struct {
	e   *Evaluator
	rec *events.Recorder
	st  *State
	p99 *float64
}

func newFailoverEngine(t testing.TB, name string, store StateStore) *failoverEngine {
	t.Helper()
	mdb := embeddedStore(t)
	reader, err := signals.NewReader(mdb, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	tracker, err := loadscore.New(loadscore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ro := recommend.DefaultOptions()
	ro.Thresholds.MinSamples = 100
	rc, err := recommend.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	l := DefaultAlertLevels()
	l.LatencyWarn, l.LatencyCritical = 200*time.Millisecond, 400*time.Millisecond
	f := &failoverEngine{rec: events.NewRecorder(1000), p99: new(float64)}
	f.e, err = New(Options{Reader: reader, Tracker: tracker, Recommender: rc, Versions: nopVersions{}, Levels: l,
		Breakers: downstreamSource{p99: f.p99}, Guard: &guardrail.Guard{}, Events: f.rec, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	f.st, err = NewState(f.e, StateOptions{Store: store, Leader: name, Every: 5, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// cycle runs the parts of a Tick that keep state across cycles: the
// downstream detectors, the baselines and the alert levels.
func (f *failoverEngine) cycle(t *testing.T, at time.Time, downstream float64, entries map[signals.Key]*signals.Entry) []guardrail.Incident {
	t.Helper()
	ctx := context.Background()
	*f.p99 = downstream
	inc, err := f.e.slowDownstreams(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	for k, en := range entries {
		f.e.o.Recommender.Evaluate(recommend.Input{At: at, Service: k.Service, Entry: en})
	}
	f.e.o.Levels.check(ctx, at, entries, f.e.o.Recommender.Thresholds, f.e.o.Events)
	return inc
}

func kinds(evs []events.Event) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		d := e.Detail.(events.Level)
		out[e.Service+" "+d.Signal+" "+d.Level]++
	}
	return out
}

// testStateFailover: leader A runs 400 cycles: checkout's downstream
// detector warms up, every service's baseline becomes conclusive, and
// three alert levels are crossed (checkout's p99 warn and critical, a
// learned error-ratio warn of search). A stops; B restores the state and
// at its first cycle reports no crossing again (C, a replica that starts
// from nothing, re-raises all three), clears at once what fell back
// below, has the same learned levels as A, and scores a downstream rise
// as a LatencyAnomaly that C, blind until its warm-up, misses.
func testStateFailover(t *testing.T, store StateStore) {
	ctx := context.Background()
	a := newFailoverEngine(t, "a", store)
	at := benchT0
	steady := func(i int) float64 { return 0.1 + 0.004*float64((i*7)%5) }
	healthy := func(i int) map[signals.Key]*signals.Entry {
		return readings(map[string]float64{"checkout": 0.05 + 0.002*float64(i%3), "search": 0.03 + 0.001*float64(i%4)},
			map[string]float64{"checkout": 0.001 * float64(i%2), "search": 0.02 + 0.001*float64(i%3)})
	}
	const cycles = 400
	for i := range cycles {
		at = at.Add(10 * time.Second)
		a.cycle(t, at, steady(i), healthy(i))
		if _, err := a.st.Save(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	a.rec = events.NewRecorder(1000)
	a.e.o.Events = a.rec
	incident := readings(map[string]float64{"checkout": 0.5, "search": 0.03}, map[string]float64{"checkout": 0, "search": 0.02})
	at = at.Add(10 * time.Second)
	a.cycle(t, at, steady(cycles), incident)
	if _, err := a.st.Save(ctx, at); err != nil {
		t.Fatal(err)
	}
	if got := kinds(a.rec.Events(events.LevelCrossed)); len(got) != 2 {
		t.Fatalf("A raised %v at the incident, want checkout's p99 warn and critical", got)
	}
	raisedByA := map[string]int{}
	for k := range a.e.o.Levels.raised {
		raisedByA[k.service+" "+k.signal+" "+k.level]++
	}
	if len(raisedByA) != 3 || raisedByA["search error_ratio warn"] != 1 {
		t.Fatalf("A holds %v raised, want checkout's p99 warn and critical and search's error-ratio warn", raisedByA)
	}
	wantThr, _ := a.e.o.Recommender.Thresholds("checkout")
	if wantThr.Inconclusive {
		t.Fatalf("A's baseline is inconclusive: %+v", wantThr)
	}

	// A stops. B takes over 10 seconds later; C starts from nothing.
	at = at.Add(10 * time.Second)
	b := newFailoverEngine(t, "b", store)
	stats, err := b.st.Restore(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Restored[StateEvents] != 1 || stats.Restored[StateBaseline] != 2 || stats.Restored[StateDownstream] != 1 || stats.Leader != "a" {
		t.Fatalf("restored %+v", stats)
	}
	c := newFailoverEngine(t, "c", &MemState{})
	if det := b.e.latency["checkout/payments"].det; det.Samples() < thresholds.DefaultOptions().Warmup {
		t.Fatalf("B's downstream detector has %d samples: not warm", det.Samples())
	}
	gotThr, ok := b.e.o.Recommender.Thresholds("checkout")
	if !ok || gotThr.Inconclusive || math.Abs(gotThr.BaselineP99-wantThr.BaselineP99) > 1e-12 || gotThr.HealthyIntervals < wantThr.HealthyIntervals-5 {
		t.Fatalf("B's checkout baseline %+v, A's %+v", gotThr, wantThr)
	}
	if _, _, source, ok := b.e.o.Levels.ErrorLevels("checkout", b.e.o.Recommender.Thresholds); !ok {
		t.Fatalf("B has no error-ratio levels for checkout (source %q)", source)
	}
	// The incident goes on: B reports nothing new, C re-raises.
	incB := b.cycle(t, at, 0.17, incident)
	incC := c.cycle(t, at, 0.17, incident)
	if got := b.rec.Events(events.LevelCrossed); len(got) != 0 {
		t.Fatalf("B re-raised %v at its first cycle", kinds(got))
	}
	if got := kinds(c.rec.Events(events.LevelCrossed)); !maps.Equal(got, raisedByA) {
		t.Fatalf("C (no state) raised %v: the contrast is gone", got)
	}
	if len(incB) != 1 || incB[0].Kind != LatencyAnomaly {
		t.Fatalf("B's first cycle at a 1.6x downstream rise: %+v, want a latency anomaly", incB)
	}
	if len(incC) != 0 {
		t.Fatalf("C's first cycle: %+v, want nothing (its detector is cold)", incC)
	}
	// checkout back to healthy: B clears what A raised, at once (search
	// stays above its error-ratio floor).
	at = at.Add(10 * time.Second)
	b.cycle(t, at, steady(0), healthy(0))
	if got := kinds(b.rec.Events(events.LevelCleared)); len(got) != 2 || got["checkout latency_p99 warn"] != 1 || got["checkout latency_p99 critical"] != 1 {
		t.Fatalf("B cleared %v, want checkout's p99 warn and critical", got)
	}
	// B saves its state now; rows it did not rewrite yet stay A's.
	if _, err := b.st.Save(ctx, at); err != nil {
		t.Fatal(err)
	}
	rows, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Part == StateEvents && r.Leader != "b" {
			t.Fatalf("events row by %q after B's save", r.Leader)
		}
	}
}

// TestStateRestoreIgnores: rows of another format, older than MaxAge,
// corrupt, or not newer than the replica's own state are left out with a
// reason; the rest is restored.
func TestStateRestoreIgnores(t *testing.T) {
	ctx := context.Background()
	store := &MemState{}
	at := benchT0.Add(2 * time.Hour)
	good := encodeEvents(eventState{raised: map[levelKey]time.Time{{"a", events.SignalErrorRatio, events.LevelWarn}: at.Add(-time.Minute)}})
	if err := store.Save(ctx, []StateRow{
		{Part: StateEvents, Format: stateFormat, At: at.Add(-time.Minute), Leader: "x", Data: good},
		{Part: StateBaseline, Key: "old", Format: stateFormat, At: at.Add(-2 * time.Hour), Leader: "x", Data: []byte{1}},
		{Part: StateBaseline, Key: "next", Format: stateFormat + 1, At: at, Leader: "x", Data: []byte{2}},
		{Part: StateDownstream, Key: "a/b", Format: stateFormat, At: at, Leader: "x", Data: []byte{stateFormat, 1}},
		{Part: StateBaseline, Key: "bad", Format: stateFormat, At: at, Leader: "x", Data: []byte("nonsense")},
	}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	f := newFailoverEngine(t, "y", store)
	stats, err := f.st.Restore(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Restored[StateEvents] != 1 || len(stats.Restored) != 1 || sum(stats.Ignored) != 4 {
		t.Fatalf("restored %v, ignored %v", stats.Restored, stats.Ignored)
	}
	for _, want := range []string{"older than max_age 1h0m0s", "format 2, this engine reads 1"} {
		if stats.Ignored[want] != 1 {
			t.Fatalf("ignored %v: want one %q", stats.Ignored, want)
		}
	}
	if len(f.e.o.Levels.raised) != 1 {
		t.Fatalf("raised %v", f.e.o.Levels.raised)
	}
	// The replica's own newer state is kept.
	f.e.last = at
	stats, _ = f.st.Restore(ctx, at)
	if len(stats.Restored) != 0 || stats.Ignored["not newer than this replica's state"] != 3 {
		t.Fatalf("second restore: restored %v, ignored %v", stats.Restored, stats.Ignored)
	}
}

// TestStateSaveSpread: each cycle writes about 1/Every of the baselines,
// every baseline once per Every cycles, and the events, scores and control
// rows only when they changed (and once per Every cycles).
func TestStateSaveSpread(t *testing.T) {
	ctx := context.Background()
	store := &MemState{}
	f := newFailoverEngine(t, "a", store)
	p99 := map[string]float64{}
	for i := range 50 {
		p99["svc-"+string(rune('a'+i%26))+string(rune('a'+i/26))] = 0.05
	}
	at := benchT0
	f.cycle(t, at, 0.1, readings(p99, nil))
	seen := map[string]int{}
	total := 0
	for i := range 5 {
		before, _ := store.Load(ctx)
		st, err := f.st.Save(ctx, at.Add(time.Duration(i)*10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := store.Load(ctx)
		for _, r := range rows {
			if r.At.Equal(at.Add(time.Duration(i) * 10 * time.Second)) {
				seen[r.Part+"/"+r.Key]++
			}
		}
		total += st.Rows
		if i > 0 && st.Rows > 30 {
			t.Fatalf("cycle %d wrote %d rows of %d", i, st.Rows, len(before))
		}
	}
	for svc := range p99 {
		if seen[StateBaseline+"/"+svc] != 1 {
			t.Fatalf("baseline of %s written %d times in 5 cycles, want 1", svc, seen[StateBaseline+"/"+svc])
		}
	}
	if seen[StateEvents+"/"] != 1 || seen[StateDownstream+"/checkout/payments"] != 1 {
		t.Fatalf("events row written %d times, downstream %d, want 1 each", seen[StateEvents+"/"], seen[StateDownstream+"/checkout/payments"])
	}
	if seen[StateScores+"/"] != 1 || seen[StateControl+"/"] != 1 {
		t.Fatalf("scores row written %d times, control %d, want 1 each", seen[StateScores+"/"], seen[StateControl+"/"])
	}
	if total != 50+4 {
		t.Fatalf("%d rows in 5 cycles, want 54", total)
	}
}

func TestNewStateValidates(t *testing.T) {
	f := newFailoverEngine(t, "a", &MemState{})
	for _, tt := range []struct {
		o    StateOptions
		want string
	}{
		{StateOptions{}, "Store is required"},
		{StateOptions{Store: &MemState{}, Every: -1}, "Every -1"},
		{StateOptions{Store: &MemState{}, MaxAge: -time.Second}, "MaxAge -1s"},
		// Every row older than it at a takeover: nothing restored.
		{StateOptions{Store: &MemState{}, MaxAge: time.Nanosecond}, "StateOptions.MaxAge 1ns: want at least 1m (0: 1h)"},
		{StateOptions{Store: &MemState{}, MaxAge: 59 * time.Second}, "StateOptions.MaxAge 59s: want at least 1m"},
	} {
		if _, err := NewState(f.e, tt.o); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("%+v: err %v, want %q", tt.o, err, tt.want)
		}
	}
}

func TestEventStateRoundTrip(t *testing.T) {
	s := eventState{
		raised: map[levelKey]time.Time{{"a", events.SignalLatencyP99, events.LevelCritical}: benchT0, {"b", events.SignalErrorRatio, events.LevelWarn}: benchT0.Add(time.Second)},
		open:   map[string]bool{"a/b": true, "c/d": false},
		bad:    map[string]distribution.State{"a/1": distribution.StateStale, "a/2": distribution.StateNacked, "a/3": distribution.StateSynced},
	}
	b := encodeEvents(s)
	got, err := decodeEvents(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.raised) != 2 || !got.raised[levelKey{"a", events.SignalLatencyP99, events.LevelCritical}].Equal(benchT0) ||
		len(got.open) != 1 || !got.open["a/b"] || len(got.bad) != 2 || got.bad["a/2"] != distribution.StateNacked {
		t.Fatalf("decoded %+v", got)
	}
	if string(encodeEvents(got)) != string(b) {
		t.Fatal("decoded state encodes to other bytes")
	}
}

// The parts of FuzzDecodeState, in the order its first argument picks them.
var fuzzParts = []string{StateEvents, StateDownstream, StateBaseline, StateScores, StateControl}

// fuzzRestorers are fresh restorers of every part, with the options of the
// seeds of stateSeeds.
type fuzzRestorers struct {
	tracker *loadscore.Tracker
	rec     *recommend.Recommender
	down    *latencyBaseline
}

func newFuzzRestorers(t testing.TB) *fuzzRestorers {
	t.Helper()
	tr, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	ro := recommend.DefaultOptions()
	ro.MinScores, ro.Thresholds.MinSamples = 2, 3
	rec, err := recommend.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	return &fuzzRestorers{tracker: tr, rec: rec}
}

// fuzzErrs is the error a part's decoder wraps when it refuses a row.
var fuzzErrs = map[string]error{StateEvents: ErrState, StateDownstream: ErrState, StateBaseline: thresholds.ErrState,
	StateScores: loadscore.ErrState, StateControl: recommend.ErrState}

// restore decodes row b of part as Restore does and returns the encoding
// of what it restored, as the next Save would write it.
func (r *fuzzRestorers) restore(part string, b []byte) ([]byte, error) {
	switch part {
	case StateEvents:
		s, err := decodeEvents(b)
		if err != nil {
			return nil, err
		}
		return encodeEvents(s), nil
	case StateDownstream:
		lb, err := decodeDownstream(b)
		if err != nil {
			return nil, err
		}
		r.down = lb
		return encodeDownstream(lb)
	case StateBaseline:
		if err := r.rec.RestoreBaseline("checkout", b); err != nil {
			return nil, err
		}
		var enc []byte
		err := r.rec.SaveBaselines(nil, func(_ string, b []byte) { enc = b })
		return enc, err
	case StateScores:
		if err := r.tracker.UnmarshalBinary(b); err != nil {
			return nil, err
		}
		return r.tracker.MarshalBinary()
	default:
		if err := r.rec.RestoreControllers(b); err != nil {
			return nil, err
		}
		return r.rec.SaveControllers(nil)
	}
}

// use runs what was restored one more cycle.
func (r *fuzzRestorers) use(t *testing.T) {
	at := benchT0.Add(time.Hour)
	if r.down != nil {
		if res := r.down.det.Observe(at, 1); !(res.Score >= 0 && res.Score <= 1) {
			t.Fatalf("restored detector scores %v", res.Score)
		}
	}
	e := fuzzEntry("checkout", 1)
	r.rec.Evaluate(recommend.Input{At: at, Service: "checkout", Score: r.tracker.Observe(at, e), Entry: e, Instances: 1})
}

// fuzzEntry is service svc's signals at step i: request rate, latency and
// in-flight moving with the step.
func fuzzEntry(svc string, i int) *signals.Entry {
	e := &signals.Entry{Key: signals.Key{Service: svc}, Values: map[signals.Signal]signals.Value{}}
	for _, s := range signals.All {
		e.Values[s] = signals.Unknown(signals.Missing, "no series")
	}
	load := 0.6 + 0.35*math.Sin(float64(i)/3)
	e.Values[signals.RequestRate] = signals.KnownValue(1000 * load)
	e.Values[signals.ErrorRatio] = signals.KnownValue(0.001 * load)
	e.Values[signals.LatencyP50] = signals.KnownValue(0.02 * load)
	e.Values[signals.LatencyP99] = signals.KnownValue(0.15 * load)
	e.Values[signals.InFlight] = signals.KnownValue(20 * load)
	e.Values[signals.Limit] = signals.KnownValue(25)
	return e
}

// stateSeeds returns valid rows of every part, as a leader writes them: at
// its start (empty) and after cycles of two services, one with an active
// version its controller tracks; each with the index of its part in
// fuzzParts.
func stateSeeds(t testing.TB) (parts []uint8, rows [][]byte) {
	t.Helper()
	add := func(part string, b []byte) {
		parts, rows = append(parts, uint8(slices.Index(fuzzParts, part))), append(rows, b)
	}
	r := newFuzzRestorers(t)
	emptyScores, _ := r.tracker.MarshalBinary()
	emptyCtl, _ := r.rec.SaveControllers(nil)
	add(StateScores, emptyScores)
	add(StateControl, emptyCtl)
	add(StateEvents, encodeEvents(eventState{}))
	add(StateEvents, encodeEvents(eventState{
		raised: map[levelKey]time.Time{{"a", events.SignalLatencyP99, events.LevelWarn}: benchT0, {"b", events.SignalErrorRatio, events.LevelCritical}: benchT0.Add(time.Hour)},
		open:   map[string]bool{"x/y": true, "a/db": true},
		bad:    map[string]distribution.State{"a/1": distribution.StateStale, "b/2": distribution.StateNacked}}))
	rs := &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/api/"},
		RateLimit: &rules.RateLimit{Rate: 500}, Concurrency: &rules.Concurrency{Initial: 20, Min: 2, Max: 40}}}}
	active := &versioning.Version{Service: "checkout", Number: 3, State: versioning.StatePublished, Active: true, Ruleset: rs}
	for i := range 12 {
		at := benchT0.Add(time.Duration(i) * 15 * time.Second)
		for _, svc := range []string{"checkout", "search"} {
			e := fuzzEntry(svc, i)
			sc := r.tracker.Observe(at, e)
			in := recommend.Input{At: at, Service: svc, Score: sc, Entry: e, Instances: 2}
			if svc == "checkout" {
				in.Active = active
			}
			r.rec.Evaluate(in)
		}
		if i == 0 || i == 5 || i == 11 {
			sc, _ := r.tracker.MarshalBinary()
			ctl, _ := r.rec.SaveControllers(nil)
			add(StateScores, sc)
			add(StateControl, ctl)
			_ = r.rec.SaveBaselines(nil, func(_ string, b []byte) { add(StateBaseline, b) })
		}
	}
	fresh, _ := thresholds.New(thresholds.DefaultOptions())
	ds, _ := encodeDownstream(&latencyBaseline{det: fresh})
	add(StateDownstream, ds)
	det, _ := thresholds.New(thresholds.DefaultOptions())
	for i := range 40 {
		det.Observe(benchT0.Add(time.Duration(i)*15*time.Second), 0.05+0.01*float64(i%4))
	}
	ds, _ = encodeDownstream(&latencyBaseline{p99: 0.1, n: 40, slow: true, slowFor: 2, det: det})
	add(StateDownstream, ds)
	return parts, rows
}

// FuzzDecodeState: arbitrary bytes never panic the decoder of any part of
// the engine's state (as Restore picks it by the row's part: events,
// downstream, baseline, scores, control); every error wraps the part's
// ErrState; what a decoder accepts encodes to bytes it accepts again and
// that encode to the same bytes (decode(encode(x)) = x, though the bytes
// fuzzed need not be canonical: a long varint, an unsorted list), and the
// restored piece keeps working. The seeds are valid rows of every part,
// empty and learned (checked here), so that mutations reach the decoders
// of the inner states: the detectors, sketches, controllers and smoothed
// scores.
func FuzzDecodeState(f *testing.F) {
	parts, rows := stateSeeds(f)
	for i := range rows {
		if _, err := newFuzzRestorers(f).restore(fuzzParts[parts[i]], rows[i]); err != nil {
			f.Fatalf("seed %d, a %s row, refused: %v", i, fuzzParts[parts[i]], err)
		}
		f.Add(parts[i], rows[i])
	}
	f.Fuzz(func(t *testing.T, p uint8, b []byte) { checkRow(t, fuzzParts[int(p)%len(fuzzParts)], b) })
}

// FuzzPatchedStateRow: a valid row (one of stateSeeds, picked by seed)
// with patch written over it at an offset, and cut short if cut is less
// than its length, passes the checks of FuzzDecodeState. The input is a
// few bytes, quick to mutate and minimize, and every mutation lands inside
// a row past its valid start: in a baseline's or downstream's detector, a
// controller, a smoothed score.
func FuzzPatchedStateRow(f *testing.F) {
	parts, rows := stateSeeds(f)
	for i, b := range rows {
		f.Add(uint8(i), uint16(len(b)/2), []byte{0xff}, uint16(len(b)))
		f.Add(uint8(i), uint16(len(b)-1), []byte{}, uint16(len(b)-1))
	}
	f.Fuzz(func(t *testing.T, seed uint8, at uint16, patch []byte, cut uint16) {
		i := int(seed) % len(rows)
		b := rows[i]
		off := int(at) % (len(b) + 1)
		b = slices.Concat(b[:off], patch, b[min(len(b), off+len(patch)):])
		if int(cut) < len(b) {
			b = b[:cut]
		}
		checkRow(t, fuzzParts[parts[i]], b)
	})
}

// checkRow decodes b as a row of part: a refusal wraps the part's error;
// what is accepted encodes to bytes that are accepted again and encode to
// the same bytes, and the restored piece keeps working.
func checkRow(t *testing.T, part string, b []byte) {
	r := newFuzzRestorers(t)
	enc, err := r.restore(part, b)
	if err != nil {
		if !errors.Is(err, fuzzErrs[part]) {
			t.Fatalf("%s: error %v does not wrap %v", part, err, fuzzErrs[part])
		}
		return
	}
	again, err := newFuzzRestorers(t).restore(part, enc)
	if err != nil {
		t.Fatalf("%s: accepted state does not survive a round trip: %v", part, err)
	}
	if string(again) != string(enc) {
		t.Fatalf("%s: accepted state encodes to other bytes after a round trip", part)
	}
	r.use(t)
}

// TestRestoredServiceIsForgottenAfterForgetAfter: a replica taking over
// restores the state of a service the old leader still kept; when it does
// not come back, the new leader forgets it after ForgetAfter as well,
// counted from the old leader's last save of it.
func TestRestoredServiceIsForgottenAfterForgetAfter(t *testing.T) {
	ctx := context.Background()
	reader, st := checkoutGoneAfter10m(t)
	mem := &MemState{}
	engine := func() (*Evaluator, *recommend.Recommender, *State) {
		tracker, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := recommend.New(recommend.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewState(e, StateOptions{Store: mem, Every: 1})
		if err != nil {
			t.Fatal(err)
		}
		return e, rec, s
	}
	old, _, oldState := engine()
	at := benchT0.Add(5 * time.Minute)
	if _, err := old.Tick(ctx, at); err != nil {
		t.Fatal(err)
	}
	if _, err := oldState.Save(ctx, at); err != nil {
		t.Fatal(err)
	}
	e, rec, s := engine()
	if _, err := s.Restore(ctx, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at   time.Duration
		want string
	}{
		{20 * time.Minute, "cart checkout"},
		{40 * time.Minute, "cart checkout"},
		{90 * time.Minute, "cart"},
	} {
		if _, err := e.Tick(ctx, benchT0.Add(tt.at)); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(recommended(t, rec), " "); got != tt.want {
			t.Fatalf("at +%s: recommender keeps %q, want %q", tt.at, got, tt.want)
		}
	}
}

// TestBaselineFromNewerReleaseSaysItIsRelearnt: after a rollback, a
// baseline saved by a newer release is refused with a warning that says
// the baseline is relearnt, not an error.
func TestBaselineFromNewerReleaseSaysItIsRelearnt(t *testing.T) {
	ctx := context.Background()
	store := &MemState{}
	at := benchT0.Add(2 * time.Hour)
	if err := store.Save(ctx, []StateRow{
		{Part: StateBaseline, Key: "checkout", Format: stateFormat, At: at, Leader: "x", Data: []byte{255, 0}},
	}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	f := newFailoverEngine(t, "y", store)
	var buf bytes.Buffer
	f.st.o.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, err := f.st.Restore(ctx, at); err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.Lines(buf.String()) {
		if strings.Contains(l, "key=checkout") {
			line = l
		}
	}
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "relearning it from live traffic") ||
		!strings.Contains(line, "newer release") {
		t.Fatalf("want a warning saying the baseline is relearnt, got %q (log %s)", line, buf.String())
	}
}
