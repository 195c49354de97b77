package engineclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/ui/engineclient"
)

// The engine answers errors as {"error": "..."}; the banner shows its
// message, not the JSON around it.
func TestEngineErrorShowsTheEngineMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"not ready: rules store unavailable"}` + "\n"))
	}))
	t.Cleanup(srv.Close)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = c.Services(context.Background())
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.ErrorContains(t, err, "503 Service Unavailable: not ready: rules store unavailable")
	require.NotContains(t, err.Error(), `{"error"`)

	// A proxy's plain text is shown as it is.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream connect error", http.StatusBadGateway)
	}))
	t.Cleanup(srv2.Close)
	c, err = engineclient.New(engineclient.Options{BaseURL: srv2.URL})
	require.NoError(t, err)
	_, err = c.Services(context.Background())
	require.ErrorContains(t, err, "502 Bad Gateway: upstream connect error")
}

// An answer larger than the limit fails saying so, not with a JSON
// decoder's "unexpected EOF" on the cut body.
func TestOversizedAnswerFailsSayingSo(t *testing.T) {
	body := `{"services":[` + strings.Repeat(`{"service":"a","score":null},`, 200) + `{"service":"b"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, MaxResponseBytes: 1024})
	require.NoError(t, err)
	_, err = c.Services(context.Background())
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.ErrorContains(t, err, "larger than 1024 bytes")

	c, err = engineclient.New(engineclient.Options{BaseURL: srv.URL})
	require.NoError(t, err)
	svcs, err := c.Services(context.Background())
	require.NoError(t, err)
	require.Len(t, svcs, 201)
}

// A password in the engine's URL (basic auth through a proxy) never shows
// in an error, which the pages show and the logs keep.
func TestBaseURLPasswordStaysOutOfErrors(t *testing.T) {
	_, err := engineclient.New(engineclient.Options{BaseURL: "ftp://ui:s3cret@engine:9090"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		require.True(t, ok)
		require.Equal(t, "ui", u)
		require.Equal(t, "s3cret", p)
		http.Error(w, "nope", http.StatusForbidden)
	}))
	addr := strings.TrimPrefix(srv.URL, "http://")
	c, err := engineclient.New(engineclient.Options{BaseURL: "http://ui:s3cret@" + addr})
	require.NoError(t, err)
	_, err = c.Services(context.Background())
	require.ErrorContains(t, err, "403")
	require.NotContains(t, err.Error(), "s3cret")
	srv.Close()
	_, err = c.Services(context.Background())
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.NotContains(t, err.Error(), "s3cret")
}

// A caller's http.Client without a timeout does not let a hung engine
// hang a page: Options.Timeout bounds every request, and a request cut by
// it holds the engine off like a client timeout.
func TestRequestsAreBoundedWhateverTheHTTPClient(t *testing.T) {
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
	c, err := engineclient.New(engineclient.Options{BaseURL: srv.URL, Client: &http.Client{}, Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	_, err = c.Services(context.Background())
	require.ErrorIs(t, err, engineclient.ErrEngine)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = c.Services(context.Background())
	require.ErrorContains(t, err, "not asked again")
	require.Equal(t, int64(1), hits.Load())

	_, err = engineclient.New(engineclient.Options{BaseURL: srv.URL, Timeout: -time.Second})
	require.ErrorContains(t, err, "Timeout")
}
