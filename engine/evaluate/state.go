package evaluate

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
)

// The parts of the engine's persisted state (StateRow.Part).
const (
	// StateEvents is one row (key ""): the alert levels crossed, the open
	// breakers and the instances in a bad ledger state, written every
	// cycle it changed.
	StateEvents = "events"
	// StateBaseline is one row per service: its healthy baseline
	// (engine/thresholds, through engine/recommend), learned p99 and
	// error-ratio levels included; empty data: the service was forgotten
	// at the row's cycle (Options.ForgetAfter).
	StateBaseline = "baseline"
	// StateDownstream is one row per service and downstream ("svc/ds"): the
	// downstream p99 baseline and anomaly detector of the guardrail
	// incidents; empty data: forgotten at the row's cycle.
	StateDownstream = "downstream"
	// StateScores is one row (key ""): the load-score tracker's smoothing
	// and hysteresis state of every service (loadscore.Tracker
	// MarshalBinary), written every cycle it changed.
	StateScores = "scores"
	// StateControl is one row (key ""): every service's ceiling controller
	// (engine/pid) with the version it tracks and its count of consecutive
	// known scores (recommend.Recommender.SaveControllers), written every
	// cycle it changed.
	StateControl = "control"
)

// StateRow is one persisted piece of engine state.
type StateRow struct {
	Part, Key string
	// Format is the encoding's version; rows of another are ignored.
	Format int
	// At is the cycle that wrote it; Leader the replica.
	At     time.Time
	Leader string
	Data   []byte
}

// StateStore keeps the engine's state rows, shared by the replicas.
type StateStore interface {
	// Save upserts rows (a row never replaces a newer one of the same
	// part and key, in the store or in rows, where the last of equals
	// wins) and, unless prune is zero, deletes rows older than prune (of
	// rows too), all or nothing.
	Save(ctx context.Context, rows []StateRow, prune time.Time) error
	// Load returns every row.
	Load(ctx context.Context) ([]StateRow, error)
}

// ErrSuperseded is returned by SQLState.Save for the rows of a cycle older
// than a tick claimed since: the replica that ran it lost the lead during
// the cycle, and its successor's state must not be mixed with it.
var ErrSuperseded = errors.New("evaluate: state superseded: a later cycle was claimed")

// SQLState keeps the rows in the governor_engine_state table (migration
// 00402) of the rules database, PostgreSQL or SQLite.
//
// The cycle time of the rows is their fencing token: Save refuses (with
// ErrSuperseded, naming the newer tick and the replica that claimed it)
// rows older than the newest tick claimed in governor_engine_ticks
// (engine/leader, which only claims ticks later than every one claimed
// before). On PostgreSQL the check is part of the one statement that
// writes the rows and prunes, committed on its own, as SQLWatermark's
// moves are. A check in a statement of its own before the writes would not
// hold: under READ COMMITTED each statement reads in its own snapshot, so
// a tick claimed between the check and the commit goes unseen, and a
// leader paused there (a GC pause, a suspended VM) lands its rows after
// its successor claimed and restored. In the one statement the ticks are
// read in the snapshot the rows are written with, which PostgreSQL takes
// once the statement holds its table locks: no pause of the saver falls
// between the check, the writes and their commit, and a save held back
// before it runs sees the ticks claimed meanwhile. A leader that lost the
// lead mid-cycle so writes nothing that its successor, which restores
// after claiming, did not see. What remains is a claim committed while the
// statement already runs on the server, waits for rows included (for a
// row the successor's own save holds, whose newer version the statement
// then keeps). The claims take no lock the saves hold, so a frozen old
// leader never holds up its successor's claims.
//
// A row never replaces a newer one of the same part and key (the upsert
// compares at_ns under the row's lock). That alone keeps every row the
// successor has written, but not the ones it has not written yet (the
// baselines and detectors of later slots): without the fence those would
// land behind its back, unknown to the state it runs on.
//
// The one-node SQLite mode claims no ticks in the table and is never
// refused; it saves in a transaction (SQLite runs one writer at a time).
// Dialect says which: the zero value is PostgreSQL.
type SQLState struct {
	DB      *sql.DB
	Dialect migrations.Dialect // migrations.SQLite, or PostgreSQL when empty
}

