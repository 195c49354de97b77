package signalsource_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
	"governor.dev/governor/ui/signalsource"
)

// TestChartsOnTheEmbeddedStore runs the charts' PromQL on the engine's
// embedded store (Prometheus's own TSDB and engine) over the SDK's metric
// names and labels, scraped every 15 s for 20 minutes: counters that grow
// at known rates, a breaker that opens and half-opens, the engine's load
// score gauge, and another service that must not leak in.
func TestChartsOnTheEmbeddedStore(t *testing.T) {
	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const scrapes = 81 // 20 minutes every 15 s
	app := db.Appender(context.Background())
	counter := func(svc, route, class, outcome string, perSec float64) {
		ls := labels.FromStrings("__name__", "governor_sdk_requests_total", "service", svc, "route", route, "class", class, "outcome", outcome, "job", "demo", "instance", "i-1")
		for i := range scrapes {
			_, err := app.Append(0, ls, start.Add(time.Duration(i)*15*time.Second).UnixMilli(), perSec*15*float64(i))
			require.NoError(t, err)
		}
	}
	gauge := func(name string, ls labels.Labels, value func(i int) float64) {
		ls = labels.NewBuilder(ls).Set("__name__", name).Labels()
		for i := range scrapes {
			_, err := app.Append(0, ls, start.Add(time.Duration(i)*15*time.Second).UnixMilli(), value(i))
			require.NoError(t, err)
		}
	}
	counter("checkout", "api", "critical", "admitted", 10)
	counter("checkout", "web", "critical", "admitted", 5)
	counter("checkout", "web", "batch", "admitted", 2)
	counter("checkout", "web", "batch", "shed", 3)
	counter("checkout", "web", "batch", "rate_limited", 1)
	counter("checkout", "web", "batch", "shadow_would_shed", 50) // not a refusal
	counter("other", "api", "critical", "admitted", 1000)
	gauge("governor_sdk_breaker_state", labels.FromStrings("service", "checkout", "downstream", "payments"), func(i int) float64 {
		switch {
		case i >= 60 && i < 70:
			return 2
		case i >= 70 && i < 72:
			return 1
		}
		return 0
	})
	gauge("governor_sdk_breaker_state", labels.FromStrings("service", "other", "downstream", "ledger"), func(int) float64 { return 2 })
	gauge("governor_engine_load_score", labels.FromStrings("service", "checkout"), func(i int) float64 { return float64(i) / 100 })
	require.NoError(t, app.Commit())

	end := start.Add(20 * time.Minute)
	s, err := signalsource.New(signalsource.Options{Source: db, Clock: clock.NewFake(end), Points: 41})
	require.NoError(t, err)
	charts, err := s.ServiceCharts(context.Background(), "checkout", 10*time.Minute)
	require.NoError(t, err)
	last := func(ser model.Series) float64 { return ser.Points[len(ser.Points)-1].Value }

	adm := charts[0]
	require.Equal(t, "critical", adm.Series[0].Name)
	require.InDelta(t, 15, last(adm.Series[0]), 1e-9, "two routes' admitted critical req/s")
	require.Empty(t, adm.Series[1].Points, "core has no series")
	require.Equal(t, "batch", adm.Series[3].Name)
	require.InDelta(t, 2, last(adm.Series[3]), 1e-9)
	require.Len(t, adm.Series, 4, "the other service's traffic stays out")

	shed := charts[1]
	require.Equal(t, "batch", shed.Series[3].Name)
	require.InDelta(t, 4, last(shed.Series[3]), 1e-9, "shed and rate limited, not shadow decisions")
	require.Empty(t, shed.Series[0].Points)

	brk := charts[2]
	require.Len(t, brk.Series, 1)
	require.Equal(t, "payments", brk.Series[0].Name)
	var states []float64
	for _, p := range brk.Series[0].Points {
		if len(states) == 0 || states[len(states)-1] != p.Value {
			states = append(states, p.Value)
		}
	}
	require.Equal(t, []float64{0, 2, 1, 0}, states, "closed, open, half-open, closed")

	w, err := s.Window(context.Background(), "checkout", end.Add(-5*time.Minute), end, model.SignalLoadScore, model.SignalRequestRate)
	require.NoError(t, err)
	require.InDelta(t, 0.8, w[0].Points[len(w[0].Points)-1].Value, 1e-9)
	require.InDelta(t, 15+2+3+1, w[1].Points[len(w[1].Points)-1].Value, 1e-9, "the engine's request rate template: every outcome but the shadow ones")
}
