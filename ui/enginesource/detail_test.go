package enginesource_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/ui/enginesource"
	"governor.dev/governor/ui/model"
)

type fakeRelay []distribution.Undeliverable

func (f fakeRelay) Undeliverable(_ context.Context, service string) ([]distribution.Undeliverable, error) {
	var out []distribution.Undeliverable
	for _, u := range f {
		if service == "" || u.Service == service {
			out = append(out, u)
		}
	}
	return out, nil
}

func TestServiceDetail(t *testing.T) {
	relay := fakeRelay{{OutboxID: 1, Service: "checkout", Version: 12, Reason: "too_large", Size: 1_200_000, Limit: 1_000_000},
		{OutboxID: 2, Service: "payments", Version: 4, Reason: "too_large", Size: 2_000_000, Limit: 1_000_000}}
	levels := func(svc string) (model.LatencyLevels, bool) {
		return model.LatencyLevels{Warn: 0.25, Critical: 0.5, Source: "learned"}, svc == "checkout"
	}
	src, err := enginesource.New(enginesource.Options{Scores: &fakeScores{}, Levels: levels, Relay: relay})
	require.NoError(t, err)
	ctx := context.Background()
	d, err := src.ServiceDetail(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, &model.LatencyLevels{Warn: 0.25, Critical: 0.5, Source: "learned"}, d.P99)
	require.Len(t, d.Undeliverable, 1)
	require.Equal(t, "v12 cannot be delivered: 1.2 MB > 1.0 MB max payload", d.Undeliverable[0].String())
	d, err = src.ServiceDetail(ctx, "search")
	require.NoError(t, err)
	require.Nil(t, d.P99, "no levels: none drawn")
	require.Empty(t, d.Undeliverable)

	bare, err := enginesource.New(enginesource.Options{Scores: &fakeScores{}})
	require.NoError(t, err)
	d, err = bare.ServiceDetail(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, model.ServiceDetail{}, d)
}
