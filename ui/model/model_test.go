package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
)

func f64(v float64) *float64 { return &v }

func TestAttentionOrder(t *testing.T) {
	rows := []model.Row{
		{ServiceStatus: model.ServiceStatus{Name: "p0"}, Alerts: map[model.Tier]int{model.P0: 1}},
		{ServiceStatus: model.ServiceStatus{Name: "p1"}, Alerts: map[model.Tier]int{model.P1: 1}},
		{ServiceStatus: model.ServiceStatus{Name: "nacked", Rollout: model.Rollout{Nacked: 1}}},
		{ServiceStatus: model.ServiceStatus{Name: "overloaded", Overloaded: true, LoadScore: f64(0.9)}},
		{ServiceStatus: model.ServiceStatus{Name: "p2"}, Alerts: map[model.Tier]int{model.P2: 1}},
		{ServiceStatus: model.ServiceStatus{Name: "stale", Rollout: model.Rollout{Stale: 1}}},
		{ServiceStatus: model.ServiceStatus{Name: "pending"}, Pending: 1},
		{ServiceStatus: model.ServiceStatus{Name: "busy", LoadScore: f64(0.7)}},
		{ServiceStatus: model.ServiceStatus{Name: "calm", LoadScore: f64(0.1)}},
	}
	for i := 1; i < len(rows); i++ {
		require.Greater(t, model.Attention(rows[i-1]), model.Attention(rows[i]), "%s before %s", rows[i-1].Name, rows[i].Name)
	}
}

type failingFleet struct{}

func (failingFleet) Services(context.Context) ([]model.ServiceStatus, error) {
	return nil, errors.New("prometheus: connection refused\nstack...")
}

type failingRules struct{ versioning.Reader }

func (failingRules) Services(context.Context) ([]versioning.ServiceInfo, error) {
	return nil, versioning.ErrUnavailable
}

func TestBuildSurvivesFailingSources(t *testing.T) {
	alerts := model.NewMemoryAlerts(nil)
	alerts.Fire(model.Alert{ID: "a", Tier: model.P0, Service: "x"})
	ov, err := model.Build(context.Background(), model.Sources{Rules: failingRules{}, Fleet: failingFleet{}, Alerts: alerts})
	require.NoError(t, err)
	require.Equal(t, []string{"metrics unavailable: prometheus: connection refused", "rules database unavailable: the database does not answer"}, ov.Problems)
	require.Len(t, ov.Rows, 1)
	require.Equal(t, 1, ov.FiringByTier[model.P0])

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = model.Build(ctx, model.Sources{Fleet: failingFleet{}})
	require.ErrorIs(t, err, context.Canceled)
}

func TestAcknowledgedAndSilencedAlertsDoNotRaiseAttention(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	alerts := model.NewMemoryAlerts(clk)
	alerts.Fire(model.Alert{ID: "a", Tier: model.P0, Service: "acked"})
	alerts.Fire(model.Alert{ID: "b", Tier: model.P1, Service: "silenced"})
	alerts.Fire(model.Alert{ID: "c", Tier: model.P2, Service: "open"})
	_, err := alerts.Ack(ctx, "a", "otto")
	require.NoError(t, err)
	require.NoError(t, alerts.Silence(ctx, model.Silence{Service: "silenced", Until: clk.Now().Add(time.Hour)}))
	ov, err := model.Build(ctx, model.Sources{Alerts: alerts})
	require.NoError(t, err)
	require.Equal(t, "open", ov.Rows[0].Name)
	require.Equal(t, 1, ov.FiringByTier[model.P0], "still counted as firing")

	clk.Advance(2 * time.Hour)
	firing, err := alerts.Firing(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", firing[1].ID)
	require.True(t, firing[1].SilencedUntil.IsZero(), "the silence expired")
	_, err = alerts.Ack(ctx, "nope", "otto")
	require.ErrorIs(t, err, model.ErrNotFound)
}

func TestParseSilence(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, service, tier, dur, comment, field string
	}{
		{"ok", "checkout", "P1", "30m", "deploy", ""},
		{"all tiers", "checkout", "", "1h", "deploy", ""},
		{"no service", "", "", "1h", "c", "service"},
		{"bad tier", "checkout", "P9", "1h", "c", "tier"},
		{"too short", "checkout", "", "10s", "c", "for"},
		{"too long", "checkout", "", "200h", "c", "for"},
		{"garbage duration", "checkout", "", "soon", "c", "for"},
		{"no comment", "checkout", "", "1h", "  ", "comment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := model.ParseSilence(tc.service, tc.tier, tc.dur, tc.comment, now)
			if tc.field == "" {
				require.NoError(t, err)
				require.True(t, s.Until.After(now))
				return
			}
			require.ErrorIs(t, err, model.ErrInvalid)
			require.Contains(t, err.Error(), tc.field+":")
		})
	}
}

