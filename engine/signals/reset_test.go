package signals_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/signals/signalstest"
	"governor.dev/governor/sdk/clock"
)

// An instance restarts between scrapes: its counters start again from zero.
// The request rate stays positive and close to the true rate instead of
// going negative or spiking. By hand, for rate r = 1000/s, scrapes at 15,
// 30, 45, 60 s and a restart at 35 s, the 1m window at 60 s sees
// 15r, 30r | 10r, 25r: increases 15r + 10r (from zero) + 15r = 40r over the
// 45 s sampled, extrapolated by 15 s to the window start (the zero crossing
// is 16.9 s away): 40r × 60/45 / 60 s = 0.889r. The 5r counted between the
// last scrape and the restart is lost, as in Prometheus.
func TestCounterResetThroughScrapes(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := signalstest.DefaultProfile("checkout")
	var current atomic.Pointer[signalstest.Service]
	current.Store(signalstest.NewService(p, clk))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	defer srv.Close()

	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	defer db.Close()
	scrapes := make(chan embedded.TargetStatus, 1)
	sc, err := embedded.NewScraper(db, embedded.ScraperOptions{Interval: 15 * time.Second, Clock: clk, OnScrape: func(st embedded.TargetStatus) { scrapes <- st }})
	require.NoError(t, err)
	require.NoError(t, sc.SetTargets([]embedded.Target{{URL: srv.URL}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sc.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	<-scrapes // t = 0
	for _, step := range []time.Duration{15, 15, 5, 10, 15} {
		if step == 5 { // t = 35 s: restart
			clk.Advance(5 * time.Second)
			current.Store(signalstest.NewService(p, clk))
			continue
		}
		clk.Advance(step * time.Second)
		require.Equal(t, embedded.HealthUp, (<-scrapes).Health)
	}
	r, err := signals.NewReader(db, signals.ReaderOptions{})
	require.NoError(t, err)
	snap, err := r.Read(context.Background(), clk.Now(), signals.PerService)
	require.NoError(t, err)
	key := signals.Key{Service: "checkout"}
	rate := snap.Get(key, signals.RequestRate)
	require.True(t, rate.Known(), rate.String())
	require.InDelta(t, 1000*40.0/45, rate.V, 1e-6)
	require.InDelta(t, 0.15, snap.Get(key, signals.ShedRatio).V, 1e-9, "ratios of reset counters stay exact")
	require.InDelta(t, 0.02, snap.Get(key, signals.ErrorRatio).V, 1e-9)
}
