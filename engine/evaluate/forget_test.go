package evaluate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
)

// The tests of this file show what the engine forgets of a service (or a
// downstream) absent for Options.ForgetAfter, and that its saved state
// forgets it too.

// forgetEngine is an evaluator over reader and st with fixed p99 levels so
// low that every service's p99 crosses both, its events recorded and its
// state saved every cycle to store.
type forgetEngine struct {
	e   *Evaluator
	rec *recommend.Recommender
	evs *events.Recorder
	st  *State
}

func newForgetEngine(t *testing.T, reader *signals.Reader, st versioning.Store, store StateStore, maxGap time.Duration) forgetEngine {
	t.Helper()
	tracker, err := loadscore.New(loadscore.Options{Weights: loadscore.Weights{loadscore.Latency: 0.5, loadscore.InFlight: 0.5}, MaxGap: maxGap})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recommend.New(recommend.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	l := DefaultAlertLevels()
	l.LatencyWarn, l.LatencyCritical = time.Microsecond, 2*time.Microsecond
	evs := events.NewRecorder(1000)
	e, err := New(Options{Reader: reader, Tracker: tracker, Recommender: rec, Versions: st, Levels: l, Events: evs,
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewState(e, StateOptions{Store: store, Every: 1})
	if err != nil {
		t.Fatal(err)
	}
	return forgetEngine{e: e, rec: rec, evs: evs, st: s}
}

// tick runs and saves the cycle at benchT0+d and returns the level events
// it emitted, "kind service signal level" sorted.
func (f forgetEngine) tick(t *testing.T, d time.Duration) []string {
	t.Helper()
	ctx := context.Background()
	n := map[events.Kind]int{events.LevelCrossed: len(f.evs.Events(events.LevelCrossed)), events.LevelCleared: len(f.evs.Events(events.LevelCleared))}
	if _, err := f.e.Tick(ctx, benchT0.Add(d)); err != nil && !errors.Is(err, ErrMetricsFailed) {
		t.Fatal(err)
	}
	if _, err := f.st.Save(ctx, benchT0.Add(d)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kind := range []events.Kind{events.LevelCrossed, events.LevelCleared} {
		for _, ev := range f.evs.Events(kind)[n[kind]:] {
			d := ev.Detail.(events.Level)
			out = append(out, fmt.Sprintf("%s %s %s %s", kind, ev.Service, d.Signal, d.Level))
		}
	}
	slices.Sort(out)
	return out
}

// raisedServices lists the services with a level raised in the saved
// events row of store.
func raisedServices(t *testing.T, store StateStore) []string {
	t.Helper()
	rows, err := store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if r.Part != StateEvents {
			continue
		}
		ev, err := decodeEvents(r.Data)
		if err != nil {
			t.Fatal(err)
		}
		for k := range ev.raised {
			if !slices.Contains(out, k.service) {
				out = append(out, k.service)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestRaisedLevelsOfAForgottenServiceAreResolved: checkout's p99 is above
// both its levels when it stops reporting. Its levels stay raised while it
// may come back (ForgetAfter); once the engine forgets it, both are
// resolved with level_cleared, and neither the evaluator nor the saved
// events row keeps them. Cart, which reports on, keeps its.
func TestRaisedLevelsOfAForgottenServiceAreResolved(t *testing.T) {
	reader, st := checkoutGoneAfter10m(t)
	mem := &MemState{}
	f := newForgetEngine(t, reader, st, mem, 0)
	crossed := func(svc string) []string {
		return []string{"level_crossed " + svc + " latency_p99 critical", "level_crossed " + svc + " latency_p99 warn"}
	}
	if got, want := f.tick(t, 5*time.Minute), append(crossed("cart"), crossed("checkout")...); !slices.Equal(got, want) {
		t.Fatalf("+5m: %q, want %q", got, want)
	}
	if got := f.tick(t, 40*time.Minute); !slices.Equal(got, crossed("cart")) {
		t.Fatalf("+40m (checkout gone, not forgotten): %q, want %q", got, crossed("cart"))
	}
	if got := raisedServices(t, mem); !slices.Equal(got, []string{"cart", "checkout"}) {
		t.Fatalf("+40m: saved raised levels of %q", got)
	}
	want := append(crossed("cart"), "level_cleared checkout latency_p99 critical", "level_cleared checkout latency_p99 warn")
	slices.Sort(want)
	if got := f.tick(t, 90*time.Minute); !slices.Equal(got, want) {
		t.Fatalf("+90m (checkout forgotten): %q, want %q", got, want)
	}
	for _, ev := range f.evs.Events(events.LevelCleared) {
		if ev.Service != "checkout" || !strings.Contains(ev.Message, "no longer reports") {
			t.Fatalf("cleared event %+v: want checkout, saying it no longer reports", ev)
		}
	}
	for k := range f.e.o.Levels.raised {
		if k.service == "checkout" {
			t.Fatalf("checkout's %v still raised", k)
		}
	}
	if got := raisedServices(t, mem); !slices.Equal(got, []string{"cart"}) {
		t.Fatalf("+90m: saved raised levels of %q, want cart's only", got)
	}
	if got := f.tick(t, 100*time.Minute); !slices.Equal(got, crossed("cart")) {
		t.Fatalf("+100m: %q, want %q (nothing more of checkout)", got, crossed("cart"))
	}
}

// TestRestoredRaisedLevelOfAGoneServiceIsResolved: a replica takes over
// from a leader that raised a level of "gone", a service that reports no
// more and whose baseline it did not save. The new leader resolves it
// once ForgetAfter has passed since it was last reported, rather than
// keeping it raised (and saved) for ever.
func TestRestoredRaisedLevelOfAGoneServiceIsResolved(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store func(t *testing.T) StateStore
	}{
		{"memory", func(*testing.T) StateStore { return &MemState{} }},
		{"sqlite", func(t *testing.T) StateStore { return SQLState{DB: stateSQLite(t), Dialect: migrations.SQLite} }},
		{"postgres", func(t *testing.T) StateStore { return SQLState{DB: statePostgres(t)} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store := tt.store(t)
			raisedAt := benchT0.Add(10 * time.Minute)
			gone := eventState{raised: map[levelKey]time.Time{
				{"gone", events.SignalErrorRatio, events.LevelWarn}: raisedAt,
			}}
			if err := store.Save(ctx, []StateRow{{Part: StateEvents, Format: stateFormat, At: raisedAt, Leader: "old",
				Data: encodeEvents(gone)}}, time.Time{}); err != nil {
				t.Fatal(err)
			}
			reader, st := checkoutGoneAfter10m(t)
			f := newForgetEngine(t, reader, st, store, 0)
			if _, err := f.st.Restore(ctx, benchT0.Add(11*time.Minute)); err != nil {
				t.Fatal(err)
			}
			f.tick(t, 30*time.Minute)
			if got := raisedServices(t, store); !slices.Contains(got, "gone") {
				t.Fatalf("+30m: saved raised levels of %q, want gone's kept while it may come back", got)
			}
			if n := len(f.evs.Events(events.LevelCleared)); n != 0 {
				t.Fatalf("+30m: %d cleared", n)
			}
			f.tick(t, 75*time.Minute)
			got := f.evs.Events(events.LevelCleared)
			if len(got) != 1 || got[0].Service != "gone" || got[0].Detail.(events.Level).Signal != events.SignalErrorRatio {
				t.Fatalf("+75m: cleared %+v, want gone's error-ratio warn", got)
			}
			if got := raisedServices(t, store); slices.Contains(got, "gone") {
				t.Fatalf("+75m: saved raised levels of %q, want none of gone", got)
			}
		})
	}
}

// TestForgottenServiceIsNotRestoredByTheNextLeader: once the leader forgot
// checkout, the state it saved no longer carries checkout's baseline: a
// replica taking over right after does not bring it back.
func TestForgottenServiceIsNotRestoredByTheNextLeader(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store func(t *testing.T) StateStore
	}{
		{"memory", func(*testing.T) StateStore { return &MemState{} }},
		{"sqlite", func(t *testing.T) StateStore { return SQLState{DB: stateSQLite(t), Dialect: migrations.SQLite} }},
		{"postgres", func(t *testing.T) StateStore { return SQLState{DB: statePostgres(t)} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reader, st := checkoutGoneAfter10m(t)
			store := tt.store(t)
			old := newForgetEngine(t, reader, st, store, 0)
			for _, d := range []time.Duration{5 * time.Minute, 40 * time.Minute, 90 * time.Minute} {
				old.tick(t, d)
			}
			if got := strings.Join(recommended(t, old.rec), " "); got != "cart" {
				t.Fatalf("old leader keeps %q", got)
			}
			next := newForgetEngine(t, reader, st, store, 0)
			if _, err := next.st.Restore(context.Background(), benchT0.Add(91*time.Minute)); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(recommended(t, next.rec), " "); got != "cart" {
				t.Fatalf("next leader restored %q, want cart only", got)
			}
			if got := next.tick(t, 92*time.Minute); slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "checkout") }) {
				t.Fatalf("next leader: %q", got)
			}
			// The old leader takes the lead back: the forget it saved is
			// no news to it.
			if _, err := old.st.Restore(context.Background(), benchT0.Add(93*time.Minute)); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(recommended(t, old.rec), " "); got != "cart" {
				t.Fatalf("old leader after restoring keeps %q", got)
			}
		})
	}
}

// TestScoresAndRecommendationsGoWithAForgottenService: with a tracker MaxGap
// longer than ForgetAfter, the last score and recommendation of a service
// the engine forgot are not shown on until MaxGap.
func TestScoresAndRecommendationsGoWithAForgottenService(t *testing.T) {
	reader, st := checkoutGoneAfter10m(t)
	f := newForgetEngine(t, reader, st, &MemState{}, 3*time.Hour)
	f.tick(t, 5*time.Minute)
	f.tick(t, 40*time.Minute)
	if got := len(f.e.Scores()); got != 2 {
		t.Fatalf("+40m: %d scores, want checkout's kept", got)
	}
	f.tick(t, 90*time.Minute)
	var got []string
	for _, s := range f.e.Scores() {
		got = append(got, "score "+s.Key.Service)
	}
	for _, r := range f.e.Recommendations() {
		got = append(got, "rec "+r.Service)
	}
	if want := []string{"score cart", "rec cart"}; !slices.Equal(got, want) {
		t.Fatalf("+90m: %q, want %q", got, want)
	}
}

// TestForgottenDownstreamIsNotRestoredByTheNextLeader: checkout's calls to
// payments stop; once the leader drops that downstream's baseline and
// detector (ForgetAfter without its series), the state it saved no longer
// carries them: a replica taking over does not bring them back.
func TestForgottenDownstreamIsNotRestoredByTheNextLeader(t *testing.T) {
	ctx := context.Background()
	store := &MemState{}
	a := newFailoverEngine(t, "a", store)
	at := benchT0
	for range 10 {
		a.cycle(t, at, 0.1, nil)
		if _, err := a.st.Save(ctx, at); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Minute)
	}
	for range 65 {
		a.cycle(t, at, math.NaN(), nil)
		if _, err := a.st.Save(ctx, at); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Minute)
	}
	if len(a.e.latency) != 0 {
		t.Fatalf("leader keeps %d downstream baselines", len(a.e.latency))
	}
	b := newFailoverEngine(t, "b", store)
	if _, err := b.st.Restore(ctx, at); err != nil {
		t.Fatal(err)
	}
	if len(b.e.latency) != 0 {
		t.Fatalf("next leader restored downstream baselines %v", slices.Collect(maps.Keys(b.e.latency)))
	}
}

