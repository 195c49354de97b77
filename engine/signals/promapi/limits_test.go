package promapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
)

// bigVector is a valid vector answer of about n bytes.
func bigVector(n int) string {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"metric":{"service":"svc-` + strings.Repeat("x", 40) + `"},"value":[1767225600,"1"]}`)
	}
	b.WriteString(`]}}`)
	return b.String()
}

func TestResponseLargerThanLimitFailsClearlyAndIsNotRetried(t *testing.T) {
	f := &fakeAPI{replies: []reply{{200, bigVector(8 << 10), false}}}
	c, waits := newClient(t, f, Options{MaxResponseBytes: 4 << 10, Retries: 2})
	_, err := c.Query(context.Background(), "up", at)
	require.ErrorIs(t, err, signals.ErrQuery)
	require.ErrorIs(t, err, ErrResponseTooLarge)
	require.ErrorContains(t, err, "4096 bytes")
	require.Equal(t, 1, f.count())
	require.Empty(t, *waits)
}

// A gzip answer is limited by its decoded size: a small compressed body
// must not decode into an answer larger than the limit.
func TestGzipResponseIsLimitedByItsDecodedSize(t *testing.T) {
	body := bigVector(64 << 10)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte(body))
	require.NoError(t, zw.Close())
	require.Less(t, zb.Len(), 16<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Contains(t, r.Header.Get("Accept-Encoding"), "gzip")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(zb.Bytes())
	}))
	t.Cleanup(srv.Close)
	c, err := New(Options{Address: srv.URL, MaxResponseBytes: 32 << 10, Retries: -1})
	require.NoError(t, err)
	_, err = c.Query(context.Background(), "up", at)
	require.ErrorIs(t, err, ErrResponseTooLarge)

	c, err = New(Options{Address: srv.URL, Retries: -1})
	require.NoError(t, err)
	res, err := c.Query(context.Background(), "up", at)
	require.NoError(t, err)
	require.NotEmpty(t, res.Samples)
}

// A 5xx from Prometheus or a proxy in front of Thanos says why in its body;
// the error keeps it (shortened) instead of only "server error: 503".
func TestServerErrorKeepsTheBackendMessage(t *testing.T) {
	f := &fakeAPI{replies: []reply{{503, "no StoreAPIs matched for this time range\n", false}}}
	c, _ := newClient(t, f, Options{Retries: -1})
	_, err := c.Query(context.Background(), "up", at)
	require.ErrorIs(t, err, signals.ErrUnavailable)
	require.ErrorContains(t, err, "503")
	require.ErrorContains(t, err, "no StoreAPIs matched for this time range")

	f = &fakeAPI{replies: []reply{{502, strings.Repeat("<html>", 1000), false}}}
	c, _ = newClient(t, f, Options{Retries: -1})
	_, err = c.Query(context.Background(), "up", at)
	require.Less(t, len(err.Error()), 600, "a long body is cut")
}

// retryAfterAPI answers 503 or 429 with a Retry-After header once, then vectorBody.
func retryAfterAPI(status int, retryAfter string) *fakeAPIWithHeader {
	return &fakeAPIWithHeader{status: status, header: retryAfter}
}

type fakeAPIWithHeader struct {
	status int
	header string
	calls  atomic.Int32
}

func (f *fakeAPIWithHeader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.calls.Add(1) == 1 {
		w.Header().Set("Retry-After", f.header)
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte("overloaded"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(vectorBody))
}

func TestRetryAfterIsHonored(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		status    int
		header    string
		wantWaits []time.Duration
		wantErr   string
		wantCalls int
	}{
		{"seconds above back-off", 503, "3", []time.Duration{3 * time.Second}, "", 2},
		{"below back-off keeps back-off", 429, "0", []time.Duration{750 * time.Millisecond}, "", 2},
		{"http date", 503, now.Add(4 * time.Second).Format(http.TimeFormat), []time.Duration{4 * time.Second}, "", 2},
		{"beyond max back-off gives up", 503, "120", nil, "retry after 2m0s", 1},
		{"garbage ignored", 503, "soon", []time.Duration{750 * time.Millisecond}, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := retryAfterAPI(tt.status, tt.header)
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			c, err := New(Options{Address: srv.URL, Backoff: time.Second, MaxBackoff: 10 * time.Second, Clock: clock.NewFake(now)})
			require.NoError(t, err)
			var waits []time.Duration
			c.wait = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }
			c.jitter = func() float64 { return 0.5 }
			_, err = c.Query(context.Background(), "up", at)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, signals.ErrUnavailable)
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.wantWaits, waits)
			require.Equal(t, int32(tt.wantCalls), f.calls.Load())
		})
	}
}
