package ui_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui"
	"governor.dev/governor/ui/auth"
)

// TestUIServersOnOneDatabaseWalkTheAuditChainAtDifferentPeriods: two UI
// processes on one database, started at the same moment, schedule their
// next whole walk of the audit chain apart (each walks every 10 minutes
// stretched by its own random share of at most a fifth), so that they
// drift apart instead of walking the chain together every time.
func TestUIServersOnOneDatabaseWalkTheAuditChainAtDifferentPeriods(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	path := filepath.Join(t.TempDir(), "governor.db")
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	am, err := auth.New(ctx, auth.Options{DB: db, Dialect: migrations.SQLite, Auditor: st, Clock: clk, BcryptCost: bcrypt.MinCost})
	require.NoError(t, err)
	_, err = am.CreateUser(ctx, "vera", testPassword, []versioning.Role{versioning.RoleViewer}, false)
	require.NoError(t, err)

	var next []time.Time
	for range 2 {
		logs := walkLog{recs: make(chan slog.Record, 4)}
		srv, err := ui.NewServer(ui.Options{Rules: st, Auth: am, Clock: clk, Logger: slog.New(logs)})
		require.NoError(t, err)
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		rctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { srv.Run(rctx) })
		t.Cleanup(func() { cancel(); wg.Wait() })
		require.Equal(t, "audit chain verified", (<-logs.recs).Message)

		e := &env{t: t, srv: hs, auth: am}
		sid, _ := e.session("vera")
		resp, body := e.do(req{method: "GET", path: "/api/v1/audit/verify?whole=false", session: sid})
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var got struct {
			NextWhole time.Time `json:"next_whole"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		require.True(t, got.NextWhole.After(start.Add(versioning.DefaultWholeChainEvery)), "%v", got.NextWhole)
		require.False(t, got.NextWhole.After(start.Add(versioning.DefaultWholeChainEvery*6/5)), "%v", got.NextWhole)
		next = append(next, got.NextWhole)
	}
	require.NotEqual(t, next[0], next[1])
}
