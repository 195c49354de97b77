package promapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
)

// reply is one scripted answer of the fake query API.
type reply struct {
	status int
	body   string
	block  bool // hang until the request is canceled
}

// fakeAPI serves scripted replies in order (repeating the last) and records
// the requests' paths and forms.
type fakeAPI struct {
	mu      sync.Mutex
	replies []reply
	calls   int
	paths   []string
	forms   []map[string][]string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	rp := f.replies[min(f.calls, len(f.replies)-1)]
	f.calls++
	f.paths = append(f.paths, r.URL.Path)
	f.forms = append(f.forms, r.Form)
	f.mu.Unlock()
	if rp.block {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rp.status)
	_, _ = w.Write([]byte(rp.body))
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

const (
	vectorBody = `{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"service":"a","instance":"i1"},"value":[1767225600.5,"1.5"]},
		{"metric":{"service":"b"},"value":[1767225600.5,"NaN"]}]},
		"warnings":["partial response: store 2 unreachable"],"infos":["counter-like metric"]}`
	matrixBody = `{"status":"success","data":{"resultType":"matrix","result":[
		{"metric":{"service":"a"},"values":[[1767225600,"1"],[1767225615,"2"]]}]}}`
	scalarBody   = `{"status":"success","data":{"resultType":"scalar","result":[1767225600,"42"]}}`
	badDataBody  = `{"status":"error","errorType":"bad_data","error":"parse error at char 5: unclosed left parenthesis"}`
	timeoutBody  = `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`
	overloadBody = `slow down`
)

func newClient(t *testing.T, f *fakeAPI, opts Options) (*Client, *[]time.Duration) {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	opts.Address = srv.URL
	c, err := New(opts)
	require.NoError(t, err)
	var waits []time.Duration
	c.wait = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	c.jitter = func() float64 { return 0.5 }
	return c, &waits
}

var at = time.Unix(1767225600, 500e6)

func TestQueryVectorKeepsWarnings(t *testing.T) {
	f := &fakeAPI{replies: []reply{{200, vectorBody, false}}}
	c, _ := newClient(t, f, Options{Timeout: 7 * time.Second})
	res, err := c.Query(context.Background(), `up`, at)
	require.NoError(t, err)
	require.Equal(t, signals.TypeVector, res.Type)
	require.Equal(t, []string{"partial response: store 2 unreachable", "info: counter-like metric"}, res.Warnings)
	require.Len(t, res.Samples, 2)
	require.Equal(t, signals.Labels{"service": "a", "instance": "i1"}, res.Samples[0].Labels)
	require.Equal(t, 1.5, res.Samples[0].V)
	require.True(t, res.Samples[0].T.Equal(at))
	require.NotEqual(t, res.Samples[1].V, res.Samples[1].V, "NaN passes through; the reader classifies it")
	require.Equal(t, "/api/v1/query", f.paths[0])
	require.Equal(t, "up", f.forms[0]["query"][0])
	require.Equal(t, "7s", f.forms[0]["timeout"][0])
}

func TestResultTypes(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		rng   bool
		check func(*testing.T, *signals.Result)
	}{
		{"matrix", matrixBody, true, func(t *testing.T, r *signals.Result) {
			require.Equal(t, signals.TypeMatrix, r.Type)
			require.Len(t, r.Series, 1)
			require.Equal(t, []signals.Point{{T: time.Unix(1767225600, 0), V: 1}, {T: time.Unix(1767225615, 0), V: 2}}, r.Series[0].Points)
		}},
		{"scalar", scalarBody, false, func(t *testing.T, r *signals.Result) {
			require.Equal(t, signals.TypeScalar, r.Type)
			require.Equal(t, 42.0, r.Samples[0].V)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newClient(t, &fakeAPI{replies: []reply{{200, tt.body, false}}}, Options{})
			var res *signals.Result
			var err error
			if tt.rng {
				res, err = c.QueryRange(context.Background(), "x", signals.Range{Start: at, End: at.Add(time.Minute), Step: 15 * time.Second})
			} else {
				res, err = c.Query(context.Background(), "x", at)
			}
			require.NoError(t, err)
			tt.check(t, res)
		})
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name      string
		replies   []reply
		retries   int
		wantErr   error
		wantCalls int
		wantWaits []time.Duration
	}{
		{"5xx then success", []reply{{503, "unavailable", false}, {502, "bad gateway", false}, {200, vectorBody, false}}, 2, nil, 3,
			[]time.Duration{750 * time.Millisecond, 1500 * time.Millisecond}},
		{"server timeout then success", []reply{{503, timeoutBody, false}, {200, vectorBody, false}}, 2, nil, 2,
			[]time.Duration{750 * time.Millisecond}},
		{"429 then success", []reply{{429, overloadBody, false}, {200, vectorBody, false}}, 2, nil, 2,
			[]time.Duration{750 * time.Millisecond}},
		{"exhausted", []reply{{500, "boom", false}}, 3, signals.ErrUnavailable, 4,
			[]time.Duration{750 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond}}, // capped at 2s, jittered to 3/4
		{"bad query is not retried", []reply{{400, badDataBody, false}}, 3, signals.ErrQuery, 1, nil},
		{"422 execution error is not retried", []reply{{422, `{"status":"error","errorType":"execution","error":"many-to-many matching"}`, false}}, 3, signals.ErrQuery, 1, nil},
		{"no retries", []reply{{500, "boom", false}}, -1, signals.ErrUnavailable, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAPI{replies: tt.replies}
			reg := prometheus.NewRegistry()
			c, waits := newClient(t, f, Options{Retries: tt.retries, Backoff: time.Second, MaxBackoff: 2 * time.Second, Registerer: reg})
			_, err := c.Query(context.Background(), "up", at)
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.wantErr)
			}
			require.Equal(t, tt.wantCalls, f.count())
			require.Equal(t, tt.wantWaits, *waits)
			require.Equal(t, float64(len(tt.wantWaits)), testutil.ToFloat64(c.attempts.WithLabelValues("retried")))
		})
	}
}

