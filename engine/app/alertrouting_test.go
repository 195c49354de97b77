package app

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	alertsconfig "governor.dev/governor/alerts/config"
	"governor.dev/governor/alerts/configstore"
	alertsmanager "governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/migrations"
	"governor.dev/governor/sdk/clock"
)

// TestAlertRoutingAppliesSavedVersions: a saved version supersedes the
// bootstrap routing on the next poll, once; a later save is picked up too.
func TestAlertRoutingAppliesSavedVersions(t *testing.T) {
	ctx := context.Background()
	_, _, m, cs := routingRig(t)
	r := &alertRouting{store: cs, manager: m}

	require.NoError(t, r.poll(ctx)) // nothing saved: the bootstrap stays
	require.Equal(t, []string{"log"}, m.Receivers())

	_, err := cs.Save(ctx, configstore.SaveRequest{Author: "ada", Comment: "page the team", Document: `{
	  "builtin_rules": "disabled",
	  "rules": [{"name": "Custom", "event": "leader_lost", "severity": "P0"}],
	  "routes": [{"receiver": "pager", "severities": ["P0"]}, {"receiver": "team"}],
	  "receivers": [{"name": "pager", "pagerduty": {"routing_key": "k"}},
	                {"name": "team", "webhook": {"url": "http://127.0.0.1:1/hook"}}]}`})
	require.NoError(t, err)
	require.NoError(t, r.poll(ctx))
	require.Equal(t, []string{"pager", "team"}, m.Receivers())
	var names []string
	for _, rl := range m.Rules() {
		names = append(names, rl.Name)
	}
	require.Equal(t, "Custom,GovernorAlertReceiverFailing", strings.Join(names, ","))

	_, err = cs.Save(ctx, configstore.SaveRequest{Base: 1, Author: "ada", Comment: "one receiver",
		Document: `{"receivers": [{"name": "only", "webhook": {"url": "http://127.0.0.1:1/x"}}]}`})
	require.NoError(t, err)
	require.NoError(t, r.poll(ctx))
	require.Equal(t, []string{"only"}, m.Receivers())
	require.Equal(t, int64(2), r.applied)
}

// TestAlertBootstrapRoundTrips: the configuration file's document, as the
// UI shows it before the first save, parses back to the same receivers.
func TestAlertBootstrapRoundTrips(t *testing.T) {
	c, err := alertsconfig.Parse([]byte(`{"rules": [{"name": "R", "expr": "up == 0", "severity": "P1", "for": "2m"}],
	  "routes": [{"receiver": "pager", "severities": ["P0"], "matchers": "{service=\"checkout\"}", "continue": true}, {"receiver": "am"}],
	  "timing": {"group_wait": "10s", "repeat": {"P1": "2h"}, "p2_digest": true},
	  "inhibit_rules": [{"source": "severity=\"P0\"", "target": "severity=~\"P1|P2\"", "equal": ["service"]}],
	  "receivers": [{"name": "pager", "pagerduty": {"routing_key": "k"}}, {"name": "am", "alertmanager": {"url": "http://am:9093"}}]}`))
	require.NoError(t, err)
	a := &App{o: Options{Alerts: c}}
	doc := a.alertBootstrap()
	require.NotEmpty(t, doc)
	back, err := alertsconfig.Parse([]byte(doc))
	require.NoError(t, err)
	require.Equal(t, c.ReceiverNames(), back.ReceiverNames())
	require.Equal(t, c.DispatchTiming(), back.DispatchTiming())
	require.Empty(t, (&App{}).alertBootstrap())
}

// TestAlertRoutingPollsWithoutRestart: the engine applies the newest saved
// version at start, and a version saved while it runs on the next poll of
// its clock.
func TestAlertRoutingPollsWithoutRestart(t *testing.T) {
	ctx := context.Background()
	clk, db, m, cs := routingRig(t)
	_, err := cs.Save(ctx, configstore.SaveRequest{Author: "ada", Comment: "saved before start",
		Document: `{"receivers": [{"name": "first", "webhook": {"url": "http://127.0.0.1:1/a"}}]}`})
	require.NoError(t, err)

	a := &App{o: Options{Clock: clk, AlertInterval: 15 * time.Second}, log: slog.New(slog.DiscardHandler), ledgerDB: db, alerts: m}
	require.NoError(t, a.startAlertRouting(ctx))
	defer a.close()
	require.Equal(t, []string{"first"}, m.Receivers(), "a saved version supersedes the bootstrap at start")
	require.NotNil(t, a.routingStore())

	// Saved by another process (cs is a store of its own on the same
	// database): picked up by the poll.
	_, err = cs.Save(ctx, configstore.SaveRequest{Base: 1, Author: "ada", Comment: "while running",
		Document: `{"receivers": [{"name": "second", "webhook": {"url": "http://127.0.0.1:1/b"}}]}`})
	require.NoError(t, err)
	for clk.Pending() == 0 {
		runtime.Gosched()
	}
	clk.Advance(15 * time.Second)
	for slices.Equal(m.Receivers(), []string{"first"}) {
		runtime.Gosched()
	}
	require.Equal(t, []string{"second"}, m.Receivers())

	// Saved by the UI of this process: applied at once, no clock needed.
	_, err = a.routing.store.Save(ctx, configstore.SaveRequest{Base: 2, Author: "ada", Comment: "from this process",
		Document: `{"receivers": [{"name": "third", "webhook": {"url": "http://127.0.0.1:1/c"}}]}`})
	require.NoError(t, err)
	for slices.Equal(m.Receivers(), []string{"second"}) {
		runtime.Gosched()
	}
	require.Equal(t, []string{"third"}, m.Receivers())
}

