package embedded

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/signalstest"
	"governor.dev/governor/sdk/clock"
)

// typicalTarget renders the exposition of a typical SDK instance: the
// signalstest default profile (two classes, two histograms) on 8 routes.
func typicalTarget(b *testing.B) []byte {
	clk := clock.NewFake(t0)
	p := signalstest.DefaultProfile("checkout")
	p.Routes = []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h"}
	svc := signalstest.NewService(p, clk)
	clk.Advance(time.Minute)
	rec := httptest.NewRecorder()
	svc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(b, http.StatusOK, rec.Code)
	return rec.Body.Bytes()
}

// BenchmarkScrapeIngest measures one scrape of a typical SDK target over
// loopback HTTP plus parsing and appending into the TSDB.
func BenchmarkScrapeIngest(b *testing.B) {
	body := typicalTarget(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	db := openDB(b)
	clk := clock.NewFake(t0)
	s, err := NewScraper(db, ScraperOptions{Clock: clk})
	require.NoError(b, err)
	ls, err := Target{URL: srv.URL}.targetLabels()
	require.NoError(b, err)
	l := newLoop(s, srv.URL, ls)
	ctx := context.Background()
	st, _ := l.scrape(ctx, clk.Now())
	require.Equal(b, HealthUp, st.Health, st.LastError)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clk.Advance(15 * time.Second)
		st, _ = l.scrape(ctx, clk.Now())
		if st.Health != HealthUp {
			b.Fatal(st.LastError)
		}
	}
	b.ReportMetric(float64(st.Samples), "samples/scrape")
}

// BenchmarkAppendParallel measures parse-and-append alone, many targets at
// once (each goroutine is one target with its own series cache).
func BenchmarkAppendParallel(b *testing.B) {
	body := typicalTarget(b)
	db := openDB(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		ls, err := Target{URL: fmt.Sprintf("http://10.0.0.1:%d/metrics", 1000+n.Add(1))}.targetLabels()
		if err != nil {
			b.Fatal(err)
		}
		c := newSeriesCache(ls, 0)
		ts := t0.UnixMilli()
		for pb.Next() {
			ts += 15_000
			app := db.Appender(context.Background())
			if _, err := c.append(app, body, "text/plain; version=0.0.4", ts); err != nil {
				b.Fatal(err)
			}
			c.staleMissing(app, ts)
			if err := app.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReadFleet measures one signals.Reader.Read of every default
// signal per instance over a fleet of 100 services × 4 instances held in the
// embedded store (five scrapes each, 15 s apart).
func BenchmarkReadFleet(b *testing.B) {
	const services, instances, scrapes = 100, 4, 5
	db := openDB(b)
	clk := clock.NewFake(t0)
	type target struct {
		svc   *signalstest.Service
		cache *seriesCache
	}
	var targets []target
	for s := range services {
		for i := range instances {
			p := signalstest.DefaultProfile(fmt.Sprintf("svc-%03d", s))
			p.Routes = []string{"/a", "/b"}
			ls, err := Target{URL: fmt.Sprintf("http://10.1.%d.%d:8080/metrics", s, i)}.targetLabels()
			require.NoError(b, err)
			targets = append(targets, target{signalstest.NewService(p, clk), newSeriesCache(ls, 0)})
		}
	}
	for n := range scrapes {
		if n > 0 {
			clk.Advance(15 * time.Second)
		}
		app := db.Appender(context.Background())
		for _, tg := range targets {
			rec := httptest.NewRecorder()
			tg.svc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			_, err := tg.cache.append(app, rec.Body.Bytes(), rec.Header().Get("Content-Type"), clk.Now().UnixMilli())
			require.NoError(b, err)
		}
		require.NoError(b, app.Commit())
	}
	r, err := signals.NewReader(db, signals.ReaderOptions{})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		snap, err := r.Read(context.Background(), clk.Now(), signals.PerInstance)
		if err != nil || len(snap.Entries) != services*instances {
			b.Fatal(err, len(snap.Entries))
		}
	}
	b.ReportMetric(services*instances, "instances/op")
}
