package embedded

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/sdk/clock"
)

// exposition is an HTTP target whose body the test changes between scrapes.
type exposition struct {
	mu     sync.Mutex
	body   string
	status int
}

func (e *exposition) set(status int, body string) {
	e.mu.Lock()
	e.status, e.body = status, body
	e.mu.Unlock()
}

func (e *exposition) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	status, body := e.status, e.body
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// harness runs a scraper over a DB on a fake clock and delivers every
// scrape's status on a channel.
type harness struct {
	t       *testing.T
	db      *DB
	clk     *clock.Fake
	s       *Scraper
	reg     *prometheus.Registry
	scrapes chan TargetStatus
}

func newHarness(t *testing.T, opts ScraperOptions) *harness {
	return newHarnessOn(t, openDB(t), opts)
}

// newHarnessOn is newHarness scraping into db.
func newHarnessOn(t *testing.T, db *DB, opts ScraperOptions) *harness {
	h := &harness{t: t, db: db, clk: clock.NewFake(t0), reg: prometheus.NewRegistry(), scrapes: make(chan TargetStatus, 16)}
	opts.Clock, opts.Registerer = h.clk, h.reg
	opts.OnScrape = func(st TargetStatus) { h.scrapes <- st }
	s, err := NewScraper(h.db, opts)
	require.NoError(t, err)
	h.s = s
	return h
}

func (h *harness) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.s.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		require.NoError(h.t, <-done)
	})
}

// next waits for the next scrape report (a channel receive, no timing).
func (h *harness) next() TargetStatus {
	h.t.Helper()
	return <-h.scrapes
}

func (h *harness) query(q string) []signals.Sample {
	h.t.Helper()
	res, err := h.db.Query(context.Background(), q, h.clk.Now())
	require.NoError(h.t, err)
	return res.Samples
}

func (h *harness) value(q string) float64 {
	h.t.Helper()
	got := h.query(q)
	require.Len(h.t, got, 1, q)
	return got[0].V
}

func hostOf(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Host
}

const sdkExposition = `# HELP governor_sdk_inflight Requests in progress.
# TYPE governor_sdk_inflight gauge
governor_sdk_inflight{route="/a",service="checkout"} 7
# TYPE governor_sdk_requests_total counter
governor_sdk_requests_total{class="critical",outcome="admitted",route="/a",service="checkout"} 100
governor_sdk_requests_total{class="batch",outcome="shed",route="/a",service="checkout",job="app"} 5
`

func TestScrapeStoresSamplesWithTargetLabels(t *testing.T) {
	h := newHarness(t, ScraperOptions{Interval: 15 * time.Second, Timeout: 10 * time.Second})
	target := &exposition{}
	target.set(200, sdkExposition)
	srv := serve(t, target)
	require.NoError(t, h.s.SetTargets([]Target{{URL: srv.URL + "/metrics", Job: "svc", Labels: map[string]string{"zone": "a"}}}))
	h.run()

	st := h.next()
	require.Equal(t, HealthUp, st.Health, st.LastError)
	require.Equal(t, 3, st.Samples)
	require.True(t, st.LastScrape.Equal(t0))

	inst := hostOf(t, srv.URL)
	got := h.query(`governor_sdk_inflight`)
	require.Len(t, got, 1)
	require.Equal(t, signals.Labels{"__name__": "governor_sdk_inflight", "route": "/a", "service": "checkout", "job": "svc", "instance": inst, "zone": "a"}, got[0].Labels)
	require.Equal(t, 7.0, got[0].V)
	// A scraped label colliding with a target label is kept as exported_<name>.
	got = h.query(`governor_sdk_requests_total{outcome="shed"}`)
	require.Len(t, got, 1)
	require.Equal(t, "svc", got[0].Labels["job"])
	require.Equal(t, "app", got[0].Labels["exported_job"])
	require.Equal(t, 1.0, h.value(`up{job="svc"}`))
	require.Equal(t, 3.0, h.value(`scrape_samples_scraped`))
	require.Equal(t, 1.0, testutil.ToFloat64(h.s.metrics.successes))

	// Second scrape one interval later: (250-100)/15s.
	target.set(200, `governor_sdk_requests_total{class="critical",outcome="admitted",route="/a",service="checkout"} 250`+"\n")
	h.clk.Advance(15 * time.Second)
	require.Equal(t, HealthUp, h.next().Health)
	require.InDelta(t, 10.0, h.value(`irate(governor_sdk_requests_total{outcome="admitted"}[1m])`), 1e-9)
	// Series absent from the second scrape were marked stale at once.
	require.Empty(t, h.query(`governor_sdk_inflight`))
	require.Empty(t, h.query(`governor_sdk_requests_total{outcome="shed"}`))
}

