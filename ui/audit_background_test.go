package ui_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// walkLog passes the audit walks' log records to a channel.
type walkLog struct{ recs chan slog.Record }

func (walkLog) Enabled(context.Context, slog.Level) bool { return true }
func (l walkLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "audit chain verified" || r.Message == "audit chain broken" {
		l.recs <- r.Clone()
	}
	return nil
}
func (l walkLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l walkLog) WithGroup(string) slog.Handler      { return l }

// TestUIServerRunReportsABrokenChainItsBackgroundWalkFound: Server.Run
// walks the whole audit chain at start and every 10 to 12 minutes on the
// injected clock; the walk that finds an old entry edited logs at ERROR
// naming it, sets governor_ui_audit_chain_ok to 0 and counts the walk,
// and the next audit page view shows it, with no view having asked.
func TestUIServerRunReportsABrokenChainItsBackgroundWalkFound(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
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
	for range 3 {
		_, err = st.RecordAudit(ctx, versioning.AuditRecord{Actor: versioning.Actor{Name: "carol"}, Action: "test.entry"})
		require.NoError(t, err)
	}
	reg := prometheus.NewRegistry()
	logs := walkLog{recs: make(chan slog.Record, 4)}
	srv, err := ui.NewServer(ui.Options{Rules: st, Auth: am, Clock: clk, Registerer: reg, Logger: slog.New(logs)})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { srv.Run(rctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	require.Equal(t, "audit chain verified", (<-logs.recs).Message)
	require.Equal(t, 1.0, metricValue(t, reg, "governor_ui_audit_chain_ok"))

	for _, q := range []string{`DROP TRIGGER IF EXISTS rule_audit_no_update`, `UPDATE rule_audit SET actor = 'mallory' WHERE seq = 1`} {
		_, err = db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	for clk.Pending() == 0 { // Run waits on its timer
		runtime.Gosched()
	}
	// The period is 10 minutes stretched by a random share of at most a
	// fifth: the timer fires within the longest.
	clk.Advance(versioning.DefaultWholeChainEvery * 6 / 5)
	r := <-logs.recs
	require.Equal(t, slog.LevelError, r.Level)
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	require.Equal(t, "1", attrs["seq"])
	require.Equal(t, "true", attrs["background"])
	require.Equal(t, 0.0, metricValue(t, reg, "governor_ui_audit_chain_ok"))
	n, err := testutil.GatherAndCount(reg, "governor_ui_audit_whole_walks_total")
	require.NoError(t, err)
	require.Equal(t, 3, n, "the series of every result exist from the start")

	e := &env{t: t, srv: hs, auth: am}
	sid, _ := e.session("vera")
	resp, body := e.do(req{method: "GET", path: "/audit", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Chain verification failed:</strong> entry 1:")
	resp, body = e.do(req{method: "GET", path: "/api/v1/audit/verify?whole=false", session: sid})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `"ok":false`)
	require.Contains(t, body, `"seq":1`)
}

// metricValue is the value of the registry's metric without labels.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
