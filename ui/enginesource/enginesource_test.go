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
	if svc != "" {
		return f.ins[svc], f.err
	}
	var all []distribution.Instance
	for name, ins := range f.ins {
		for _, in := range ins {
			in.Service = name
			all = append(all, in)
		}
	}
	return all, f.err
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

// countingLedger answers every read with one synced instance per service
// asked for (all of a, b and c for ""), or fails, and counts the reads.
type countingLedger struct {
	reads int
	err   error
}

func (f *countingLedger) Instances(_ context.Context, svc string) ([]distribution.Instance, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if svc != "" {
		return []distribution.Instance{{Service: svc, Instance: "i1", State: distribution.StateSynced}}, nil
	}
	var all []distribution.Instance
	for _, name := range []string{"a", "b", "c"} {
		all = append(all, distribution.Instance{Service: name, Instance: "i1", State: distribution.StateSynced})
	}
	return all, nil
}

// TestServicesReadTheLedgerOnce: the overview, rendered and streamed every
// two seconds to each viewer, reads the delivery ledger once for every
// service (it read it once per service: hundreds of queries each time).
func TestServicesReadTheLedgerOnce(t *testing.T) {
	fs := &fakeScores{tick: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), scores: []loadscore.Score{
		{Key: signals.Key{Service: "c"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "a"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "b"}, Known: true, Value: 0.1},
	}}
	led := &countingLedger{}
	src, err := enginesource.New(enginesource.Options{Scores: fs, Ledger: led})
	require.NoError(t, err)
	svcs, err := src.Services(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, led.reads)
	for _, s := range svcs {
		require.Equal(t, model.Rollout{Synced: 1}, s.Rollout, s.Name)
	}
}

// TestServicesNamesTheLedgerWhenItFails: the overview's banner says the
// delivery ledger failed (not only "connection refused" under "metrics"),
// the scores come back sorted, and every rollout is unknown, not zero
// instances.
func TestServicesNamesTheLedgerWhenItFails(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fs := &fakeScores{tick: t0, scores: []loadscore.Score{
		{Key: signals.Key{Service: "c"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "a"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "b"}, Known: true, Value: 0.1},
	}}
	src, err := enginesource.New(enginesource.Options{Scores: fs, Ledger: &countingLedger{err: errors.New("connection refused")}})
	require.NoError(t, err)
	svcs, err := src.Services(context.Background())
	require.ErrorContains(t, err, "delivery ledger")
	require.ErrorContains(t, err, "connection refused")
	require.Len(t, svcs, 3, "the scores are still shown")
	require.Equal(t, []string{"a", "b", "c"}, []string{svcs[0].Name, svcs[1].Name, svcs[2].Name})
	for _, s := range svcs {
		require.Equal(t, model.Rollout{Unknown: true}, s.Rollout, s.Name)
	}
	require.NotNil(t, svcs[2].LoadScore)
}

// TestServicesRolloutIsUnknownWithoutALedger: without a ledger every
// service's rollout is unknown, not zero instances.
func TestServicesRolloutIsUnknownWithoutALedger(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fs := &fakeScores{tick: t0, scores: []loadscore.Score{
		{Key: signals.Key{Service: "c"}, Known: true, Value: 0.1},
		{Key: signals.Key{Service: "a"}, Known: true, Value: 0.1},
	}}
	var svcs []model.ServiceStatus
	src, err := enginesource.New(enginesource.Options{Scores: fs})
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

// TestUnpublishedInstancesAreNotCountedAsSynced: instances the ledger
// finds UNPUBLISHED (no rule version published for them) are counted as
// Unpublished in the rollout, never as Synced.
func TestUnpublishedInstancesAreNotCountedAsSynced(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fs := &fakeScores{tick: t0, scores: []loadscore.Score{{Key: signals.Key{Service: "orders"}, At: t0, Value: 0.2, Known: true}}}
	led := fakeLedger{ins: map[string][]distribution.Instance{"orders": {
		{Service: "orders", Instance: "i1", State: distribution.StateUnpublished},
		{Service: "orders", Instance: "i2", State: distribution.StateSynced, Running: 2, Target: 2}}}}
	src, err := enginesource.New(enginesource.Options{Scores: fs, Ledger: led})
	require.NoError(t, err)
	svcs, err := src.Services(context.Background())
	require.NoError(t, err)
	require.Len(t, svcs, 1)
	require.Equal(t, model.Rollout{Synced: 1, Unpublished: 1}, svcs[0].Rollout)
}
