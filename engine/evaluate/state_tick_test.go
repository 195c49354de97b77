package evaluate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/thresholds"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning/sqlite"
)

// tickSource answers the breaker query with none open and the downstream
// latency query with p99 for checkout's calls to payments.
type tickSource struct {
	signals.Source
	p99 *float64
}

func (s tickSource) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	if q == breakerQuery {
		return &signals.Result{Type: signals.TypeVector}, nil
	}
	return downstreamSource{p99: s.p99}.Query(ctx, q, at)
}

// TestStateFailoverTick runs whole cycles (Tick) over ten services read
// from the metrics store, five of them above a fixed p99 warn level. Leader
// A runs 320 cycles (a millisecond apart: the readings stay those of the
// store's last samples) and saves its state after each; B takes over with the
// state in SQLite: its first cycle reports no crossing again (C, without
// the state, re-raises all five) and its downstream detector is warm, so
// a rise of the dependency's p99 is a guardrail incident at once.
func TestStateFailoverTick(t *testing.T) {
	ctx := context.Background()
	mdb, err := embedded.Open(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mdb.Close()
	fillStore(t, mdb, 10, 1)
	reader, err := signals.NewReader(mdb, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	store := SQLState{DB: stateSQLite(t), Dialect: migrations.SQLite}
	at := benchT0.Add(5 * time.Minute)
	snap, err := reader.Read(ctx, at, signals.PerService)
	if err != nil {
		t.Fatal(err)
	}
	var all []float64
	for _, en := range snap.Entries {
		if v, ok := en.Get(signals.LatencyP99).Get(); ok {
			all = append(all, v)
		}
	}
	slices.Sort(all)
	if len(all) != 10 {
		t.Fatalf("%d p99 readings, want 10", len(all))
	}
	type replica struct {
		e   *Evaluator
		rec *events.Recorder
		st  *State
		p99 *float64
	}
	newReplica := func(name string) replica {
		r := replica{rec: events.NewRecorder(10000), p99: new(float64)}
		r.e = newEmergencyEval(t, reader, st, nil, nil, r.rec)
		l := DefaultAlertLevels()
		l.LatencyWarn = time.Duration((all[4] + all[5]) / 2 * float64(time.Second))
		l.LatencyCritical = time.Duration(all[9] * 2 * float64(time.Second))
		l.Refresh = 2 * time.Minute
		r.e.o.Levels = l
		r.e.o.Breakers = tickSource{p99: r.p99}
		g, err := guardrail.New(guardrail.Options{Store: st, Series: guardrail.SignalSeries{}})
		if err != nil {
			t.Fatal(err)
		}
		r.e.o.Guard = g
		if r.st, err = NewState(r.e, StateOptions{Store: store, Leader: name, Every: 10}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	crossed := func(r replica) map[string]int {
		out := map[string]int{}
		for _, ev := range r.rec.Events(events.LevelCrossed) {
			out[ev.Service]++
		}
		return out
	}
	a := newReplica("a")
	cycles := thresholds.DefaultOptions().Warmup + 20
	for i := range cycles {
		*a.p99 = 0.1 + 0.004*float64((i*7)%5)
		if _, err := a.e.Tick(ctx, at.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.st.Save(ctx, at.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	raised := crossed(a)
	if len(raised) != 5 {
		t.Fatalf("A raised %v, want five services", raised)
	}
	next := at.Add(time.Duration(cycles) * time.Millisecond)
	b, c := newReplica("b"), newReplica("c")
	if _, err := b.st.Restore(ctx, next); err != nil {
		t.Fatal(err)
	}
	*b.p99, *c.p99 = 0.17, 0.17
	if _, err := b.e.Tick(ctx, next); err != nil {
		t.Fatal(err)
	}
	if _, err := c.e.Tick(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := crossed(b); len(got) != 0 {
		t.Fatalf("B re-raised %v at its first cycle", got)
	}
	if got := crossed(c); !maps.Equal(got, raised) {
		t.Fatalf("C (no state) raised %v, want A's %v again", got, raised)
	}
	incidents := func(r replica) []string {
		var out []string
		for _, in := range r.e.o.Guard.Incidents("checkout") {
			out = append(out, fmt.Sprint(in.Kind))
		}
		return out
	}
	if got := incidents(b); !slices.Equal(got, []string{LatencyAnomaly}) {
		t.Fatalf("B's incidents for checkout at a 1.6x dependency rise: %v, want a latency anomaly", got)
	}
	if got := incidents(c); len(got) != 0 {
		t.Fatalf("C's incidents: %v, want none (its detector is cold)", got)
	}
}
