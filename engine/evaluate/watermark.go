package evaluate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"governor.dev/governor/rules/versioning"
)

// Watermark persists how far something reported once (emergency
// publications) has been reported, shared by every engine replica.
type Watermark interface {
	// Load returns the mark; set is false while it was never set.
	Load(ctx context.Context) (seq int64, set bool, err error)
	// Advance moves the mark from `from` (set false: from unset) to `to`
	// and reports whether it did: false when another replica moved it
	// first, in which case that replica reports what lies in between.
	Advance(ctx context.Context, set bool, from, to int64) (bool, error)
}

// EmergencyMark is the name of the emergency publications' mark.
const EmergencyMark = "emergency_publish"

// SQLWatermark keeps a mark in the governor_engine_watermarks table
// (migration 00401) of the rules database, PostgreSQL or SQLite.
//
// A move made under a versioning.Fence (the context of the leader's tick,
// versioning.WithFence) is refused with a *versioning.FencedError
// (versioning.ErrFenced), moving nothing, when a tick later than the
// fence's has been claimed in governor_engine_ticks: the check is part of
// the moving statement, so no pause of the mover (a GC pause, a suspended
// VM) falls between them. A leader frozen between its report and its move
// past its lease so never moves the mark after its successor's claim; the
// successor, which reads the mark after claiming, finds it where it was
// and reports those publications again under the same keys rather than
// skip them. Moves without a fence are never refused; the one-node SQLite
// mode claims no ticks in the table.
type SQLWatermark struct {
	DB *sql.DB
	// Name of the mark; Leader is recorded with each move.
	Name, Leader string
}

var _ Watermark = SQLWatermark{}

// Load implements Watermark.
func (w SQLWatermark) Load(ctx context.Context) (int64, bool, error) {
	var seq int64
	err := w.DB.QueryRowContext(ctx, `SELECT seq FROM governor_engine_watermarks WHERE name = $1`, w.Name).Scan(&seq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("evaluate: watermark %s: %w", w.Name, err)
	}
	return seq, true, nil
}

// The moves of SQLWatermark.Advance; each fenced one also checks, in the
// same statement, that no tick later than the fence's ($5) was claimed.
// The INSERT's SELECT has a WHERE so that SQLite reads ON CONFLICT as the
// upsert clause.
const (
	markUpdate       = `UPDATE governor_engine_watermarks SET seq = $1, leader = $2 WHERE name = $3 AND seq = $4`
	markUpdateFenced = markUpdate + ` AND NOT EXISTS (SELECT 1 FROM governor_engine_ticks WHERE tick > $5)`
	markInsert       = `INSERT INTO governor_engine_watermarks (name, seq, leader) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`
	markInsertFenced = `INSERT INTO governor_engine_watermarks (name, seq, leader)
		SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM governor_engine_ticks WHERE tick > $4)
		ON CONFLICT (name) DO NOTHING`
)

// Advance implements Watermark with a compare-and-set, fenced by the
// tick of ctx's versioning.Fence if it carries one.
func (w SQLWatermark) Advance(ctx context.Context, set bool, from, to int64) (bool, error) {
	f, fenced := versioning.FenceOf(ctx)
	var q string
	var args []any
	switch {
	case set && fenced:
		q, args = markUpdateFenced, []any{to, w.Leader, w.Name, from, f.Tick.UTC()}
	case set:
		q, args = markUpdate, []any{to, w.Leader, w.Name, from}
	case fenced:
		q, args = markInsertFenced, []any{w.Name, to, w.Leader, f.Tick.UTC()}
	default:
		q, args = markInsert, []any{w.Name, to, w.Leader}
	}
	res, err := w.DB.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("evaluate: watermark %s: %w", w.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("evaluate: watermark %s: %w", w.Name, err)
	}
	if n == 1 || !fenced {
		return n == 1, nil
	}
	// Not moved: another replica moved it first, or a later tick was
	// claimed. A tick claimed since the move counts too: this replica does
	// not lead any more either way.
	var newer time.Time
	var by string
	err = w.DB.QueryRowContext(ctx, versioning.NewerTickQuery,
		f.Tick.UTC()).Scan(&newer, &by)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("evaluate: watermark %s: fence of tick %s: %w", w.Name, f.Tick.UTC().Format(time.RFC3339Nano), err)
	}
	return false, fmt.Errorf("evaluate: watermark %s: %w", w.Name, &versioning.FencedError{Fence: f, Newer: newer, By: by})
}

// MemWatermark keeps a mark in memory: one process, forgotten on restart.
type MemWatermark struct {
	mu  sync.Mutex
	seq int64
	set bool
}

// Load implements Watermark.
func (w *MemWatermark) Load(context.Context) (int64, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq, w.set, nil
}

// Advance implements Watermark.
func (w *MemWatermark) Advance(_ context.Context, set bool, from, to int64) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.set != set || w.seq != from {
		return false, nil
	}
	w.seq, w.set = to, true
	return true, nil
}