func FuzzParseSilence(f *testing.F) {
	f.Add("checkout", "P1", "30m", "deploy")
	f.Add("", "", "", "")
	f.Add("x", "P0", "168h", "c")
	f.Add("x", "p0", "-1h", "c")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, service, tier, dur, comment string) {
		s, err := model.ParseSilence(service, tier, dur, comment, now)
		if err != nil {
			require.ErrorIs(t, err, model.ErrInvalid)
			return
		}
		d := s.Until.Sub(now)
		require.True(t, d >= time.Minute && d <= 7*24*time.Hour, "duration %v", d)
		require.NotEmpty(t, s.Service)
		require.NotEmpty(t, s.Comment)
	})
}

// TestMemoryRolloutsActOnTheVersionShown: promote and abort name the
// version the person saw; with another one staged they change nothing and
// say so (ErrConflict, both versions named). A share that is not a number
// in (0, 100), NaN included, is refused naming percent.
func TestMemoryRolloutsActOnTheVersionShown(t *testing.T) {
	ctx := context.Background()
	m := model.NewMemoryRollouts()
	v := func(n int64) versioning.Version { return versioning.Version{Service: "checkout", Number: n} }
	for _, pct := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, 100} {
		err := m.StartCanary(ctx, v(2), pct)
		require.ErrorIs(t, err, model.ErrInvalid, "percent %v", pct)
		require.Contains(t, err.Error(), "percent:")
	}
	require.NoError(t, m.StartCanary(ctx, v(3), 10))
	_, err := m.Promote(ctx, "checkout", 2)
	require.ErrorIs(t, err, model.ErrConflict)
	require.Contains(t, err.Error(), "version 2")
	require.Contains(t, err.Error(), "version 3")
	_, err = m.Abort(ctx, "checkout", 2)
	require.ErrorIs(t, err, model.ErrConflict)
	require.Zero(t, m.Stable("checkout"))
	n, err := m.Promote(ctx, "checkout", 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	_, err = m.Abort(ctx, "checkout", 3)
	require.ErrorIs(t, err, model.ErrNotFound)
}

// TestBuildFleetWideAlertsHaveNoRow: an alert of no service (the alerting
// subsystem's own, such as GovernorLeaderLost) counts as firing but makes
// no blank service row at the top of the overview.
func TestBuildFleetWideAlertsHaveNoRow(t *testing.T) {
	alerts := model.NewMemoryAlerts(nil)
	alerts.Fire(model.Alert{ID: "leader", Tier: model.P0, Summary: "GovernorLeaderLost"})
	alerts.Fire(model.Alert{ID: "pay", Tier: model.P1, Service: "payments"})
	fleet := &model.StaticFleet{}
	fleet.Set([]model.ServiceStatus{{Name: "checkout"}}, nil)
	ov, err := model.Build(context.Background(), model.Sources{Fleet: fleet, Alerts: alerts})
	require.NoError(t, err)
	var names []string
	for _, r := range ov.Rows {
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"payments", "checkout"}, names)
	require.Equal(t, map[model.Tier]int{model.P0: 1, model.P1: 1}, ov.FiringByTier)
}

// TestBuildTreatsNonFiniteValuesAsNoData: a NaN or infinite value from a
// source is no data: it neither outranks a service with a P0 alert (its
// attention was a huge negative number that overflowed the sort) nor
// breaks the overview's JSON.
func TestBuildTreatsNonFiniteValuesAsNoData(t *testing.T) {
	alerts := model.NewMemoryAlerts(nil)
	alerts.Fire(model.Alert{ID: "a", Tier: model.P0, Service: "down"})
	nan, inf := math.NaN(), math.Inf(1)
	fleet := &model.StaticFleet{}
	fleet.Set([]model.ServiceStatus{
		{Name: "down", LoadScore: f64(0.2)},
		{Name: "odd", LoadScore: &nan, RequestRate: &inf, ErrorRatio: &nan, P99: &inf,
			Trend: []model.Point{{Value: 0.5}, {Value: nan}}, Terms: []model.Term{{Name: "latency", Value: nan}, {Name: "cpu", Value: 0.3}},
			ShedByClass: map[string]float64{"batch": nan, "critical": 0}},
		{Name: "huge", LoadScore: f64(math.MaxFloat64)},
		{Name: "calm", LoadScore: f64(0.1)},
	}, nil)
	ov, err := model.Build(context.Background(), model.Sources{Fleet: fleet, Alerts: alerts})
	require.NoError(t, err)
	var names []string
	for _, r := range ov.Rows {
		names = append(names, r.Name)
		require.GreaterOrEqual(t, r.Attention, 0, r.Name)
	}
	require.Equal(t, []string{"down", "huge", "calm", "odd"}, names)
	odd := ov.Rows[3]
	require.Nil(t, odd.LoadScore)
	require.Nil(t, odd.RequestRate)
	require.Nil(t, odd.ErrorRatio)
	require.Nil(t, odd.P99)
	require.Equal(t, []model.Point{{Value: 0.5}}, odd.Trend)
	require.Equal(t, []model.Term{{Name: "cpu", Value: 0.3}}, odd.Terms)
	require.Equal(t, map[string]float64{"critical": 0}, odd.ShedByClass)
	_, err = json.Marshal(ov)
	require.NoError(t, err, "the API encodes it")
	require.Equal(t, 100, model.Attention(model.Row{ServiceStatus: model.ServiceStatus{LoadScore: f64(7)}}), "a load score counts as at most 1")
}