// TestForgottenServiceLeavesTheLoadScoreTracker: with a tracker MaxGap
// longer than ForgetAfter, the engine that forgets checkout makes the
// tracker forget it at the same cycle: neither the tracker nor the saved
// scores row keeps its smoothing and hysteresis.
func TestForgottenServiceLeavesTheLoadScoreTracker(t *testing.T) {
	reader, st := checkoutGoneAfter10m(t)
	mem := &MemState{}
	f := newForgetEngine(t, reader, st, mem, 3*time.Hour)
	tracked := func() bool {
		b, err := f.e.o.Tracker.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Contains(b, []byte("checkout"))
	}
	savedScores := func() bool {
		rows, err := mem.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Part == StateScores {
				return bytes.Contains(r.Data, []byte("checkout"))
			}
		}
		t.Fatal("no scores row saved")
		return false
	}
	f.tick(t, 5*time.Minute)
	f.tick(t, 40*time.Minute)
	if !tracked() || !savedScores() {
		t.Fatal("+40m: checkout's score is not kept while it may come back")
	}
	f.tick(t, 90*time.Minute)
	if tracked() {
		t.Fatal("+90m: the tracker keeps the score of forgotten checkout")
	}
	if savedScores() {
		t.Fatal("+90m: the saved scores row keeps forgotten checkout")
	}
}

