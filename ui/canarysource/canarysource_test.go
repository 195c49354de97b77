package canarysource_test

import (
	"context"
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

// TestOnEmbeddedNATS stages, promotes and aborts canaries on a real
// JetStream KV bucket (embedded server on a random loopback port).
func TestOnEmbeddedNATS(t *testing.T) {
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

	rs := func(rate float64) *rules.Ruleset {
		return &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/api"}, RateLimit: &rules.RateLimit{Rate: rate}}}}
	}
	c, err := src.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Nil(t, c)

	require.ErrorIs(t, src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 2, Ruleset: rs(100)}, 0), model.ErrInvalid)
	require.NoError(t, src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 2, Ruleset: rs(100)}, 25))
	c, err = src.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, &model.CanaryState{Version: 2, Percent: 25}, c)

	n, err := src.Promote(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	latest, err := pub.Latest(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), latest.Version)

	require.NoError(t, src.StartCanary(ctx, versioning.Version{Service: "checkout", Number: 3, Ruleset: rs(50)}, 10))
	n, err = src.Abort(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	c, err = src.Canary(ctx, "checkout")
	require.NoError(t, err)
	require.Nil(t, c)
	latest, err = pub.Latest(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, int64(2), latest.Version, "an aborted canary never reaches stable")
}