var _ StateStore = SQLState{}

// stateSave is SQLState.Save on PostgreSQL: $1 the fence (the cycle), $2
// to $7 the rows as arrays (one key once), $8 the prune bound (NULL: no
// prune). It returns the newest tick later than the fence and who claimed
// it, and then writes nothing; no row: saved. The prune leaves the rows
// being saved alone, which the upsert makes no older than the bound.
const stateSave = `WITH newer AS (` + versioning.NewerTickQuery + `),
	saved AS (
		INSERT INTO governor_engine_state (part, key, format, at_ns, leader, data)
		SELECT * FROM unnest($2::text[], $3::text[], $4::integer[], $5::bigint[], $6::text[], $7::bytea[])
		WHERE NOT EXISTS (SELECT 1 FROM newer)
		ON CONFLICT (part, key) DO UPDATE SET format = excluded.format, at_ns = excluded.at_ns, leader = excluded.leader, data = excluded.data
		WHERE governor_engine_state.at_ns <= excluded.at_ns),
	pruned AS (
		DELETE FROM governor_engine_state s WHERE s.at_ns < $8::bigint AND NOT EXISTS (SELECT 1 FROM newer)
			AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) AS w(part, key) WHERE w.part = s.part AND w.key = s.key))
	SELECT tick, leader FROM newer`

// Save implements StateStore.
func (s SQLState) Save(ctx context.Context, rows []StateRow, prune time.Time) error {
	if s.Dialect == migrations.SQLite {
		return s.saveTx(ctx, rows, prune)
	}
	if len(rows) == 0 {
		if prune.IsZero() {
			return nil
		}
		if _, err := s.DB.ExecContext(ctx, `DELETE FROM governor_engine_state WHERE at_ns < $1`, prune.UnixNano()); err != nil {
			return fmt.Errorf("evaluate: prune state: %w", err)
		}
		return nil
	}
	cycle := newest(rows)
	// One row a key, as the upserts one after another would leave it: the
	// newest, the last of equals; none older than the prune bound, which
	// would delete it.
	last := map[[2]string]int{}
	for i, r := range rows {
		k := [2]string{r.Part, r.Key}
		if j, ok := last[k]; (!ok || !rows[j].At.After(r.At)) && (prune.IsZero() || !r.At.Before(prune)) {
			last[k] = i
		}
	}
	n := len(last)
	part, key, leader := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	format, atNs, data := make([]int32, 0, n), make([]int64, 0, n), make([][]byte, 0, n)
	for i, r := range rows {
		if j, ok := last[[2]string{r.Part, r.Key}]; !ok || j != i {
			continue
		}
		part, key, format = append(part, r.Part), append(key, r.Key), append(format, int32(r.Format))
		atNs, leader, data = append(atNs, r.At.UnixNano()), append(leader, r.Leader), append(data, r.Data)
	}
	var bound any
	if !prune.IsZero() {
		bound = prune.UnixNano()
	}
	var newer time.Time
	var by string
	err := s.DB.QueryRowContext(ctx, stateSave, cycle.UTC(), part, key, format, atNs, leader, data, bound).Scan(&newer, &by)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("evaluate: save state: %w", err)
	}
	return fmt.Errorf("%w: cycle %s is older than tick %s claimed by %s", ErrSuperseded,
		cycle.UTC().Format(time.RFC3339Nano), newer.UTC().Format(time.RFC3339Nano), by)
}

// newest returns the latest At of rows.
func newest(rows []StateRow) time.Time {
	var cycle time.Time
	for _, r := range rows {
		if r.At.After(cycle) {
			cycle = r.At
		}
	}
	return cycle
}