// outageStore is an embedded store in which checkout and cart report for
// three hours and ship for the first 10 minutes, and a rules store.
func outageStore(t *testing.T) (*embedded.DB, versioning.Store) {
	t.Helper()
	db := embeddedStore(t)
	writeService(t, db, "ship", benchT0, benchT0.Add(10*time.Minute))
	// Ten minutes at a time: the store refuses samples far older than
	// its newest.
	for from := benchT0; from.Before(benchT0.Add(3 * time.Hour)); from = from.Add(10 * time.Minute) {
		for _, svc := range []string{"checkout", "cart"} {
			writeService(t, db, svc, from, from.Add(10*time.Minute-10*time.Second))
		}
	}
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return db, st
}

// TestPartialStoreLongerThanForgetAfterForgetsNothing: from +10m to +2h the
// store holding checkout's series is unavailable; the federated store
// answers without them and warns. Checkout keeps running (its p99 above
// its levels): it is not gone, and the engine neither resolves its raised
// levels nor forgets its state, however long the outage. Ship, which
// stopped reporting at +10m, is not forgotten on a partial read either,
// but at the first whole one after ForgetAfter.
func TestPartialStoreLongerThanForgetAfterForgetsNothing(t *testing.T) {
	db, st := outageStore(t)
	src := lossySource{db: db, from: benchT0.Add(10 * time.Minute), to: benchT0.Add(2 * time.Hour),
		hide: []string{"checkout"}, warn: "partial response: store 2 unreachable"}
	reader, err := signals.NewReader(src, signals.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mem := &MemState{}
	f := newForgetEngine(t, reader, st, mem, 0)
	f.tick(t, 5*time.Minute)
	for _, d := range []time.Duration{40 * time.Minute, 90 * time.Minute, 119 * time.Minute} {
		if got := f.tick(t, d); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "level_cleared") }) {
			t.Fatalf("+%s (store partial): %q, want nothing cleared", d, got)
		}
		if got := strings.Join(recommended(t, f.rec), " "); got != "cart checkout ship" {
			t.Fatalf("+%s (store partial): the recommender keeps %q, want cart checkout ship", d, got)
		}
		if got := raisedServices(t, mem); !slices.Equal(got, []string{"cart", "checkout", "ship"}) {
			t.Fatalf("+%s (store partial): saved raised levels of %q", d, got)
		}
	}
	got := f.tick(t, 125*time.Minute)
	for _, s := range got {
		if strings.HasPrefix(s, "level_cleared") && !strings.Contains(s, " ship ") {
			t.Fatalf("+125m (store whole): %q, want only ship's levels cleared", got)
		}
	}
	if !slices.Contains(got, "level_cleared ship latency_p99 warn") {
		t.Fatalf("+125m (store whole): %q, want ship forgotten", got)
	}
	if got := strings.Join(recommended(t, f.rec), " "); got != "cart checkout" {
		t.Fatalf("+125m: the recommender keeps %q, want cart checkout", got)
	}
}