func TestFailedScrapeMarksDownAndStale(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"http error", 500, "boom", "unexpected HTTP status: 500 Internal Server Error"},
		{"garbage", 200, "this is {{{ not metrics\n", "exposition parse error"},
		{"bad value", 200, "metric_a 1\nmetric_b notanumber\n", "exposition parse error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ScraperOptions{Interval: 15 * time.Second, Timeout: 5 * time.Second})
			target := &exposition{}
			target.set(200, sdkExposition)
			srv := serve(t, target)
			require.NoError(t, h.s.SetTargets([]Target{{URL: srv.URL + "/metrics"}}))
			h.run()
			require.Equal(t, HealthUp, h.next().Health)
			require.Len(t, h.query(`governor_sdk_inflight`), 1)

			target.set(tt.status, tt.body)
			h.clk.Advance(15 * time.Second)
			st := h.next()
			require.Equal(t, HealthDown, st.Health)
			require.Contains(t, st.LastError, tt.wantErr)
			require.Equal(t, 0, st.Samples)
			require.Equal(t, st, h.s.Targets()[0])
			require.Equal(t, 0.0, h.value(`up`))
			require.Empty(t, h.query(`governor_sdk_inflight`), "every series of the failed target is stale")
			require.Empty(t, h.query(`metric_a`), "nothing of a half-parsed exposition is stored")
			require.Equal(t, 1.0, testutil.ToFloat64(h.s.metrics.failures))
			require.NoError(t, testutil.GatherAndCompare(h.reg, strings.NewReader(`
# HELP governor_signals_targets Scrape targets of the embedded store by health.
# TYPE governor_signals_targets gauge
governor_signals_targets{health="down"} 1
governor_signals_targets{health="unknown"} 0
governor_signals_targets{health="up"} 0
`), "governor_signals_targets"))
		})
	}
}

// A target that hangs is cut off by the timeout on the injected clock and
// marked down; meanwhile the other target is scraped and stored normally.
func TestBlockingTargetDoesNotStallOthers(t *testing.T) {
	h := newHarness(t, ScraperOptions{Interval: 15 * time.Second, Timeout: 10 * time.Second})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slow := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before slow.Close
	fast := &exposition{}
	fast.set(200, sdkExposition)
	fastSrv := serve(t, fast)
	require.NoError(t, h.s.SetTargets([]Target{{URL: slow.URL + "/metrics"}, {URL: fastSrv.URL + "/metrics"}}))
	h.run()

	<-entered
	st := h.next()
	require.Equal(t, fastSrv.URL+"/metrics", st.URL, "the fast target reports while the slow one hangs")
	require.Equal(t, HealthUp, st.Health)
	require.Equal(t, 7.0, h.value(`governor_sdk_inflight`))
	for _, ts := range h.s.Targets() {
		if ts.URL == slow.URL+"/metrics" {
			require.Equal(t, HealthUnknown, ts.Health)
		}
	}

	h.clk.Advance(10 * time.Second) // the slow target's timeout, before the next interval
	st = h.next()
	require.Equal(t, slow.URL+"/metrics", st.URL)
	require.Equal(t, HealthDown, st.Health)
	require.Contains(t, st.LastError, "scrape timed out after 10s")
	require.Equal(t, 10*time.Second, st.LastDuration)
	require.Equal(t, 0.0, h.value(`up{instance="`+hostOf(t, slow.URL)+`"}`))
	require.Equal(t, 1.0, h.value(`up{instance="`+hostOf(t, fastSrv.URL)+`"}`))
}

func TestSetTargetsReplacesAndMarksRemovedStale(t *testing.T) {
	h := newHarness(t, ScraperOptions{Interval: 15 * time.Second, Timeout: 5 * time.Second})
	a, b := &exposition{}, &exposition{}
	a.set(200, "metric_a 1\n")
	b.set(200, "metric_b 2\n")
	sa, sb := serve(t, a), serve(t, b)
	require.NoError(t, h.s.SetTargets([]Target{{URL: sa.URL}}))
	h.run()
	require.Equal(t, HealthUp, h.next().Health)

	h.clk.Advance(time.Second)
	require.NoError(t, h.s.SetTargets([]Target{{URL: sb.URL}}))
	st := h.next()
	require.Equal(t, sb.URL, st.URL)
	require.Len(t, h.s.Targets(), 1)
	require.Empty(t, h.query(`metric_a`), "a removed target's series end with staleness markers")
	require.Empty(t, h.query(`up{instance="`+hostOf(t, sa.URL)+`"}`))
	require.Equal(t, 2.0, h.value(`metric_b`))
}