// saveTx is SQLState.Save on SQLite, in one transaction.
func (s SQLState) saveTx(ctx context.Context, rows []StateRow, prune time.Time) (err error) {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evaluate: save state: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if len(rows) > 0 {
		cycle := newest(rows)
		var later bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM governor_engine_ticks WHERE tick > $1)`, cycle.UTC()).Scan(&later); err != nil {
			return fmt.Errorf("evaluate: save state: %w", err)
		}
		if later {
			return fmt.Errorf("%w (cycle %s)", ErrSuperseded, cycle.UTC().Format(time.RFC3339Nano))
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO governor_engine_state (part, key, format, at_ns, leader, data)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (part, key) DO UPDATE SET format = excluded.format, at_ns = excluded.at_ns, leader = excluded.leader, data = excluded.data
			WHERE governor_engine_state.at_ns <= excluded.at_ns`)
		if err != nil {
			return fmt.Errorf("evaluate: save state: %w", err)
		}
		defer stmt.Close()
		for _, r := range rows {
			if _, err := stmt.ExecContext(ctx, r.Part, r.Key, r.Format, r.At.UnixNano(), r.Leader, r.Data); err != nil {
				return fmt.Errorf("evaluate: save state %s %q: %w", r.Part, r.Key, err)
			}
		}
	}
	if !prune.IsZero() {
		if _, err := tx.ExecContext(ctx, `DELETE FROM governor_engine_state WHERE at_ns < $1`, prune.UnixNano()); err != nil {
			return fmt.Errorf("evaluate: prune state: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evaluate: save state: %w", err)
	}
	return nil
}

// Load implements StateStore.
func (s SQLState) Load(ctx context.Context) ([]StateRow, error) {
	rs, err := s.DB.QueryContext(ctx, `SELECT part, key, format, at_ns, leader, data FROM governor_engine_state`)
	if err != nil {
		return nil, fmt.Errorf("evaluate: load state: %w", err)
	}
	defer rs.Close()
	var out []StateRow
	for rs.Next() {
		var r StateRow
		var ns int64
		if err := rs.Scan(&r.Part, &r.Key, &r.Format, &ns, &r.Leader, &r.Data); err != nil {
			return nil, fmt.Errorf("evaluate: load state: %w", err)
		}
		r.At = time.Unix(0, ns).UTC()
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("evaluate: load state: %w", err)
	}
	return out, nil
}

// MemState keeps the rows in memory (tests, one process).
type MemState struct {
	mu   sync.Mutex
	rows map[[2]string]StateRow
}

// Save implements StateStore.
func (m *MemState) Save(_ context.Context, rows []StateRow, prune time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rows == nil {
		m.rows = map[[2]string]StateRow{}
	}
	for _, r := range rows {
		k := [2]string{r.Part, r.Key}
		if old, ok := m.rows[k]; !ok || !old.At.After(r.At) {
			r.Data = slices.Clone(r.Data)
			m.rows[k] = r
		}
	}
	if !prune.IsZero() {
		maps.DeleteFunc(m.rows, func(_ [2]string, r StateRow) bool { return r.At.Before(prune) })
	}
	return nil
}

// Load implements StateStore.
func (m *MemState) Load(context.Context) ([]StateRow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.rows)), nil
}

// StateOptions configure a State.
type StateOptions struct {
	// Store is required.
	Store StateStore
	// Leader names this replica in the rows it writes.
	Leader string
	// Every spreads the baselines and downstream detectors over Every
	// cycles: each cycle writes the rows of about 1/Every of them, so
	// each row is at most Every cycles old and a cycle's write stays
	// small. The events, scores and control rows are written every cycle
	// they changed (and every Every cycles). Default 30.
	Every int
	// MaxAge: rows older than this at a restore are ignored (and pruned
	// when saving). At least 1m, and it must exceed Every cycles. Default
	// 1h.
	MaxAge time.Duration
	Logger *slog.Logger
}

