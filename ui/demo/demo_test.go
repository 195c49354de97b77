package demo_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/recommend"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/demo"
	"governor.dev/governor/ui/model"
)

func TestSeedIsIdempotent(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	defer st.Close()
	o := demo.Options{Rules: st, Fleet: &model.StaticFleet{}, Alerts: model.NewMemoryAlerts(nil), Services: 3}
	require.NoError(t, demo.Seed(ctx, o))
	require.NoError(t, demo.Seed(ctx, o))
	infos, err := st.Services(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 3)
	require.Equal(t, "checkout", infos[0].Name)
	require.Equal(t, int64(2), infos[0].Active)
	require.Equal(t, 1, infos[0].Pending)
	vs, err := st.List(ctx, versioning.ListFilter{Service: "checkout", States: []versioning.State{versioning.StateProposed}})
	require.NoError(t, err)
	require.Equal(t, versioning.SourceEngine, vs[0].Source)
	require.NotEmpty(t, vs[0].Evidence)
}

func TestIncidentFiresOneAlert(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	defer st.Close()
	fleet, alerts := &model.StaticFleet{}, model.NewMemoryAlerts(clk)
	done := make(chan error)
	go func() {
		done <- demo.Run(ctx, demo.Options{Rules: st, Fleet: fleet, Alerts: alerts, Clock: clk, Services: 2, IncidentAt: 2})
	}()
	var peak float64
	for range 30 {
		for clk.Pending() == 0 {
			runtime.Gosched() // yield until Run arms its timer
		}
		svcs, _ := fleet.Services(ctx)
		peak = max(peak, *svcs[0].LoadScore)
		clk.Advance(time.Second)
	}
	cancel()
	require.NoError(t, <-done)
	require.Greater(t, peak, 0.85)
	ins, err := fleet.Instances(ctx, "checkout")
	require.NoError(t, err)
	require.Len(t, ins, 40)
	hist, err := alerts.History(ctx, 10)
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, model.P1, hist[0].Tier)
}

// The seeded engine proposal carries evidence in the engine's format: it
// decodes as recommend.Evidence, its numbers agree with each other and with
// the proposed ruleset.
func TestSeedEvidenceIsTheEngines(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, demo.Seed(ctx, demo.Options{Rules: st, Fleet: &model.StaticFleet{}, Alerts: model.NewMemoryAlerts(clk), Clock: clk, Services: 2}))
	vs, err := st.List(ctx, versioning.ListFilter{Service: "checkout", States: []versioning.State{versioning.StateProposed}})
	require.NoError(t, err)
	require.Len(t, vs, 1)
	var ev struct {
		recommend.Evidence
		// signals.Value marshals to JSON but does not decode from it.
		Terms []struct {
			Term         string  `json:"term"`
			Contribution float64 `json:"contribution"`
			Known        bool    `json:"known"`
		} `json:"terms"`
		AutoApply  *bool          `json:"auto_apply"`
		Policy     string         `json:"policy"`
		Reference  float64        `json:"hour_reference"`
		Band       recommend.Band `json:"band"`
		BandSource string         `json:"band_source"`
	}
	require.NoError(t, json.Unmarshal(vs[0].Evidence, &ev))
	require.True(t, ev.At.Equal(clk.Now()))
	require.NotEmpty(t, ev.ExpectedEffect)
	require.Equal(t, 350.0, vs[0].Ruleset.Routes[0].RateLimit.Rate)
	require.Equal(t, 350.0, ev.Ceiling.PerInstance["api"])
	require.Equal(t, 350.0*demo.Instances, ev.Ceiling.To)
	require.Equal(t, 500.0*demo.Instances, ev.Ceiling.From)
	require.InDelta(t, ev.PID.Output, ev.PID.P+ev.PID.I+ev.PID.D, 1e-9)
	var sum float64
	for _, c := range ev.Terms {
		if c.Known {
			sum += c.Contribution
		}
	}
	require.InDelta(t, ev.LoadScore, sum, 0.01, "the known terms add up to the score")
	require.NotNil(t, ev.AutoApply)
	require.False(t, *ev.AutoApply, "a 30% cut is outside the 10% band: it waits for approval")
	require.Contains(t, ev.Policy, "exceeds the band")
	require.Equal(t, recommend.BandFromConfig, ev.BandSource)
}
