package signalsource_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/ui/signalsource"
)

type fakeSource struct {
	mu      sync.Mutex
	queries []string
	ranges  []signals.Range
	fail    bool
}

func (f *fakeSource) Query(context.Context, string, time.Time) (*signals.Result, error) {
	return nil, errors.New("not used")
}

func (f *fakeSource) QueryRange(_ context.Context, q string, r signals.Range) (*signals.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	f.ranges = append(f.ranges, r)
	if f.fail {
		return nil, errors.New("prometheus: connection refused")
	}
	return &signals.Result{Series: []signals.Series{
		{Labels: signals.Labels{"service": "checkout"}, Points: []signals.Point{{T: r.Start, V: 0.25}, {T: r.End, V: 0.5}}},
		{Labels: signals.Labels{"service": "other"}, Points: []signals.Point{{T: r.Start, V: 9}}},
	}}, nil
}

func TestCharts(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	src := &fakeSource{}
	s, err := signalsource.New(signalsource.Options{Source: src, Clock: clk, Points: 61})
	require.NoError(t, err)
	charts, err := s.Charts(context.Background(), "checkout", time.Hour)
	require.NoError(t, err)
	require.Len(t, charts, 7)
	require.Equal(t, "p99 latency", charts[3].Title)
	require.Equal(t, "ms", charts[3].Unit)
	require.Equal(t, 250.0, charts[3].Points[0].Value, "seconds shown as milliseconds")
	require.Len(t, charts[3].Points, 2, "other services' series are left out")
	require.Equal(t, 50.0, charts[1].Points[1].Value, "ratios shown as percent")
	require.Equal(t, 100.0, charts[1].Max)
	require.Equal(t, time.Minute, src.ranges[0].Step)
	require.Equal(t, clk.Now(), src.ranges[0].End)
	require.True(t, strings.Contains(src.queries[0], `service="checkout"`), src.queries[0])

	src.fail = true
	charts, err = s.Charts(context.Background(), "checkout", 15*time.Minute)
	require.Error(t, err)
	require.Len(t, charts, 7)
	require.Empty(t, charts[0].Points)
	_, err = signalsource.New(signalsource.Options{})
	require.Error(t, err)
}
