package evaluate

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func TestEmergencyFailoverSQLite(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(benchT0)
	path := filepath.Join(t.TempDir(), "governor.db")
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(ctx, db, migrations.SQLite); err != nil {
		t.Fatal(err)
	}
	testEmergencyFailover(t, clk, st, db)
}

func TestEmergencyFailoverPostgres(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	clk := clock.NewFake(benchT0)
	st, err := postgres.Open(ctx, postgres.Options{URL: url, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(ctx, db, migrations.Postgres); err != nil {
		t.Fatal(err)
	}
	testEmergencyFailover(t, clk, st, db)
}

// testEmergencyFailover: two engines share the watermark. The first
// reports an emergency publication while it leads; publications made while
// no engine leads (one of them superseded before anyone looked) are
// reported by the next leader, exactly once, though the old leader comes
// back and both evaluate side by side.
func testEmergencyFailover(t *testing.T, clk *clock.Fake, st versioning.Store, db *sql.DB) {
	ctx := context.Background()
	mdb := embeddedStore(t)
	reader, err := signals.NewReader(mdb, signals.ReaderOptions{MaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	alice := versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob := versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
	root := versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}
	rs := func(svc string, rate float64) *rules.Ruleset {
		return &rules.Ruleset{Service: svc, Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
			RateLimit: &rules.RateLimit{Rate: rate}}}}
	}
	publish := func(svc string, rate float64) {
		t.Helper()
		p, err := st.Propose(ctx, versioning.Proposal{Ruleset: rs(svc, rate), Author: alice, Reason: "change", Rebase: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Approve(ctx, svc, p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	emergency := func(svc string, rate float64) {
		t.Helper()
		if _, err := st.EmergencyPublish(ctx, versioning.Proposal{Ruleset: rs(svc, rate), Author: root, Reason: "stop the bleeding", Rebase: true}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var reported []string // "engine: service vN", in order
	sink := func(name string) events.Sink {
		return sinkFunc(func(e events.Event) {
			if e.Kind == events.EmergencyPublish {
				mu.Lock()
				reported = append(reported, fmt.Sprintf("%s: %s v%d", name, e.Service, e.Version))
				mu.Unlock()
			}
		})
	}
	newEngine := func(name string) *Evaluator {
		return newEmergencyEval(t, reader, st, nil, SQLWatermark{DB: db, Name: EmergencyMark, Leader: name}, sink(name))
	}
	tick := func(e *Evaluator) {
		t.Helper()
		if _, err := e.Tick(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, w ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(reported, w) {
			t.Fatalf("%s: reported %q, want %q", step, reported, w)
		}
	}

	publish("a", 100)
	emergency("old", 5) // history before any engine ran
	clk.Advance(time.Minute)
	one := newEngine("one")
	tick(one)
	want("history before the first start")
	// The mark moves to the audit log's head, past entries of other
	// actions, so a scan never starts further back than the last cycle.
	head, err := st.Audit(ctx, versioning.AuditFilter{Newest: true, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if seq, set, err := (SQLWatermark{DB: db, Name: EmergencyMark}).Load(ctx); err != nil || !set || seq != head[0].Seq {
		t.Fatalf("mark %d (set %v, %v), want the audit head %d", seq, set, err, head[0].Seq)
	}
	emergency("a", 50)
	clk.Advance(10 * time.Second)
	tick(one)
	tick(one)
	want("while leading", "one: a v2")

	// The leader dies; nobody leads for a while.
	clk.Advance(10 * time.Second)
	emergency("b", 10)
	emergency("c", 20)
	publish("c", 30) // superseded before any engine looked
	clk.Advance(time.Minute)
	two := newEngine("two")
	tick(two)
	want("new leader", "one: a v2", "two: b v1", "two: c v1")
	tick(one) // the old leader comes back, or never noticed it lost
	tick(two)
	want("old leader back", "one: a v2", "two: b v1", "two: c v1")

	// Both evaluate at once: each publication is reported at least once;
	// both may report it (they share the mark, not the emit), under the
	// same key (see TestEmergencyAtLeastOnce), and nothing is reported
	// again once the mark moved past it.
	emergency("d", 1)
	emergency("e", 1)
	clk.Advance(10 * time.Second)
	var wg sync.WaitGroup
	for _, e := range []*Evaluator{one, two} {
		wg.Go(func() {
			for range 3 {
				if _, err := e.Tick(ctx, clk.Now()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	tail := reported[3:]
	mu.Unlock()
	var services []string
	for _, r := range tail {
		services = append(services, r[len(r)-4:])
	}
	slices.Sort(services)
	if services = slices.Compact(services); !slices.Equal(services, []string{"d v1", "e v1"}) || len(tail) > 4 {
		t.Fatalf("side by side: reported %q, want d v1 and e v1, at most twice each", tail)
	}
	// A restarted engine with the shared mark reports none of them again.
	mu.Lock()
	before := len(reported)
	mu.Unlock()
	three := newEngine("three")
	tick(three)
	mu.Lock()
	n := len(reported)
	mu.Unlock()
	if n != before {
		t.Fatalf("after a restart: %q", reported)
	}
}

type sinkFunc func(events.Event)

func (f sinkFunc) Emit(_ context.Context, e events.Event) { f(e) }

// TestSQLWatermarkCompareAndSet: the mark moves only from the value the
// mover read.
func TestSQLWatermarkCompareAndSet(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "w.db"), sqlitedb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(ctx, db, migrations.SQLite); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string][2]Watermark{
		"sql": {SQLWatermark{DB: db, Name: "x", Leader: "a"}, SQLWatermark{DB: db, Name: "x", Leader: "b"}},
		"mem": func() [2]Watermark { m := &MemWatermark{}; return [2]Watermark{m, m} }(),
	} {
		t.Run(name, func(t *testing.T) {
			a, b := w[0], w[1]
			if _, set, err := a.Load(ctx); err != nil || set {
				t.Fatalf("fresh mark: set %v, %v", set, err)
			}
			steps := []struct {
				w        Watermark
				set      bool
				from, to int64
				ok       bool
			}{
				{a, false, 0, 3, true},
				{b, false, 0, 4, false}, // already set
				{b, true, 0, 4, false},  // stale read
				{b, true, 3, 7, true},
				{a, true, 3, 5, false}, // lost the race
			}
			for i, s := range steps {
				ok, err := s.w.Advance(ctx, s.set, s.from, s.to)
				if err != nil || ok != s.ok {
					t.Fatalf("step %d: %v %v, want %v", i, ok, err, s.ok)
				}
			}
			if seq, set, err := a.Load(ctx); err != nil || !set || seq != 7 {
				t.Fatalf("mark %d %v %v, want 7", seq, set, err)
			}
		})
	}
}
