package embedded

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func openDB(t testing.TB) *DB {
	t.Helper()
	db, err := Open(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

type at struct {
	sec int
	v   float64
}

func put(t testing.TB, db *DB, lset labels.Labels, samples ...at) {
	t.Helper()
	app := db.Appender(context.Background())
	for _, s := range samples {
		_, err := app.Append(0, lset, t0.Add(time.Duration(s.sec)*time.Second).UnixMilli(), s.v)
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
}

func instant(t testing.TB, db *DB, q string, sec int) []signals.Sample {
	t.Helper()
	res, err := db.Query(context.Background(), q, t0.Add(time.Duration(sec)*time.Second))
	require.NoError(t, err)
	require.Equal(t, signals.TypeVector, res.Type)
	return res.Samples
}

func TestDBInstantAndRange(t *testing.T) {
	db := openDB(t)
	put(t, db, labels.FromStrings("__name__", "g", "service", "a"), at{0, 1}, at{10, 2}, at{20, 3})

	got := instant(t, db, "g", 15)
	require.Len(t, got, 1)
	require.Equal(t, signals.Labels{"__name__": "g", "service": "a"}, got[0].Labels)
	require.Equal(t, 2.0, got[0].V)
	require.True(t, got[0].T.Equal(t0.Add(15*time.Second)))

	res, err := db.QueryRange(context.Background(), "g * 2", signals.Range{Start: t0, End: t0.Add(20 * time.Second), Step: 10 * time.Second})
	require.NoError(t, err)
	require.Equal(t, signals.TypeMatrix, res.Type)
	require.Len(t, res.Series, 1)
	var vs []float64
	for _, p := range res.Series[0].Points {
		vs = append(vs, p.V)
	}
	require.Equal(t, []float64{2, 4, 6}, vs)

	res, err = db.Query(context.Background(), "scalar(g) + 1", t0.Add(20*time.Second))
	require.NoError(t, err)
	require.Equal(t, signals.TypeScalar, res.Type)
	require.Equal(t, 4.0, res.Samples[0].V)

	res, err = db.Query(context.Background(), `"hello"`, t0)
	require.NoError(t, err)
	require.Equal(t, signals.TypeString, res.Type)
	require.Equal(t, "hello", res.String)
}

// A counter that resets mid-window: rate() treats the drop as a restart
// from zero. Samples 0,10,20,30 | 5,15 at 10 s steps increase by 30 + 5 + 10
// = 45 over the 50 s sampled; the first sample is 0, so there is no
// extrapolation before it, and rate divides by the 60 s range: 0.75/s, the
// same as for the monotonic counter 0,10,20,30,35,45.
func TestDBCounterReset(t *testing.T) {
	db := openDB(t)
	put(t, db, labels.FromStrings("__name__", "c_total", "k", "reset"), at{0, 0}, at{10, 10}, at{20, 20}, at{30, 30}, at{40, 5}, at{50, 15})
	put(t, db, labels.FromStrings("__name__", "c_total", "k", "mono"), at{0, 0}, at{10, 10}, at{20, 20}, at{30, 30}, at{40, 35}, at{50, 45})
	got := instant(t, db, "rate(c_total[1m])", 50)
	require.Len(t, got, 2)
	for _, s := range got {
		require.InDelta(t, 0.75, s.V, 1e-9, s.Labels.String())
	}
}

func TestDBStalenessMarkerEndsSeries(t *testing.T) {
	db := openDB(t)
	put(t, db, labels.FromStrings("__name__", "g", "k", "gone"), at{0, 1}, at{10, 1}, at{20, math.Float64frombits(value.StaleNaN)})
	put(t, db, labels.FromStrings("__name__", "g", "k", "kept"), at{0, 1}, at{10, 1})

	require.Len(t, instant(t, db, "g", 15), 2)
	got := instant(t, db, "g", 25)
	require.Len(t, got, 1, "the marked series ends at its marker; the other lives on for the 5m lookback")
	require.Equal(t, "kept", got[0].Labels["k"])
}

func TestDBQueryErrors(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"bad promql", func() error { _, err := db.Query(ctx, "sum(", t0); return err }, signals.ErrQuery},
		{"zero step", func() error {
			_, err := db.QueryRange(ctx, "up", signals.Range{Start: t0, End: t0, Step: 0})
			return err
		}, signals.ErrInvalidOption},
		{"inverted range", func() error {
			_, err := db.QueryRange(ctx, "up", signals.Range{Start: t0.Add(time.Minute), End: t0, Step: time.Second})
			return err
		}, signals.ErrInvalidOption},
		{"canceled", func() error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			_, err := db.Query(c, "up", t0)
			return err
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.run(), tt.want)
		})
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{{Retention: -1}, {LookbackDelta: -time.Second}, {QueryTimeout: -1}, {MaxSamples: -1}} {
		_, err := Open(o)
		require.ErrorIs(t, err, signals.ErrInvalidOption)
	}
}