// DefaultStateOptions returns Every 30, MaxAge 1h.
func DefaultStateOptions() StateOptions { return StateOptions{Every: 30, MaxAge: time.Hour} }

// State persists what an Evaluator learned and reported so that another
// replica taking over the lead (or this one restarted) continues where it
// stopped rather than from nothing: the alert levels crossed, breakers
// open and instances in a bad state (no second level_crossed,
// breaker_open or instance_stale for what was already reported, and the
// level_cleared of an alert the old leader raised comes at the first cycle
// the reading is back below); every service's healthy baseline (its
// learned p99 and error-ratio levels known at once, not after another
// MinSamples intervals); every downstream's p99 baseline and anomaly
// detector (LatencyAnomaly incidents from the first cycle, not after a
// 300-cycle warm-up); every service's load-score smoothing and hysteresis
// (the smoothed score and which side of the hysteresis it is on) and its
// ceiling controller (the PID's integral, filtered derivative and last
// step, the version it tracks, the count of consecutive known scores).
//
// The scores and controllers are small (about 230 bytes a service) and
// saved whole every cycle: a replica that restores the last cycle's rows
// computes exactly the score and recommendation the old leader would have
// at the next cycle (same smoothed value, same PID terms and ceiling),
// rather than restarting the smoothing, forgetting an overload and
// restarting each controller "bumpless" from the ceiling in force with no
// integral and MinScores cycles without a recommendation. The evidence of
// that recommendation (the healthy baseline's counts) is as exact as the
// baseline row, at most Every cycles old.
//
// Why snapshots rather than replaying history at takeover: the baselines
// learn from a day of intervals or more (MinSamples, sketches with a week's
// half-life) and the detectors from 300 cycles and weekly profiles;
// replaying that from the metrics store would read thousands of cycles of
// every service at each takeover, needs retention the store may not have,
// and would not reproduce the events already reported. A snapshot costs a
// bounded write per cycle (Every) and restores exactly: a restored
// detector scores every later sample as the old leader's would have. The
// price is at most Every cycles of samples the restored baselines did not
// learn from, which their half-lives of hundreds of cycles absorb. Rows
// older than MaxAge are not restored at all: a controller or smoothed
// score from an hour ago says less than a fresh start.
//
// Cost, for 1,000 services each with a baseline and a downstream detector
// whose daily and weekly profiles are full (about 7.6 KB a row, 15 MB in
// all), a load score and a ceiling controller, on this loaded 2-vCPU
// machine (go test -run XXX -bench BenchmarkState -benchmem -cpu 1,2
// ./engine/evaluate): Every 30 writes about 69 rows and 0.74 MB per cycle
// (0.51 MB before the scores and controllers: they add 2 rows and 231 KB,
// encoded in 1.1-1.3 ms, BenchmarkStateControl) in 12-29 ms to SQLite,
// 30-58 ms to PostgreSQL (2.9-4.8 MB allocated); the time the two rows add
// is within the noise of runs side by side at a load average of 8-9 (the
// same runs without them: 12-30 ms and 34-160 ms). Every 1 writes the
// whole state, 0.2-0.5 s to SQLite and 0.7-2 s to PostgreSQL per cycle.
// Since SQLState saves to PostgreSQL in one fenced statement (rows sent as
// arrays), runs side by side with the transaction of one statement a row
// before it took 27 ms against 40 ms (7.0 MB allocated against 4.8 MB)
// at Every 30, 0.58 s against 0.72 s at Every 1.
// A takeover restores all of it in 0.2-0.8 s (BenchmarkStateRestore; 170
// MB allocated once, 169 MB without the scores and controllers, mostly
// the restored sketches and profiles themselves).
//
// Save and Restore must run on the goroutine that runs the Evaluator's
// Tick (between ticks).
type State struct {
	e      *Evaluator
	o      StateOptions
	cycle  uint64
	last   []byte // the events row last written
	scores []byte // the scores row last written
	ctl    []byte // the control row last written
	spare  []byte // a buffer for the next control row
	// saved are the keys of the baseline and downstream rows this replica
	// wrote or restored, by part: one whose service or downstream the
	// evaluator no longer keeps gets a forgotten row at the next Save.
	saved map[string]map[string]bool
}

