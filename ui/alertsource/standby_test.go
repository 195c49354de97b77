package alertsource_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/alertsource"
)

// The web UI of a standby replica shows the alerts the leader evaluates,
// as they are now, and acknowledges them for the leader.
func TestStandbyShowsAndAcknowledgesTheLeadersAlerts(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "alerts.db")
	rules := []rule.Rule{{Name: "Nacked", Event: rule.EventInstanceNacked, Severity: alerts.P1}}
	open := func(standby bool) *manager.Manager {
		st, err := store.OpenSQLite(ctx, path, store.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		m, err := manager.New(ctx, manager.Options{Rules: rules, Receivers: map[string]notify.Notifier{"x": discard{}},
			Store: st, Clock: clk, Registerer: prometheus.NewRegistry(), Standby: standby})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	leader, standby := open(false), open(true)
	src, err := alertsource.New(alertsource.Options{Manager: standby, Clock: clk})
	require.NoError(t, err)

	require.NoError(t, leader.Observe(rule.Event{Kind: rule.EventInstanceNacked, Service: "checkout", At: clk.Now()}))
	require.NoError(t, leader.Step(ctx, clk.Now()))
	firing, err := src.Firing(ctx)
	require.NoError(t, err)
	require.Len(t, firing, 1, "the standby shows the leader's firing alert")
	hist, err := src.History(ctx, 10)
	require.NoError(t, err)
	require.Len(t, hist, 1)

	acked, err := src.Ack(ctx, firing[0].ID, "otto")
	require.NoError(t, err)
	require.Equal(t, "otto", acked.AckedBy)
	require.NoError(t, leader.Step(ctx, clk.Now()))
	st := leader.Alerts(clk.Now())
	require.Len(t, st, 1)
	require.NotNil(t, st[0].Acknowledged, "the leader holds the acknowledgement made through the standby")
}

// A standby's page views within a second of each other show what one read
// of the store found; the next read after that shows the leader's news.
func TestStandbyRereadsTheStoreOncePerSecond(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "alerts.db")
	rules := []rule.Rule{{Name: "Nacked", Event: rule.EventInstanceNacked, Severity: alerts.P1}}
	open := func(standby bool) *manager.Manager {
		st, err := store.OpenSQLite(ctx, path, store.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		m, err := manager.New(ctx, manager.Options{Rules: rules, Receivers: map[string]notify.Notifier{"x": discard{}},
			Store: st, Clock: clk, Registerer: prometheus.NewRegistry(), Standby: standby})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	leader, standby := open(false), open(true)
	src, err := alertsource.New(alertsource.Options{Manager: standby, Clock: clk})
	require.NoError(t, err)

	require.NoError(t, leader.Observe(rule.Event{Kind: rule.EventInstanceNacked, Service: "checkout", At: clk.Now()}))
	require.NoError(t, leader.Step(ctx, clk.Now()))
	firing, err := src.Firing(ctx)
	require.NoError(t, err)
	require.Len(t, firing, 1)

	clk.Advance(500 * time.Millisecond)
	require.NoError(t, leader.Observe(rule.Event{Kind: rule.EventInstanceNacked, Service: "payments", At: clk.Now()}))
	require.NoError(t, leader.Step(ctx, clk.Now()))
	firing, err = src.Firing(ctx)
	require.NoError(t, err)
	require.Len(t, firing, 1, "a read within a second of the last store read does not read the store again")

	clk.Advance(500 * time.Millisecond)
	firing, err = src.Firing(ctx)
	require.NoError(t, err)
	require.Len(t, firing, 2, "a read a second after the last store read shows the leader's new alert")
}

func TestNewRefusesANegativeSyncEvery(t *testing.T) {
	_, err := alertsource.New(alertsource.Options{Manager: &manager.Manager{}, SyncEvery: -time.Second})
	require.ErrorContains(t, err, "SyncEvery")
}
