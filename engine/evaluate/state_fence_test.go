package evaluate

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"governor.dev/governor/migrations"
)

// waitForStateLockWait returns once a session waits for a lock on the
// state table: the save the test holds back.
func waitForStateLockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var waiting bool
		err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'governor_engine_state' AND NOT l.granted)`).Scan(&waiting)
		require.NoError(t, err, "no save waited for the state table")
		if waiting {
			return
		}
	}
}

// TestSQLStateSaveHeldBackWhileALaterTickIsClaimedWritesNothing: leader a
// starts saving its cycle t1 and is held back (here by another session's
// lock on the state table; a GC pause or a suspended VM between a check
// and the writes did the same). Meanwhile b claims t2 and restores what it
// finds, a's cycle t0. When a goes on, its save is refused with
// ErrSuperseded naming b's tick, and the table is what b restored: nothing
// of a's t1 lands behind b's back, neither the events row b will replace
// nor the baseline it has not written yet.
func TestSQLStateSaveHeldBackWhileALaterTickIsClaimedWritesNothing(t *testing.T) {
	db := statePostgres(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(10*time.Second), t0.Add(20*time.Second)
	st := SQLState{DB: db}
	row := func(part, key string, at time.Time, leader string) StateRow {
		return StateRow{Part: part, Key: key, Format: stateFormat, At: at, Leader: leader, Data: []byte(leader)}
	}
	require.NoError(t, st.Save(ctx, []StateRow{row(StateEvents, "", t0, "a")}, time.Time{}))

	hold, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer hold.Rollback()
	_, err = hold.ExecContext(ctx, `LOCK TABLE governor_engine_state IN SHARE MODE`)
	require.NoError(t, err)
	saved := make(chan error, 1)
	go func() {
		saved <- st.Save(ctx, []StateRow{row(StateEvents, "", t1, "a"), row(StateBaseline, "svc", t1, "a")}, t0.Add(-time.Hour))
	}()
	waitForStateLockWait(t, db)
	_, err = db.ExecContext(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ($1, 'b')`, t2)
	require.NoError(t, err)
	restored, err := st.Load(ctx)
	require.NoError(t, err)
	require.Len(t, restored, 1)
	require.NoError(t, hold.Rollback())

	err = <-saved
	require.ErrorIs(t, err, ErrSuperseded)
	require.ErrorContains(t, err, "older than tick "+t2.Format(time.RFC3339Nano)+" claimed by b")
	rows, err := st.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, restored, rows, "nothing of a's cycle t1 lands after b claimed t2 and restored")
}

// TestStateStoresSaveTheNewestRowOfEachKeyAndPrune: every StateStore
// leaves the same rows after a Save, whatever the order of the rows it is
// given: a row never replaces a newer one of its part and key (in the
// table or in the same Save, where the last of equals wins), and the prune
// deletes the rows older than its bound, the ones just saved included,
// but not a row a newer one replaced. No tick is claimed here.
func TestStateStoresSaveTheNewestRowOfEachKeyAndPrune(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(10*time.Second), t0.Add(20*time.Second)
	row := func(part, key string, at time.Time, data string) StateRow {
		return StateRow{Part: part, Key: key, Format: stateFormat, At: at, Leader: "r", Data: []byte(data)}
	}
	tests := []struct {
		name        string
		before, out []StateRow
		save        []StateRow
		prune       time.Time
	}{
		{name: "an older row never replaces a newer one",
			before: []StateRow{row(StateBaseline, "x", t2, "b")},
			save:   []StateRow{row(StateBaseline, "x", t1, "a"), row(StateBaseline, "y", t1, "a")},
			out:    []StateRow{row(StateBaseline, "x", t2, "b"), row(StateBaseline, "y", t1, "a")}},
		{name: "the newest row of a key in one save wins, the last of equals",
			before: []StateRow{row(StateEvents, "", t0, "old")},
			save: []StateRow{row(StateEvents, "", t1, "p"), row(StateEvents, "", t2, "q"), row(StateEvents, "", t2, "r"),
				row(StateEvents, "", t1, "s")},
			out: []StateRow{row(StateEvents, "", t2, "r")}},
		{name: "the prune deletes older rows, not those a newer one replaced",
			before: []StateRow{row(StateBaseline, "x", t0, "old"), row(StateBaseline, "y", t0, "old"), row(StateBaseline, "z", t2, "new")},
			save:   []StateRow{row(StateBaseline, "x", t2, "new")},
			prune:  t1,
			out:    []StateRow{row(StateBaseline, "x", t2, "new"), row(StateBaseline, "z", t2, "new")}},
		{name: "a row saved older than the prune bound is pruned",
			before: []StateRow{row(StateBaseline, "x", t0, "old")},
			save:   []StateRow{row(StateBaseline, "x", t0.Add(time.Second), "newer"), row(StateBaseline, "y", t0, "new"), row(StateEvents, "", t2, "e")},
			prune:  t1,
			out:    []StateRow{row(StateEvents, "", t2, "e")}},
		{name: "a prune alone",
			before: []StateRow{row(StateBaseline, "x", t0, "old"), row(StateBaseline, "y", t2, "new")},
			prune:  t1,
			out:    []StateRow{row(StateBaseline, "y", t2, "new")}},
	}
	stores := []struct {
		name string
		new  func() StateStore
	}{
		{"memory", func() StateStore { return &MemState{} }},
		{"sqlite", func() StateStore { return SQLState{DB: stateSQLite(t), Dialect: migrations.SQLite} }},
		{"postgres", func() StateStore { return SQLState{DB: statePostgres(t)} }},
	}
	ctx := context.Background()
	for _, s := range stores {
		for _, tt := range tests {
			t.Run(s.name+"/"+tt.name, func(t *testing.T) {
				st := s.new()
				require.NoError(t, st.Save(ctx, tt.before, time.Time{}))
				require.NoError(t, st.Save(ctx, tt.save, tt.prune))
				rows, err := st.Load(ctx)
				require.NoError(t, err)
				require.Equal(t, stateRowStrings(tt.out), stateRowStrings(rows))
			})
		}
	}
}

func stateRowStrings(rows []StateRow) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s/%s %s %s %q", r.Part, r.Key, r.At.UTC().Format(time.RFC3339Nano), r.Leader, r.Data))
	}
	sort.Strings(out)
	return out
}
