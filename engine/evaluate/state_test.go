package evaluate

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/distribution"
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

func TestStateFailoverSQLite(t *testing.T)   { testStateFailover(t, SQLState{DB: stateSQLite(t)}) }
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
	mdb, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mdb.Close() })
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

// FuzzDecodeState: arbitrary bytes never panic the decoders of the events
// and downstream rows; what the events decoder accepts survives an
// encode-decode round trip.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeEvents(eventState{raised: map[levelKey]time.Time{{"a", events.SignalLatencyP99, events.LevelWarn}: benchT0},
		open: map[string]bool{"x/y": true}, bad: map[string]distribution.State{"a/1": distribution.StateStale}}))
	det, _ := thresholds.New(thresholds.DefaultOptions())
	for i := range 20 {
		det.Observe(benchT0.Add(time.Duration(i)*time.Second), float64(i%3))
	}
	ds, _ := encodeDownstream(&latencyBaseline{p99: 0.1, n: 7, det: det})
	f.Add(ds)
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := decodeEvents(b); err == nil {
			// Bytes need not be canonical (a long varint, an unsorted
			// list), but what they decode to survives a round trip.
			enc := encodeEvents(s)
			again, err := decodeEvents(enc)
			if err != nil || string(encodeEvents(again)) != string(enc) {
				t.Fatalf("accepted events state does not survive a round trip: %v", err)
			}
		} else if !errors.Is(err, ErrState) {
			t.Fatalf("error %v does not wrap ErrState", err)
		}
		if lb, err := decodeDownstream(b); err == nil {
			lb.det.Observe(benchT0, 1)
		} else if !errors.Is(err, ErrState) {
			t.Fatalf("error %v does not wrap ErrState", err)
		}
	})
}