// failingSource answers, in [from, to), the queries containing keep
// without the series of the services in hide, and fails every other query.
type failingSource struct {
	db       *embedded.DB
	from, to time.Time
	hide     []string
	keep     string
}

func (s failingSource) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	res, err := s.db.Query(ctx, q, at)
	if err != nil || at.Before(s.from) || !at.Before(s.to) {
		return res, err
	}
	if !strings.Contains(q, s.keep) {
		return nil, errors.New("query timed out")
	}
	out := *res
	out.Samples = slices.DeleteFunc(slices.Clone(res.Samples), func(x signals.Sample) bool { return slices.Contains(s.hide, x.Labels["service"]) })
	return &out, nil
}

func (s failingSource) QueryRange(ctx context.Context, q string, r signals.Range) (*signals.Result, error) {
	return s.db.QueryRange(ctx, q, r)
}

func (failingSource) EvaluatesPromQL() {}

// TestFailingReadsLongerThanForgetAfterForgetNothing: from +10m to +2h
// most signal queries fail; the one that answers lacks checkout. A cycle
// whose read failed in part cannot tell a service that is gone from one
// whose series it could not read: nothing is forgotten or resolved.
func TestFailingReadsLongerThanForgetAfterForgetNothing(t *testing.T) {
	db, st := outageStore(t)
	src := failingSource{db: db, from: benchT0.Add(10 * time.Minute), to: benchT0.Add(2 * time.Hour),
		hide: []string{"checkout"}, keep: "governor_sdk_limit"}
	reader, err := signals.NewReader(src, signals.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mem := &MemState{}
	f := newForgetEngine(t, reader, st, mem, 0)
	f.tick(t, 5*time.Minute)
	for _, d := range []time.Duration{40 * time.Minute, 90 * time.Minute} {
		if got := f.tick(t, d); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "level_cleared") }) {
			t.Fatalf("+%s (reads failing): %q, want nothing cleared", d, got)
		}
		if got := strings.Join(recommended(t, f.rec), " "); got != "cart checkout ship" {
			t.Fatalf("+%s (reads failing): the recommender keeps %q", d, got)
		}
	}
}
