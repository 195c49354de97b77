package alertsource_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/alertsource"
	"governor.dev/governor/ui/model"
)

type discard struct{}

func (discard) Notify(context.Context, *notify.Message) (bool, error) { return false, nil }

func TestAdapterOnRealManager(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "alerts.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	rules := []rule.Rule{{Name: "Nacked", Event: rule.EventInstanceNacked, Severity: alerts.P1,
		Annotations: map[string]string{"summary": "{{ $labels.service }} refused the rules"}}}
	m, err := manager.New(ctx, manager.Options{Rules: rules, Receivers: map[string]notify.Notifier{"x": discard{}}, Store: st, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	src, err := alertsource.New(alertsource.Options{Manager: m, Clock: clk})
	require.NoError(t, err)

	require.NoError(t, m.Observe(rule.Event{Kind: rule.EventInstanceNacked, Service: "checkout", Labels: map[string]string{"instance": "i1"}, At: clk.Now()}))
	require.NoError(t, m.Step(ctx, clk.Now()))
	firing, err := src.Firing(ctx)
	require.NoError(t, err)
	require.Len(t, firing, 1)
	a := firing[0]
	require.Equal(t, model.P1, a.Tier)
	require.Equal(t, "checkout", a.Service)
	require.Equal(t, "checkout refused the rules", a.Summary)

	acked, err := src.Ack(ctx, a.ID, "otto")
	require.NoError(t, err)
	require.Equal(t, "otto", acked.AckedBy)
	_, err = src.Ack(ctx, "not-a-fingerprint", "otto")
	require.ErrorIs(t, err, model.ErrNotFound)

	require.NoError(t, src.Silence(ctx, model.Silence{Service: "checkout", Tier: model.P1, Until: clk.Now().Add(time.Hour), By: "otto", Comment: "deploy"}))
	require.NoError(t, m.Step(ctx, clk.Now()))
	firing, err = src.Firing(ctx)
	require.NoError(t, err)
	require.Equal(t, clk.Now().Add(time.Hour), firing[0].SilencedUntil)
	hist, err := src.History(ctx, 10)
	require.NoError(t, err)
	require.Len(t, hist, 1)
}