// TestUnknownRolloutIsNotCountedAsInstances: a service whose delivery
// ledger was not read has an unknown rollout. Its counts mean nothing:
// they raise no attention and the overview zeroes them.
func TestUnknownRolloutIsNotCountedAsInstances(t *testing.T) {
	unknown := model.Rollout{Unknown: true, Nacked: 2, Stale: 1}
	require.Zero(t, unknown.Total())
	require.Zero(t, model.Attention(model.Row{ServiceStatus: model.ServiceStatus{Name: "x", Rollout: unknown}}))

	f := &model.StaticFleet{}
	f.Set([]model.ServiceStatus{{Name: "x", Rollout: unknown}}, nil)
	ov, err := model.Build(context.Background(), model.Sources{Fleet: f})
	require.NoError(t, err)
	require.Equal(t, model.Rollout{Unknown: true}, ov.Rows[0].Rollout)
	b, err := json.Marshal(ov.Rows[0].Rollout)
	require.NoError(t, err)
	require.JSONEq(t, `{"synced":0,"pending":0,"stale":0,"nacked":0,"gone":0,"unpublished":0,"unknown":true}`, string(b))
	b, err = json.Marshal(model.Rollout{Synced: 3})
	require.NoError(t, err)
	require.JSONEq(t, `{"synced":3,"pending":0,"stale":0,"nacked":0,"gone":0,"unpublished":0}`, string(b), "known counts keep their shape")
}

// TestUnpublishedInstancesAreInstancesButNotSynced: instances no rule
// version is published for count in the total, apart from the synced
// ones, and raise no attention by themselves (a new service has none
// published yet).
func TestUnpublishedInstancesAreInstancesButNotSynced(t *testing.T) {
	r := model.Rollout{Synced: 1, Unpublished: 2}
	require.Equal(t, 3, r.Total())
	require.Zero(t, model.Attention(model.Row{ServiceStatus: model.ServiceStatus{Name: "x", Rollout: model.Rollout{Unpublished: 2}}}))
}

// TestBuildWordsPartialAndFailedSignalsApart: a fleet that answers with
// some signals partial or failed puts one problem per signal in the
// overview ("metrics partial: ..." / "metrics query failed: ..."), never
// "metrics unavailable", and its services are still shown; the fleet's own
// failure alongside is still "metrics unavailable".
func TestBuildWordsPartialAndFailedSignalsApart(t *testing.T) {
	rate := 120.0
	fleet := &model.StaticFleet{}
	sigErr := &model.SignalError{Signals: []model.SignalProblem{
		{Signal: "request_rate", Reason: "store-eu-1 did not answer"},
		{Signal: "latency_p99", Failed: true, Reason: "timed out"},
	}}
	fleet.Set([]model.ServiceStatus{{Name: "checkout", RequestRate: &rate}}, sigErr)
	ov, err := model.Build(context.Background(), model.Sources{Fleet: fleet})
	require.NoError(t, err)
	require.Equal(t, []string{
		"metrics partial: request_rate: store-eu-1 did not answer",
		"metrics query failed: latency_p99: timed out",
	}, ov.Problems)
	require.Len(t, ov.Rows, 1)
	require.Equal(t, 120.0, *ov.Rows[0].RequestRate)

	sigErr.Err = errors.New("delivery ledger: connection refused")
	fleet.Set([]model.ServiceStatus{{Name: "checkout"}}, sigErr)
	ov, err = model.Build(context.Background(), model.Sources{Fleet: fleet})
	require.NoError(t, err)
	require.Equal(t, []string{
		"metrics unavailable: delivery ledger: connection refused",
		"metrics partial: request_rate: store-eu-1 did not answer",
		"metrics query failed: latency_p99: timed out",
	}, ov.Problems)
}

// TestIsSilenceVersion: a silence's version is 1 to 64 lowercase
// hexadecimal digits; anything else (quotes, spaces, markup, upper case)
// is not one.
func TestIsSilenceVersion(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"0123456789abcdef", true},
		{"a", true},
		{strings.Repeat("f", 64), true},
		{"", false},
		{strings.Repeat("f", 65), false},
		{"ABCDEF", false},
		{`"abc"`, false},
		{"abc def", false},
		{"<b>", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, model.IsSilenceVersion(tt.v), tt.v)
	}
}
