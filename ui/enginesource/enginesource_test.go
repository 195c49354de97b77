package enginesource_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/ui/enginesource"
	"governor.dev/governor/ui/model"
)

type fakeScores struct {
	scores []loadscore.Score
	tick   time.Time
}

func (f *fakeScores) Scores() []loadscore.Score { return f.scores }
func (f *fakeScores) LastTick() time.Time       { return f.tick }

type fakeLedger struct {
	ins map[string][]distribution.Instance
	err error
}

func (f fakeLedger) Instances(_ context.Context, svc string) ([]distribution.Instance, error) {
	return f.ins[svc], f.err
}

func TestServices(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	score := func(svc, inst string, v float64, known bool) loadscore.Score {
		return loadscore.Score{Key: signals.Key{Service: svc, Instance: inst}, At: t0, Value: v, Known: known, Overloaded: v > 0.8,
			Raw: loadscore.Raw{Terms: []loadscore.Contribution{
				{Term: loadscore.Latency, Input: signals.KnownValue(0.3), Normalized: 0.75, EffectiveWeight: 0.3, Contribution: 0.225, Known: true},
				{Term: loadscore.CPU, Known: false},
			}}}
	}
	fs := &fakeScores{tick: t0, scores: []loadscore.Score{score("b", "", 0.9, true), score("a", "", math.NaN(), false), score("b", "i1", 0.5, true)}}
	led := fakeLedger{ins: map[string][]distribution.Instance{"b": {
		{Instance: "i1", State: distribution.StateSynced}, {Instance: "i2", State: distribution.StateNacked, NackError: "bad"}}}}
	src, err := enginesource.New(enginesource.Options{Scores: fs, Ledger: led, TrendLen: 2})
	require.NoError(t, err)
	ctx := context.Background()
	svcs, err := src.Services(ctx)
	require.NoError(t, err)
	require.Len(t, svcs, 2, "instance scores are not services")
	require.Equal(t, "a", svcs[0].Name)
	require.Nil(t, svcs[0].LoadScore, "unknown stays unknown")
	b := svcs[1]
	require.Equal(t, 0.9, *b.LoadScore)
	require.True(t, b.Overloaded)
	require.Equal(t, 0.3, *b.P99)
	require.Len(t, b.Terms, 1)
	require.Equal(t, 1, b.Rollout.Synced)
	require.Equal(t, 1, b.Rollout.Nacked)
	require.Len(t, b.Trend, 1)

	svcs, _ = src.Services(ctx)
	require.Len(t, svcs[1].Trend, 1, "no new point without a new evaluation")
	for i := 1; i <= 3; i++ {
		fs.tick = t0.Add(time.Duration(i) * time.Second)
		svcs, _ = src.Services(ctx)
	}
	require.Len(t, svcs[1].Trend, 2, "the trend is bounded")

	ins, err := src.Instances(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, "bad", ins[1].NackError)

	bad, err := enginesource.New(enginesource.Options{Scores: fs, Ledger: fakeLedger{err: errors.New("down")}})
	require.NoError(t, err)
	_, err = bad.Services(ctx)
	require.Error(t, err)
	_, err = enginesource.New(enginesource.Options{})
	require.Error(t, err)
}

type flakyLedger struct{ fail string }

func (f flakyLedger) Instances(_ context.Context, svc string) ([]distribution.Instance, error) {
	if svc == f.fail {
		return nil, errors.New("connection refused")
	}
	return []distribution.Instance{{Instance: "i1", State: distribution.StateSynced}}, nil
}

// TestServicesNamesTheLedgerWhenItFails: the overview's banner says the
// delivery ledger failed (not only "connection refused" under "metrics"),
// and the scores come back sorted with the counts read before the failure.
func TestServicesNamesTheLedgerWhenItFails(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fs := &fakeScores{tick: t0, scores: []loadscore.Score{
		{Key: signals.Key{Service: "c"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "a"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "b"}, Known: true, Value: 0.1},
	}}
	src, err := enginesource.New(enginesource.Options{Scores: fs, Ledger: flakyLedger{fail: "b"}})
	require.NoError(t, err)
	svcs, err := src.Services(context.Background())
	require.ErrorContains(t, err, "delivery ledger")
	require.ErrorContains(t, err, `"b"`)
	require.ErrorContains(t, err, "connection refused")
	require.Len(t, svcs, 3, "the scores are still shown")
	require.Equal(t, []string{"a", "b", "c"}, []string{svcs[0].Name, svcs[1].Name, svcs[2].Name})
	require.Equal(t, 1, svcs[0].Rollout.Synced)
	require.NotNil(t, svcs[2].LoadScore)
}

// TestServicesRolloutIsUnknownWhenTheLedgerWasNotRead: the services whose
// ledger read failed (the one that failed and those after it) and, without
// a ledger, every service have an unknown rollout, not zero instances; the
// counts read before the failure are known.
func TestServicesRolloutIsUnknownWhenTheLedgerWasNotRead(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fs := &fakeScores{tick: t0, scores: []loadscore.Score{
		{Key: signals.Key{Service: "c"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "a"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "b"}, Known: true, Value: 0.1},
	}}
	src, err := enginesource.New(enginesource.Options{Scores: fs, Ledger: flakyLedger{fail: "b"}})
	require.NoError(t, err)
	svcs, err := src.Services(context.Background())
	require.Error(t, err)
	require.Equal(t, model.Rollout{Synced: 1}, svcs[0].Rollout)
	require.Equal(t, model.Rollout{Unknown: true}, svcs[1].Rollout, "its read failed")
	require.Equal(t, model.Rollout{Unknown: true}, svcs[2].Rollout, "not read after the failure")

	src, err = enginesource.New(enginesource.Options{Scores: fs})
	require.NoError(t, err)
	svcs, err = src.Services(context.Background())
	require.NoError(t, err)
	for _, s := range svcs {
		require.True(t, s.Rollout.Unknown, "%s: no ledger configured", s.Name)
	}

	src, err = enginesource.New(enginesource.Options{Scores: fs, Ledger: fakeLedger{}})
	require.NoError(t, err)
	svcs, err = src.Services(context.Background())
	require.NoError(t, err)
	require.Equal(t, model.Rollout{}, svcs[0].Rollout, "a ledger without instances of the service: known, none")
}