// A forgotten row (empty Data) of a baseline or downstream says that the
// engine forgot the service or downstream at the row's cycle (see
// Options.ForgetAfter): it replaces the row of what was forgotten, a
// replica restoring it forgets it too, and it is pruned after MaxAge like
// any row. An engine that predates it ignores it as undecodable.
var forgottenRow = []byte{}

// NewState checks the options.
func NewState(e *Evaluator, o StateOptions) (*State, error) {
	d := DefaultStateOptions()
	if o.Every == 0 {
		o.Every = d.Every
	}
	if o.MaxAge == 0 {
		o.MaxAge = d.MaxAge
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case e == nil:
		return nil, fmt.Errorf("%w: State: an Evaluator is required", ErrInvalidOption)
	case o.Store == nil:
		return nil, fmt.Errorf("%w: StateOptions.Store is required", ErrInvalidOption)
	case o.Every < 1 || o.Every > 10000:
		return nil, fmt.Errorf("%w: StateOptions.Every %d: want 1..10000 cycles", ErrInvalidOption, o.Every)
	case o.MaxAge < time.Minute:
		// As the configuration (state.max_age) bounds it: shorter, every
		// row is older than it at a takeover, and the state is pruned
		// before anyone restores it.
		return nil, fmt.Errorf("%w: StateOptions.MaxAge %s: want at least 1m (0: 1h)", ErrInvalidOption, o.MaxAge)
	}
	return &State{e: e, o: o}, nil
}

// SaveStats is what one Save wrote.
type SaveStats struct {
	Rows, Bytes int
}

// slot is the cycle (modulo Every) that writes a key's row.
func (s *State) slot(key string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return uint64(h.Sum32()) % uint64(s.o.Every)
}

