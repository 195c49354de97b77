package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/rules"
)

// TestSQLiteIgnoresFences: the SQLite mode runs one engine, whose ticks
// are claimed in memory; a fenced write goes through even when the ticks
// table names a later tick.
func TestSQLiteIgnoresFences(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rules.db")
	s, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ('2026-01-01T00:00:10Z', 'other')`)
	require.NoError(t, err)
	fenced := versioning.WithFence(ctx, versioning.Fence{Tick: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Holder: "engine"})
	v, err := s.Propose(fenced, versioning.Proposal{Ruleset: &rules.Ruleset{Service: "solo"}, Author: alice, Reason: "x"})
	require.NoError(t, err)
	_, err = s.Approve(fenced, "solo", v.Number, bob, "")
	require.NoError(t, err)
}