func TestSetTargetsValidation(t *testing.T) {
	h := newHarness(t, ScraperOptions{})
	require.NoError(t, h.s.SetTargets([]Target{{URL: "http://127.0.0.1:1/metrics"}}))
	tests := []struct {
		name    string
		targets []Target
		want    string
	}{
		{"bad scheme", []Target{{URL: "ftp://x/metrics"}}, "targets[0].url: scheme must be http or https"},
		{"no host", []Target{{URL: "http:///metrics"}}, "targets[0].url: missing host"},
		{"unparsable", []Target{{URL: "http://[::1"}}, "targets[0].url"},
		{"job in labels", []Target{{URL: "http://a/m", Labels: map[string]string{"job": "x"}}}, "targets[0].labels.job"},
		{"reserved", []Target{{URL: "http://a/m", Labels: map[string]string{"__x": "y"}}}, "targets[0].labels.__x: names starting with __ are reserved"},
		{"empty value", []Target{{URL: "http://a/m", Labels: map[string]string{"zone": ""}}}, "targets[0].labels.zone"},
		{"duplicate", []Target{{URL: "http://a/m"}, {URL: "http://b/m"}, {URL: "http://a/m"}}, "targets[2]: duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.s.SetTargets(tt.targets)
			require.ErrorIs(t, err, signals.ErrInvalidOption)
			require.ErrorContains(t, err, tt.want)
			ts := h.s.Targets()
			require.Len(t, ts, 1, "a refused set changes nothing")
			require.Equal(t, "http://127.0.0.1:1/metrics", ts[0].URL)
		})
	}
}

func TestScraperOptionsValidation(t *testing.T) {
	db := openDB(t)
	for _, o := range []ScraperOptions{{Interval: -1}, {Timeout: -1}, {Interval: time.Second, Timeout: 2 * time.Second}, {BodyLimit: -1}} {
		_, err := NewScraper(db, o)
		require.ErrorIs(t, err, signals.ErrInvalidOption)
	}
	_, err := NewScraper(nil, ScraperOptions{})
	require.ErrorIs(t, err, signals.ErrInvalidOption)
}

func TestScrapeLimits(t *testing.T) {
	tests := []struct {
		name string
		opts ScraperOptions
		want string
	}{
		{"sample limit", ScraperOptions{SampleLimit: 2}, "sample limit exceeded: more than 2 samples"},
		{"body limit", ScraperOptions{BodyLimit: 10}, "body exceeds limit of 10 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			target := &exposition{}
			target.set(200, "a 1\nb 2\nc 3\n")
			require.NoError(t, h.s.SetTargets([]Target{{URL: serve(t, target).URL}}))
			h.run()
			st := h.next()
			require.Equal(t, HealthDown, st.Health)
			require.Contains(t, st.LastError, tt.want)
			require.Empty(t, h.query(`a`))
		})
	}
}

func TestStatusHandler(t *testing.T) {
	h := newHarness(t, ScraperOptions{})
	target := &exposition{}
	target.set(500, "")
	srv := serve(t, target)
	require.NoError(t, h.s.SetTargets([]Target{{URL: srv.URL, Job: "j"}}))
	h.run()
	h.next()

	rec := httptest.NewRecorder()
	h.s.StatusHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/targets", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var body struct{ Targets []TargetStatus }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Len(t, body.Targets, 1)
	require.Equal(t, HealthDown, body.Targets[0].Health)
	require.Equal(t, "j", body.Targets[0].Labels["job"])
	require.Contains(t, body.Targets[0].LastError, "500")

	rec = httptest.NewRecorder()
	h.s.StatusHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/targets", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

// Run may be called again once it has returned (a scraper stopped and
// resumed, say on a change of leader): every target is scraped again, and
// the restarted loops do not panic closing the first run's channels.
func TestScraperRunsAgainAfterReturning(t *testing.T) {
	e := &exposition{}
	e.set(200, sdkExposition)
	srv := serve(t, e)
	h := newHarness(t, ScraperOptions{})
	require.NoError(t, h.s.SetTargets([]Target{{URL: srv.URL}}))
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- h.s.Run(ctx) }()
		require.Equal(t, HealthUp, h.next().Health)
		cancel()
		require.NoError(t, <-done)
	}
}

// A target whose label takes a new value every scrape (a request ID) meets
// the DB's series limit: its new series are dropped and counted, the target
// stays up and its other series keep their samples.
func TestScrapePastTheSeriesLimitDropsNewSeriesOnly(t *testing.T) {
	db, err := Open(Options{MaxSeries: 6}) // up, scrape_duration_seconds, scrape_samples_scraped and three
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	h := newHarnessOn(t, db, ScraperOptions{Interval: 15 * time.Second, Timeout: 10 * time.Second})
	target := &exposition{}
	target.set(200, "a 1\nb 1\nreq{id=\"1\"} 1\n")
	srv := serve(t, target)
	require.NoError(t, h.s.SetTargets([]Target{{URL: srv.URL + "/metrics"}}))
	h.run()
	st := h.next()
	require.Equal(t, HealthUp, st.Health, st.LastError)
	require.Equal(t, 3, st.Samples)

	target.set(200, "a 2\nb 2\nreq{id=\"2\"} 1\n")
	h.clk.Advance(15 * time.Second)
	st = h.next()
	require.Equal(t, HealthUp, st.Health, st.LastError)
	require.Equal(t, 2, st.Samples)
	require.Equal(t, 1, st.Dropped, "the new series is dropped and counted")
	require.Equal(t, 2.0, h.value(`a`))
	require.Empty(t, h.query(`req{id="2"}`))
}
