package engineclient_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/ui/engineclient"
)

// TestHungEngineIsNotAskedAgainUntilHoldOffEnds: a page reads the engine
// several times (a service page: services, ledger, detail); against an
// engine that accepts connections but does not answer, each read waited
// for the whole client timeout, so the page took three timeouts to show
// its banners. After one timeout the reads fail at once, saying when the
// engine timed out, until Options.HoldOff has passed; then the engine is
// asked again.
func TestHungEngineIsNotAskedAgainUntilHoldOffEnds(t *testing.T) {
	var hits atomic.Int64
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, Client: &http.Client{Timeout: 50 * time.Millisecond},
		HoldOff: 10 * time.Second, Now: clock})
	require.NoError(t, err)
	ctx := context.Background()

	_, err = c.Services(ctx)
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the banner says it timed out")
	require.Equal(t, int64(1), hits.Load())

	advance(3 * time.Second)
	_, err = c.Instances(ctx, "checkout")
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "timed out at 2026-01-01T00:00:00Z, not asked again for 7s")
	_, err = c.ServiceDetail(ctx, "checkout")
	require.ErrorIs(t, err, engineclient.ErrEngine)
	_, err = c.Services(ctx)
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.Equal(t, int64(1), hits.Load(), "a hung engine is not waited for again")

	advance(7 * time.Second)
	_, err = c.Services(ctx)
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.Equal(t, int64(2), hits.Load(), "asked again after the hold-off")
}

// TestCallerCancelAndRefusedConnectionsAreNotHeldOff: only the engine's
// timeouts hold later requests off. A request whose caller went away (a
// closed browser tab) says nothing of the engine, and a refused connection
// fails fast anyway, so the next request asks the engine at once.
func TestCallerCancelAndRefusedConnectionsAreNotHeldOff(t *testing.T) {
	var hits atomic.Int64
	release, arrived := make(chan struct{}), make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte(`{"services":[]}`))
	}))
	t.Cleanup(srv.Close)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, MaxAge: -1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err = c.Services(ctx)
	require.ErrorIs(t, err, context.Canceled)
	close(release)
	_, err = c.Services(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(2), hits.Load())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	down, err := engineclient.New(engineclient.Options{BaseURL: "http://" + addr})
	require.NoError(t, err)
	for range 2 {
		_, err = down.Services(context.Background())
		require.ErrorIs(t, err, engineclient.ErrEngine)
		require.NotContains(t, err.Error(), "not asked again")
	}
}
