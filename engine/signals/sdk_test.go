package signals_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/signals/promapi"
	"governor.dev/governor/engine/signals/signalstest"
	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/rules"
)

// sdkService is a service governed by the real SDK middleware, with the
// process collector, under a steady paced load of two classes and 10 %
// errors.
func sdkService(t *testing.T) *httptest.Server {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	g, err := governor.New(governor.Options{Service: "checkout", Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(g.Close)
	require.NoError(t, g.Apply(&rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
		Name:        "api",
		Match:       rules.Match{PathPrefix: "/api"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 64},
		Shedding:    &rules.Shedding{},
	}}}, 1))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/api/", httpgov.Middleware(g, httpgov.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond) // the service's work
		if r.URL.Query().Has("fail") {
			http.Error(w, "failed", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond) // 4 × 50/s
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				u := srv.URL + "/api/x"
				if (i+w)%10 == 0 {
					u += "?fail=1"
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				req.Header.Set("X-Traffic-Priority", []string{"critical", "batch"}[i%2])
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() }) // before srv.Close
	return srv
}

// TestSDKSignalsMatchPrometheus scrapes a service that uses the real SDK
// middleware with a real Prometheus and with the embedded store, and checks
// that every default signal has the same status from both and, when known,
// the same value within scrape-timing tolerance: the two scrape at
// different instants of a live process whose load is not perfectly steady,
// so their 10 s windows differ by up to one scrape at each end. The p99 of
// live latency is decided by a handful of outliers and is only checked to
// be known from both; exact agreement of every quantile is shown on
// synthetic series by TestEmbeddedMatchesPrometheus.
func TestSDKSignalsMatchPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	const interval = time.Second
	srv := sdkService(t)
	u, _ := url.Parse(srv.URL)
	promURL := signalstest.StartPrometheus(t, embedded.DefaultJob, interval, u.Host)

	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	sc, err := embedded.NewScraper(db, embedded.ScraperOptions{Interval: interval})
	require.NoError(t, err)
	require.NoError(t, sc.SetTargets([]embedded.Target{{URL: srv.URL + "/metrics"}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	prom, err := promapi.New(promapi.Options{Address: promURL, Timeout: 5 * time.Second})
	require.NoError(t, err)
	opts := signals.ReaderOptions{Window: 10 * time.Second, MaxAge: 10 * time.Second}
	fromProm, err := signals.NewReader(prom, opts)
	require.NoError(t, err)
	fromEmb, err := signals.NewReader(db, opts)
	require.NoError(t, err)

	full := `count_over_time(governor_sdk_rules_version[12s]) >= 11`
	ready := func(src signals.Source) bool {
		res, err := src.Query(context.Background(), full, time.Now())
		return err == nil && len(res.Samples) == 1
	}
	deadline := time.Now().Add(45 * time.Second)
	for !ready(prom) || !ready(db) {
		require.True(t, time.Now().Before(deadline), "stores did not fill within 45s; targets: %+v", sc.Targets())
		time.Sleep(200 * time.Millisecond) // polling external processes for readiness
	}

	at := time.Now().Add(-interval / 2)
	p, e := readBoth(t, fromProm, at), readBoth(t, fromEmb, at)
	key := signals.Key{Service: "checkout"}
	require.Contains(t, p, key)
	require.Contains(t, e, key)
	// Tolerances: relative for rates, quantiles and resources; absolute for
	// ratios and the sampled in-flight gauge.
	tol := map[signals.Signal]struct{ rel, abs float64 }{
		signals.RequestRate:   {rel: 0.15},
		signals.ErrorRatio:    {abs: 0.03},
		signals.ShedRatio:     {abs: 0.02},
		signals.LatencyP50:    {rel: 0.3},
		signals.LatencyP99:    {abs: 10},
		signals.QueueDelayP99: {abs: 10},
		signals.InFlight:      {abs: 4},
		signals.Limit:         {abs: 0},
		signals.CPU:           {rel: 0.5},
		signals.Memory:        {rel: 0.2},
	}
	var report strings.Builder
	for _, s := range signals.All {
		pv, ev := p[key].Get(s), e[key].Get(s)
		fmt.Fprintf(&report, "%-16s prometheus %-28s embedded %s\n", s, pv, ev)
		require.Equal(t, pv.Status, ev.Status, "%s: prometheus %s, embedded %s", s, pv, ev)
		if !pv.Known() {
			continue
		}
		d := math.Abs(pv.V - ev.V)
		ok := d <= tol[s].abs || d <= tol[s].rel*math.Max(math.Abs(pv.V), math.Abs(ev.V))
		require.True(t, ok, "%s: prometheus %g, embedded %g", s, pv.V, ev.V)
	}
	t.Logf("SDK service signals at %s:\n%s", at.Format(time.RFC3339Nano), report.String())
	// What the load and rules make certain, whichever store answers.
	for _, x := range []map[signals.Key]*signals.Entry{p, e} {
		// The generator paces 200/s at best; a loaded machine delivers less.
		require.True(t, x[key].Get(signals.RequestRate).V > 20 && x[key].Get(signals.RequestRate).V < 230, x[key].Get(signals.RequestRate))
		require.InDelta(t, 0.1, x[key].Get(signals.ErrorRatio).V, 0.04)
		require.Equal(t, 64.0, x[key].Get(signals.Limit).V)
		require.True(t, x[key].Get(signals.CPU).Known())
		require.Greater(t, x[key].Get(signals.Memory).V, 1e6)
	}
}
