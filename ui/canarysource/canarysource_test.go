package canarysource_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/internal/natsembed"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/watch"
	"governor.dev/governor/ui/canarysource"
	"governor.dev/governor/ui/model"
)

// newSource is a Source on a real JetStream KV bucket (embedded server on a
// random loopback port).
func newSource(t *testing.T) (*canarysource.Source, *distribution.Publisher) {
	t.Helper()
	ctx := context.Background()
	srv, err := natsembed.Start(natsembed.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	nc, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	names, err := watch.NewNames("uitest")
	require.NoError(t, err)
	pub, err := distribution.NewPublisher(ctx, js, distribution.PublisherOptions{Names: names, Storage: jetstream.MemoryStorage, Timeout: 2 * time.Second})
	require.NoError(t, err)
	src, err := canarysource.New(pub)
	require.NoError(t, err)
	return src, pub
}

func rs(rate float64) *rules.Ruleset {
	return &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/api"}, RateLimit: &rules.RateLimit{Rate: rate}}}}
}

// TestOnEmbeddedNATS stages, promotes and aborts canaries on a real
// JetStream KV bucket.
func TestOnEmbeddedNATS(t *testing.T) {
	ctx := context.Background()
	src, pub := newSource(t)
	c, err := src.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Nil(t, c)

	require.ErrorIs(t, src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 2, Ruleset: rs(100)}, 0), model.ErrInvalid)
	require.NoError(t, src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 2, Ruleset: rs(100)}, 25))
	c, err = src.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, &model.CanaryState{Version: 2, Percent: 25}, c)

	n, err := src.Promote(ctx, "checkout", 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	latest, err := pub.Latest(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), latest.Version)

	require.NoError(t, src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 3, Ruleset: rs(50)}, 10))
	n, err = src.Abort(ctx, "checkout", 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	c, err = src.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Nil(t, c)
	latest, err = pub.Latest(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), latest.Version, "an aborted canary never reaches stable")
}

// TestStartCanaryOfTheRunningVersionChangesItsShare: staging the running
// canary's version again with another share widens (or narrows) it, the
// 10 % to 50 % step of a progressive rollout, although the publisher's
// StartCanary refuses a version staged before; other content under that
// number, or an older version, is still refused.
func TestStartCanaryOfTheRunningVersionChangesItsShare(t *testing.T) {
	ctx := context.Background()
	src, _ := newSource(t)
	v2 := versioning.Version{Service: "checkout", Number: 2, Ruleset: rs(100)}
	require.NoError(t, src.StartCanary(ctx, v2, 10))
	require.NoError(t, src.StartCanary(ctx, v2, 50))
	c, err := src.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, &model.CanaryState{Version: 2, Percent: 50}, c)

	err = src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 2, Ruleset: rs(999)}, 20)
	require.ErrorIs(t, err, model.ErrConflict, "v2 with other content")
	err = src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 1, Ruleset: rs(50)}, 20)
	require.ErrorIs(t, err, model.ErrInvalid, "v1 while v2 runs")
	require.Contains(t, err.Error(), "canary version 1")
	c, err = src.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, &model.CanaryState{Version: 2, Percent: 50}, c)
}

// TestMistakesBecomeModelErrors: the publisher's refusals reach the UI as
// the model's errors (so as 404, 409, 422, never 500), with the
// publisher's reason kept; promote and abort act only on the version the
// person saw; a share that is NaN or infinite is refused naming percent.
func TestMistakesBecomeModelErrors(t *testing.T) {
	ctx := context.Background()
	src, pub := newSource(t)
	_, err := src.Promote(ctx, "checkout", 2)
	require.ErrorIs(t, err, model.ErrNotFound, "nothing staged")
	_, err = src.Abort(ctx, "checkout", 2)
	require.ErrorIs(t, err, model.ErrNotFound, "nothing staged")

	for _, pct := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		err = src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 2, Ruleset: rs(100)}, pct)
		require.ErrorIs(t, err, model.ErrInvalid)
		require.Contains(t, err.Error(), "percent:")
	}

	require.NoError(t, src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 3, Ruleset: rs(100)}, 10))
	_, err = src.Promote(ctx, "checkout", 2)
	require.ErrorIs(t, err, model.ErrConflict, "v3 is staged, not v2")
	require.Contains(t, err.Error(), "canary version 2")
	require.Contains(t, err.Error(), "version 3 is staged")
	_, err = src.Abort(ctx, "checkout", 2)
	require.ErrorIs(t, err, model.ErrConflict)
	latest, err := pub.Latest(ctx, "checkout")
	require.NoError(t, err)
	require.Nil(t, latest, "nothing promoted")

	n, err := src.Promote(ctx, "checkout", 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	err = src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 2, Ruleset: rs(100)}, 10)
	require.ErrorIs(t, err, model.ErrInvalid, "v2 while v3 is stable")
	require.Contains(t, err.Error(), "stable version 3")
}
