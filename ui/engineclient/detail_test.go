package engineclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	engineapi "governor.dev/governor/engine/api"
	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/distribution"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/ui/engineclient"
	"governor.dev/governor/ui/model"
)

type relay []distribution.Undeliverable

func (r relay) Undeliverable(context.Context, string) ([]distribution.Undeliverable, error) {
	return r, nil
}

// The client reads the p99 levels and undeliverable versions from the real
// engine API handler.
func TestServiceDetailAgainstEngineAPI(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := &evals{tick: t0, scores: []loadscore.Score{{Key: signals.Key{Service: "checkout"}, At: t0, Value: 0.5, Known: true}}}
	rl := relay{{OutboxID: 3, Service: "checkout", Version: 12, Reason: "too_large", Size: 1_200_000, Limit: 1_000_000, At: t0}}
	levels := func(svc string) (engineapi.LatencyLevels, bool) {
		return engineapi.LatencyLevels{Warn: 0.3, Critical: 0.6, Source: "configured"}, svc == "checkout"
	}
	srv := httptest.NewServer(engineapi.Handler(engineapi.Options{Evaluations: ev, Versions: st, Levels: levels, Relay: rl}))
	t.Cleanup(srv.Close)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL})
	require.NoError(t, err)

	d, err := c.ServiceDetail(ctx, "checkout")
	require.NoError(t, err)
	require.Equal(t, &model.LatencyLevels{Warn: 0.3, Critical: 0.6, Source: "configured"}, d.P99)
	require.Equal(t, []model.Undeliverable{{Service: "checkout", Version: 12, Reason: "too_large", Size: 1_200_000, Limit: 1_000_000, At: t0}}, d.Undeliverable)

	d, err = c.ServiceDetail(ctx, "unknown")
	require.NoError(t, err, "a service the engine does not know has no detail")
	require.Equal(t, model.ServiceDetail{}, d)

	srv.Close()
	_, err = c.ServiceDetail(ctx, "checkout")
	require.True(t, errors.Is(err, engineclient.ErrEngine), "an engine that does not answer is an error: %v", err)
}

// Whatever the engine answers, ServiceDetail returns a detail or an
// ErrEngine error, never a p99 level without a positive warn level.
func FuzzServiceDetail(f *testing.F) {
	for _, s := range []string{`{}`, `{"latency_levels":{"warn":0.2,"critical":0.4,"source":"learned"}}`, `{"latency_levels":{"warn":0}}`,
		`{"latency_levels":{"warn":"x"}}`, `{"undeliverable":[{"version":3,"size":2000000,"limit":1000000}]}`, `{"undeliverable":{}}`, `[`, `null`,
		`{"alert_levels":[{"signal":"error_ratio","in_force":true,"warn":0.01,"critical":0.05,"warn_from":"floor","learned":true,"baseline":null,"samples":3}]}`,
		`{"alert_levels":{}}`} {
		f.Add(s)
	}
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	f.Cleanup(srv.Close)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b string) {
		body.Store(b)
		d, err := c.ServiceDetail(context.Background(), "checkout")
		if err != nil {
			if !errors.Is(err, engineclient.ErrEngine) {
				t.Fatalf("error not ErrEngine: %v", err)
			}
			return
		}
		if d.P99 != nil && !(d.P99.Warn > 0) {
			t.Fatalf("p99 level without a warn level: %+v", d.P99)
		}
	})
}
