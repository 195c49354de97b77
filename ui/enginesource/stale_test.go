package enginesource_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/enginesource"
)

// An evaluator that has stopped evaluating (its reads of the metrics
// source fail) keeps its last scores; they are not shown as live once its
// last evaluation is older than MaxAge, as the separate UI process
// (engineclient) does not show them either.
func TestStaleScoresAreNotShownAsLive(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	fs := &fakeScores{tick: t0, scores: []loadscore.Score{{Key: signals.Key{Service: "a"}, At: t0, Value: 0.9, Known: true, Overloaded: true}}}
	src, err := enginesource.New(enginesource.Options{Scores: fs, MaxAge: 2 * time.Minute, Clock: clk})
	require.NoError(t, err)
	svcs, err := src.Services(context.Background())
	require.NoError(t, err)
	require.Len(t, svcs, 1)

	clk.Advance(3 * time.Minute)
	svcs, err = src.Services(context.Background())
	require.ErrorIs(t, err, enginesource.ErrStale)
	require.ErrorContains(t, err, "at 2026-01-01T00:00:00Z, 3m0s ago")
	require.Empty(t, svcs)

	// Not evaluated yet: not stale.
	fs.tick = time.Time{}
	_, err = src.Services(context.Background())
	require.NoError(t, err)

	_, err = enginesource.New(enginesource.Options{Scores: fs, MaxAge: -time.Second})
	require.NoError(t, err, "negative: never")
}
