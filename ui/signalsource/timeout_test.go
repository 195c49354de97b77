package signalsource_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/model"
	"governor.dev/governor/ui/signalsource"
)

// hungSource is a metrics source that does not answer: each query waits
// until its context ends. A query without a deadline would wait forever;
// it fails at once instead, so that the test shows the missing bound
// rather than hanging.
type hungSource struct{ calls, unbounded atomic.Int64 }

func (h *hungSource) wait(ctx context.Context) error {
	h.calls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		h.unbounded.Add(1)
		return errors.New("query without a deadline: a hung source would hang the page")
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hungSource) Query(ctx context.Context, _ string, _ time.Time) (*signals.Result, error) {
	return nil, h.wait(ctx)
}

func (h *hungSource) QueryRange(ctx context.Context, _ string, _ signals.Range) (*signals.Result, error) {
	return nil, h.wait(ctx)
}

// A hung metrics source costs a service page at most Options.Timeout, and
// every chart says it took too long; the charts are asked at once, so one
// slow query does not take the others' time.
func TestHungSourceCostsAPageAtMostTheTimeout(t *testing.T) {
	src := &hungSource{}
	s, err := signalsource.New(signalsource.Options{Source: src, Clock: clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)),
		Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	charts, err := s.Charts(context.Background(), "checkout", time.Hour)
	require.Error(t, err)
	require.Len(t, charts, 7)
	for _, c := range charts {
		require.Equal(t, "the metrics source took too long", c.NoData, c.Title)
	}
	series, err := s.ServiceCharts(context.Background(), "checkout", time.Hour)
	require.Error(t, err)
	for _, c := range series {
		require.Equal(t, "the metrics source took too long", c.NoData, c.Title)
	}
	require.Zero(t, src.unbounded.Load())
	require.Equal(t, int64(10), src.calls.Load())

	_, err = signalsource.New(signalsource.Options{Source: src, Timeout: -time.Second})
	require.ErrorIs(t, err, signalsource.ErrInvalid)
}

// The overview's metrics read is bounded too: a hung source leaves the
// golden signals unknown and says so, with the services.
func TestHungSourceCostsTheOverviewAtMostTheTimeout(t *testing.T) {
	src := &hungSource{}
	base := &model.StaticFleet{}
	base.Set([]model.ServiceStatus{{Name: "checkout"}}, nil)
	rd, err := signals.NewReader(src, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	en, err := signalsource.Enrich(base, rd, nil)
	require.NoError(t, err)
	en.WithTimeout(50 * time.Millisecond)
	svcs, err := en.Services(context.Background())
	require.Error(t, err)
	require.Len(t, svcs, 1)
	require.Nil(t, svcs[0].RequestRate)
	require.Zero(t, src.unbounded.Load())
}

// A query cut by the deadline is reported as too slow, even when the
// source also calls itself unavailable (promapi wraps both).
func TestDeadlineReadsAsTooSlow(t *testing.T) {
	src := &routedSource{fail: errors.Join(signals.ErrUnavailable, context.DeadlineExceeded)}
	s, err := signalsource.New(signalsource.Options{Source: src})
	require.NoError(t, err)
	charts, _ := s.Charts(context.Background(), "checkout", time.Hour)
	require.Equal(t, "the metrics source took too long", charts[0].NoData)
}