// TestAlertRoutingStartsPastAVersionThatNoLongerBuilds: a saved version
// that a later release refuses (here routes without a catch-all, which
// releases before that rule accepted) must not stop the engine from
// starting: it is logged and skipped, and the routing in force (the
// bootstrap) stays, as the poll does for such a version while running.
func TestAlertRoutingStartsPastAVersionThatNoLongerBuilds(t *testing.T) {
	ctx := context.Background()
	clk, db, m, cs := routingRig(t)
	_, err := cs.Save(ctx, configstore.SaveRequest{Author: "ada", Comment: "saved by an older release",
		Document: `{"receivers": [{"name": "first", "webhook": {"url": "http://127.0.0.1:1/a"}}]}`})
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `UPDATE alert_config_versions SET document = ? WHERE number = 1`, `{
	  "routes": [{"receiver": "pager", "severities": ["P0"]}],
	  "receivers": [{"name": "pager", "pagerduty": {"routing_key": "k"}}, {"name": "team", "webhook": {"url": "http://127.0.0.1:1/hook"}}]}`)
	require.NoError(t, err)

	var logged strings.Builder
	a := &App{o: Options{Clock: clk, AlertInterval: 15 * time.Second}, log: slog.New(slog.NewTextHandler(&logged, nil)), ledgerDB: db, alerts: m}
	require.NoError(t, a.startAlertRouting(ctx))
	defer a.close()
	require.Equal(t, []string{"log"}, m.Receivers(), "the routing in force stays")
	require.Contains(t, logged.String(), "version 1")
}

// TestAlertRoutingRefusedRoutingKeepsTheRulesInForce: a version whose
// rules are valid but whose routing the manager refuses (here: the manager
// is closed, which document validation cannot see) changes nothing: the
// rules in force stay with the routing in force, and the version is
// reported unusable.
func TestAlertRoutingRefusedRoutingKeepsTheRulesInForce(t *testing.T) {
	ctx := context.Background()
	_, _, m, cs := routingRig(t)
	r := &alertRouting{store: cs, manager: m}
	before := m.Rules()
	_, err := cs.Save(ctx, configstore.SaveRequest{Author: "ada", Comment: "rules and routing", Document: `{
	  "builtin_rules": "disabled",
	  "rules": [{"name": "Custom", "event": "leader_lost", "severity": "P0"}],
	  "receivers": [{"name": "team", "webhook": {"url": "http://127.0.0.1:1/hook"}}]}`})
	require.NoError(t, err)
	require.NoError(t, m.Close())

	err = r.poll(ctx)
	require.ErrorIs(t, err, errVersionUnusable)
	require.Equal(t, before, m.Rules(), "the rules must not change when the routing is refused")
	require.Equal(t, []string{"log"}, m.Receivers())
}

// routingRig returns a fake clock, a SQLite rules database, an alerts
// manager on it whose only receiver logs, and a store of saved alerting
// versions on the same database.
func routingRig(t *testing.T) (*clock.Fake, *sql.DB, *alertsmanager.Manager, *configstore.Store) {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	db, err := sqlitedb.Open(filepath.Join(t.TempDir(), "g.db"), sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ast, err := store.New(ctx, db, migrations.SQLite, store.Options{})
	require.NoError(t, err)
	m, err := alertsmanager.New(ctx, alertsmanager.Options{Store: ast, Clock: clk,
		Receivers: map[string]notify.Notifier{"log": logReceiver{log: slog.New(slog.DiscardHandler)}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	cs, err := configstore.New(ctx, db, migrations.SQLite, configstore.Options{Clock: clk})
	require.NoError(t, err)
	return clk, db, m, cs
}
