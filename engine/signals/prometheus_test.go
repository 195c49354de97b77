package signals_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
	"governor.dev/governor/engine/signals/promapi"
	"governor.dev/governor/engine/signals/signalstest"
	"governor.dev/governor/sdk/clock"
)

// TestEmbeddedMatchesPrometheus runs a real Prometheus (the Debian package)
// and the embedded store side by side, both scraping the same three
// instances every second, and checks that every default signal query gives
// the same value from both, and the hand-computed value, within
// scrape-timing tolerance.
func TestEmbeddedMatchesPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	const interval = time.Second
	fl := startFleet(t, clock.Real{})
	promURL := signalstest.StartPrometheus(t, embedded.DefaultJob, interval, fl.hosts()...)

	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	sc, err := embedded.NewScraper(db, embedded.ScraperOptions{Interval: interval})
	require.NoError(t, err)
	require.NoError(t, sc.SetTargets(fl.targets()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	prom, err := promapi.New(promapi.Options{Address: promURL, Timeout: 5 * time.Second})
	require.NoError(t, err)
	// A 5 s window over 1 s scrapes: at least four samples per rate.
	opts := signals.ReaderOptions{Window: 5 * time.Second, MaxAge: 10 * time.Second}
	fromProm, err := signals.NewReader(prom, opts)
	require.NoError(t, err)
	fromEmb, err := signals.NewReader(db, opts)
	require.NoError(t, err)

	// Wait (polling both stores, not timing anything) until each has a full
	// window of samples for every instance.
	full := fmt.Sprintf(`count_over_time(governor_sdk_rules_version[%s]) >= 6`, 7*interval)
	ready := func(src signals.Source) bool {
		res, err := src.Query(context.Background(), full, time.Now())
		return err == nil && len(res.Samples) == len(fl.servers)
	}
	deadline := time.Now().Add(45 * time.Second)
	for !ready(prom) || !ready(db) {
		require.True(t, time.Now().Before(deadline), "stores did not fill within 45s; targets: %+v", sc.Targets())
		time.Sleep(200 * time.Millisecond) // polling external processes for readiness
	}

	at := time.Now().Add(-interval / 2)
	p := readBoth(t, fromProm, at)
	e := readBoth(t, fromEmb, at)
	require.Len(t, p, 5)
	require.Len(t, e, 5)
	var report strings.Builder
	for _, x := range expectations(fl.hosts()) {
		pv, ev := p[x.key].Get(x.sig), e[x.key].Get(x.sig)
		require.True(t, pv.Known(), "prometheus %s %s: %s", x.key, x.sig, pv)
		require.True(t, ev.Known(), "embedded %s %s: %s", x.key, x.sig, ev)
		fmt.Fprintf(&report, "%-28s %-16s want %-10.4g prometheus %-10.4g embedded %-10.4g\n", x.key, x.sig, x.want, pv.V, ev.V)
		// Rates over a 5 s window move by up to one scrape's worth when a
		// scrape lands late; 5 % covers it. Gauges match exactly.
		require.True(t, near(pv.V, ev.V, 0.05), "%s %s: prometheus %g, embedded %g", x.key, x.sig, pv.V, ev.V)
		require.True(t, near(x.want, ev.V, 0.05), "%s %s: want %g, embedded %g", x.key, x.sig, x.want, ev.V)
	}
	for _, k := range []signals.Key{{Service: "checkout"}, {Service: "search"}} {
		for class, pv := range p[k].ShedByClass {
			ev := e[k].ShedByClass[class]
			require.True(t, near(pv.V, ev.V, 0.05), "%s shed %s: prometheus %s, embedded %s", k, class, pv, ev)
		}
		require.Equal(t, len(p[k].ShedByClass), len(e[k].ShedByClass))
	}
	t.Logf("signals at %s:\n%s", at.Format(time.RFC3339Nano), report.String())
}