func TestStore(t *testing.T) {
	target := &exposition{}
	target.set(200, "governor_sdk_rules_version{service=\"a\"} 4\n")
	srv := serve(t, target)
	scraped := make(chan TargetStatus, 1)
	st, err := NewStore(Options{}, ScraperOptions{OnScrape: func(s TargetStatus) { scraped <- s }})
	require.NoError(t, err)
	require.NoError(t, st.SetTargets([]Target{{URL: srv.URL}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- st.Run(ctx) }()
	s := <-scraped
	require.Equal(t, HealthUp, s.Health)
	res, err := st.Query(context.Background(), "governor_sdk_rules_version", s.LastScrape)
	require.NoError(t, err)
	require.Len(t, res.Samples, 1)
	require.Equal(t, 4.0, res.Samples[0].V)
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, st.Close())

	_, err = NewStore(Options{}, ScraperOptions{Interval: -1})
	require.ErrorIs(t, err, signals.ErrInvalidOption)
}

// A closed DB answers nothing: not its queries, not the reader's selections
// from the recent-samples cache (which still holds the newest samples), not
// a late scrape's commit. Every one says ErrClosed; a second Close is a
// no-op.
func TestClosedDBAnswersNothing(t *testing.T) {
	db, err := Open(Options{})
	require.NoError(t, err)
	put(t, db, labels.FromStrings("__name__", "governor_sdk_inflight", "service", "a"), at{0, 1}, at{10, 2}, at{20, 3}, at{390, 4})
	require.NoError(t, db.Close())
	ts := t0.Add(400 * time.Second)
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "governor_sdk_inflight")}
	_, err = db.Query(context.Background(), "governor_sdk_inflight", ts)
	require.ErrorIs(t, err, ErrClosed)
	err = db.SelectLatest(context.Background(), ts.UnixMilli(), ms, func(labels.Labels, int64, float64) { t.Error("answered after close") })
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, err, signals.ErrUnavailable)
	err = db.SelectFloats(context.Background(), ts.Add(-time.Minute).UnixMilli(), ts.UnixMilli(), ms, func(labels.Labels, []promql.FPoint) { t.Error("answered after close") })
	require.ErrorIs(t, err, ErrClosed)
	app := db.Appender(context.Background())
	_, _ = app.Append(0, labels.FromStrings("__name__", "g"), t0.Add(30*time.Second).UnixMilli(), 1)
	require.ErrorIs(t, app.Commit(), ErrClosed)
	require.NoError(t, db.Close())
}

// A bad label (a request ID, a timestamp) makes a target expose new series
// every scrape: past MaxSeries the head refuses new series, so memory stays
// bounded, while the series it holds keep taking samples.
func TestSeriesLimitRefusesNewSeriesOnly(t *testing.T) {
	db, err := Open(Options{MaxSeries: 2})
	require.NoError(t, err)
	defer db.Close()
	ts := t0.UnixMilli()
	a, b, c := labels.FromStrings("__name__", "m", "id", "a"), labels.FromStrings("__name__", "m", "id", "b"), labels.FromStrings("__name__", "m", "id", "c")
	app := db.Appender(context.Background())
	_, err = app.Append(0, a, ts, 1)
	require.NoError(t, err)
	_, err = app.Append(0, b, ts, 1)
	require.NoError(t, err)
	require.NoError(t, app.Commit())

	app = db.Appender(context.Background())
	_, err = app.Append(0, c, ts+1000, 1)
	require.ErrorIs(t, err, errSeriesLimit)
	require.True(t, soft(err), "a refused series drops its sample, not the scrape")
	_, err = app.Append(0, a, ts+1000, 2)
	require.NoError(t, err, "a known series, even without its ref, keeps taking samples")
	require.NoError(t, app.Commit())
	require.EqualValues(t, 2, db.db.Head().NumSeries())
}
