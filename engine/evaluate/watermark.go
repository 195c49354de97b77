package evaluate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
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

// Advance implements Watermark with a compare-and-set.
func (w SQLWatermark) Advance(ctx context.Context, set bool, from, to int64) (bool, error) {
	var (
		res sql.Result
		err error
	)
	if set {
		res, err = w.DB.ExecContext(ctx, `UPDATE governor_engine_watermarks SET seq = $1, leader = $2 WHERE name = $3 AND seq = $4`,
			to, w.Leader, w.Name, from)
	} else {
		res, err = w.DB.ExecContext(ctx, `INSERT INTO governor_engine_watermarks (name, seq, leader) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO NOTHING`, w.Name, to, w.Leader)
	}
	if err != nil {
		return false, fmt.Errorf("evaluate: watermark %s: %w", w.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("evaluate: watermark %s: %w", w.Name, err)
	}
	return n == 1, nil
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