// An attempt that hangs is cut off by the per-attempt timeout and retried.
func TestAttemptTimeout(t *testing.T) {
	f := &fakeAPI{replies: []reply{{block: true}, {200, vectorBody, false}}}
	c, waits := newClient(t, f, Options{Timeout: 20 * time.Millisecond, Retries: 1})
	res, err := c.Query(context.Background(), "up", at)
	require.NoError(t, err)
	require.Len(t, res.Samples, 2)
	require.Equal(t, 2, f.count())
	require.Len(t, *waits, 1)
}

func TestCanceledDuringBackoff(t *testing.T) {
	f := &fakeAPI{replies: []reply{{503, "x", false}}}
	c, _ := newClient(t, f, Options{Retries: 5})
	ctx, cancel := context.WithCancel(context.Background())
	c.wait = func(ctx context.Context, _ time.Duration) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}
	_, err := c.Query(ctx, "up", at)
	require.ErrorIs(t, err, signals.ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, f.count())
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no address", Options{}, "address"},
		{"no scheme", Options{Address: "prometheus:9090"}, "address"},
		{"negative timeout", Options{Address: "http://p:9090", Timeout: -1}, "must not be negative"},
		{"max below base", Options{Address: "http://p:9090", Backoff: time.Second, MaxBackoff: time.Millisecond}, "max_backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			require.ErrorIs(t, err, signals.ErrInvalidOption)
			require.ErrorContains(t, err, tt.want)
		})
	}
	c, err := New(Options{Address: "http://p:9090"})
	require.NoError(t, err)
	_, err = c.QueryRange(context.Background(), "up", signals.Range{Start: at, End: at})
	require.ErrorIs(t, err, signals.ErrInvalidOption)
}

// The timeout sent with a query is one Prometheus parses: it refuses a
// fraction such as "1.5s" (bad_data, so every query would fail), so a
// fractional attempt timeout is sent cut to whole seconds, or whole
// milliseconds below a second.
func TestServerTimeoutIsAPrometheusDuration(t *testing.T) {
	tests := []struct {
		timeout time.Duration
		want    string
	}{
		{1500 * time.Millisecond, "1s"},
		{90*time.Second + 250*time.Millisecond, "1m30s"},
		{500 * time.Millisecond, "500ms"},
		{250*time.Millisecond + 500*time.Microsecond, "250ms"},
		{10 * time.Second, "10s"},
	}
	for _, tt := range tests {
		f := &fakeAPI{replies: []reply{{200, vectorBody, false}}}
		c, _ := newClient(t, f, Options{Timeout: tt.timeout})
		_, err := c.Query(context.Background(), "up", at)
		require.NoError(t, err)
		got := f.forms[0]["timeout"][0]
		require.Equal(t, tt.want, got, "timeout %s", tt.timeout)
		_, err = model.ParseDuration(got)
		require.NoError(t, err, "timeout %s", tt.timeout)
	}
}