// Save writes the cycle at's share of the state: the events, scores and
// control rows if they changed since the last Save, the baselines and
// downstream detectors whose slot is this cycle's, and a forgotten row for
// every service or downstream whose row this replica wrote or restored
// and that the Evaluator has since forgotten.
func (s *State) Save(ctx context.Context, at time.Time) (SaveStats, error) {
	c := s.cycle % uint64(s.o.Every)
	s.cycle++
	row := func(part, key string, data []byte) StateRow {
		return StateRow{Part: part, Key: key, Format: stateFormat, At: at, Leader: s.o.Leader, Data: data}
	}
	var rows []StateRow
	ev := encodeEvents(s.e.eventState())
	if string(ev) != string(s.last) || c == 0 {
		rows = append(rows, row(StateEvents, "", ev))
	}
	sc, err := s.e.o.Tracker.MarshalBinary()
	if err != nil {
		return SaveStats{}, fmt.Errorf("evaluate: save state: %w", err)
	}
	if string(sc) != string(s.scores) || c == 0 {
		rows = append(rows, row(StateScores, "", sc))
	}
	ctl, err := s.e.o.Recommender.SaveControllers(s.spare[:0])
	if err != nil {
		return SaveStats{}, fmt.Errorf("evaluate: save state: %w", err)
	}
	if string(ctl) != string(s.ctl) || c == 0 {
		rows = append(rows, row(StateControl, "", ctl))
	}
	known := make(map[string]bool, len(s.saved[StateBaseline]))
	if err := s.e.o.Recommender.SaveBaselines(func(svc string) bool { known[svc] = true; return s.slot(svc) == c },
		func(svc string, b []byte) { rows = append(rows, row(StateBaseline, svc, b)) }); err != nil {
		return SaveStats{}, fmt.Errorf("evaluate: save state: %w", err)
	}
	// What the evaluator forgot since its rows were written.
	for _, svc := range slices.Sorted(maps.Keys(s.saved[StateBaseline])) {
		if !known[svc] {
			rows = append(rows, row(StateBaseline, svc, forgottenRow))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(s.saved[StateDownstream])) {
		if _, ok := s.e.latency[key]; !ok {
			rows = append(rows, row(StateDownstream, key, forgottenRow))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(s.e.latency)) {
		if s.slot(key) != c {
			continue
		}
		b, err := encodeDownstream(s.e.latency[key])
		if err != nil {
			return SaveStats{}, fmt.Errorf("evaluate: save state %s: %w", key, err)
		}
		rows = append(rows, row(StateDownstream, key, b))
	}
	var prune time.Time
	if c == 0 {
		prune = at.Add(-s.o.MaxAge)
	}
	st := SaveStats{Rows: len(rows)}
	for _, r := range rows {
		st.Bytes += len(r.Data)
	}
	if err := s.o.Store.Save(ctx, rows, prune); err != nil {
		s.spare = ctl[:0]
		return st, err
	}
	s.last, s.scores = ev, sc
	s.ctl, s.spare = ctl, s.ctl[:0]
	for _, r := range rows {
		s.note(r.Part, r.Key, len(r.Data) > 0)
	}
	return st, nil
}

// note records whether the store holds a row of part and key (baselines
// and downstreams only) that is not a forgotten row.
func (s *State) note(part, key string, held bool) {
	if part != StateBaseline && part != StateDownstream {
		return
	}
	if s.saved == nil {
		s.saved = map[string]map[string]bool{}
	}
	if s.saved[part] == nil {
		s.saved[part] = map[string]bool{}
	}
	if held {
		s.saved[part][key] = true
	} else {
		delete(s.saved[part], key)
	}
}

// RestoreStats is what one Restore did.
type RestoreStats struct {
	// Restored counts the rows restored by part.
	Restored map[string]int
	// Ignored counts the rows left out, by reason: "older than max_age",
	// "format N" (another version), "not newer than this replica's
	// state", or a decoding error.
	Ignored map[string]int
	// Newest is the newest row restored and Leader the replica that wrote it.
	Newest time.Time
	Leader string
}

// Restore reads the persisted state at time at and takes every row newer
// than the Evaluator's last cycle (all of them in a new process) and not
// older than MaxAge. A row that cannot be restored (another format,
// corrupt, saved under other options) is ignored with a logged reason; the
// Evaluator keeps what it had for it.
func (s *State) Restore(ctx context.Context, at time.Time) (RestoreStats, error) {
	st := RestoreStats{Restored: map[string]int{}, Ignored: map[string]int{}}
	rows, err := s.o.Store.Load(ctx)
	if err != nil {
		return st, err
	}
	mine := s.e.LastTick()
	oldest := at.Add(-s.o.MaxAge)
	const notNewer = "not newer than this replica's state"
	ignore := func(r StateRow, why string) {
		if st.Ignored[why] == 0 {
			lvl, msg := slog.LevelWarn, "engine state ignored"
			switch {
			case why == notNewer: // this replica led last: nothing lost
				lvl = slog.LevelDebug
			case r.Part == StateBaseline || r.Part == StateDownstream:
				// A baseline this release cannot read (one saved by a
				// newer release, after a rollback, say) costs only the
				// time to learn it again.
				msg = "engine baseline not restored: relearning it from live traffic (recommendations for it wait until it is learnt again)"
			}
			s.o.Logger.Log(ctx, lvl, msg, "part", r.Part, "key", r.Key, "at", r.At, "leader", r.Leader, "reason", why)
		}
		st.Ignored[why]++
	}
	// Oldest first; of rows written at the same cycle, the baselines before
	// the controllers, so a service's state is made once, with its
	// restored baseline, not first with a fresh one the baseline replaces.
	late := func(r StateRow) int {
		if r.Part == StateControl {
			return 1
		}
		return 0
	}
	slices.SortFunc(rows, func(a, b StateRow) int { return cmp.Or(a.At.Compare(b.At), late(a)-late(b)) })
	for _, r := range rows {
		switch {
		case r.Format != stateFormat:
			ignore(r, fmt.Sprintf("format %d, this engine reads %d", r.Format, stateFormat))
			continue
		case r.At.Before(oldest):
			ignore(r, fmt.Sprintf("older than max_age %s", s.o.MaxAge))
			continue
		case !r.At.After(mine):
			ignore(r, notNewer)
			continue
		}
		var err error
		if len(r.Data) == 0 && (r.Part == StateBaseline || r.Part == StateDownstream) {
			// Forgotten by the leader that wrote it.
			s.e.forgotten(r.Part, r.Key)
			s.note(r.Part, r.Key, false)
			st.Restored[r.Part]++
			continue
		}
		switch r.Part {
		case StateEvents:
			var ev eventState
			if ev, err = decodeEvents(r.Data); err == nil {
				s.e.setEventState(ev)
				s.last = nil
			}
		case StateBaseline:
			if err = s.e.o.Recommender.RestoreBaseline(r.Key, r.Data); err == nil && r.At.After(s.e.seen[r.Key]) {
				// The old leader still kept the service: it counts as seen
				// at the row's cycle, so that Options.ForgetAfter forgets
				// it here too if it does not come back (at most twice
				// ForgetAfter after it left, as the old leader may have
				// kept it that long).
				if s.e.seen == nil {
					s.e.seen = map[string]time.Time{}
				}
				s.e.seen[r.Key] = r.At
			}
			if err == nil {
				s.note(r.Part, r.Key, true)
			}
		case StateScores:
			if err = s.e.o.Tracker.UnmarshalBinary(r.Data); err == nil {
				s.scores = nil
			}
		case StateControl:
			if err = s.e.o.Recommender.RestoreControllers(r.Data); err == nil {
				s.ctl = nil
			}
		case StateDownstream:
			var b *latencyBaseline
			if b, err = decodeDownstream(r.Data); err == nil {
				b.seen = r.At
				if s.e.latency == nil {
					s.e.latency = map[string]*latencyBaseline{}
				}
				s.e.latency[r.Key] = b
				s.note(r.Part, r.Key, true)
			}
		default:
			err = fmt.Errorf("%w: unknown part %q", ErrState, r.Part)
		}
		if err != nil {
			ignore(r, err.Error())
			continue
		}
		st.Restored[r.Part]++
		if !r.At.Before(st.Newest) {
			st.Newest, st.Leader = r.At, r.Leader
		}
	}
	s.o.Logger.Info("engine state restored", "at", at, "rows", sum(st.Restored), "baselines", st.Restored[StateBaseline],
		"downstreams", st.Restored[StateDownstream], "events", st.Restored[StateEvents], "scores", st.Restored[StateScores],
		"controllers", st.Restored[StateControl], "ignored", sum(st.Ignored),
		"newest", st.Newest, "from", st.Leader)
	return st, nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// eventState returns what the Evaluator remembers of what it reported.
func (e *Evaluator) eventState() eventState {
	s := eventState{open: e.open, bad: e.states}
	if e.o.Levels != nil {
		s.raised = e.o.Levels.raised
	}
	return s
}

// forgotten drops what the evaluator keeps of a service (part
// StateBaseline) or downstream (StateDownstream, key "svc/ds") another
// leader forgot, as forget does, without events: that leader resolved the
// service's raised levels when it forgot it.
func (e *Evaluator) forgotten(part, key string) {
	if part == StateDownstream {
		delete(e.latency, key)
		return
	}
	e.o.Levels.take(key)
	e.drop(key)
}

// setEventState replaces it.
func (e *Evaluator) setEventState(s eventState) {
	if e.o.Levels != nil {
		e.o.Levels.raised = s.raised
	}
	e.open = s.open
	e.states = s.bad
}
