package embedded

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
)

type floatsAnswer struct {
	ls  string
	pts []promql.FPoint
}

type latestAnswer struct {
	ls string
	t  int64
	v  float64
}

func collectFloats(t *testing.T, sel func(func(labels.Labels, []promql.FPoint)) error) []floatsAnswer {
	t.Helper()
	var out []floatsAnswer
	require.NoError(t, sel(func(ls labels.Labels, pts []promql.FPoint) {
		if len(pts) > 0 { // a series without samples in range is no answer
			out = append(out, floatsAnswer{ls.String(), append([]promql.FPoint(nil), pts...)})
		}
	}))
	return out
}

func collectLatest(t *testing.T, sel func(func(labels.Labels, int64, float64)) error) []latestAnswer {
	t.Helper()
	var out []latestAnswer
	require.NoError(t, sel(func(ls labels.Labels, ts int64, v float64) { out = append(out, latestAnswer{ls.String(), ts, v}) }))
	return out
}

func sameFloats(t *testing.T, want, got []floatsAnswer, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		require.Equal(t, want[i].ls, got[i].ls, what)
		require.Equal(t, len(want[i].pts), len(got[i].pts), what)
		for j := range want[i].pts {
			w, g := want[i].pts[j], got[i].pts[j]
			require.Equal(t, w.T, g.T, what)
			require.Equal(t, math.Float64bits(w.F), math.Float64bits(g.F), what)
		}
	}
}

// TestRecentAgreesWithTSDB writes seeded series (jittered scrapes, gaps,
// stale markers, NaN, series created late and ending early, several
// appenders committing out of order) and checks, over many ranges and
// selections, that whatever the recent-samples cache answers is what the
// TSDB holds, in the same order, and that it answers the windows a cycle
// reads.
func TestRecentAgreesWithTSDB(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 11))
		db := openDB(t)
		name := signals.SeriesMetrics()[0]
		type series struct {
			ls labels.Labels
			t  int64
			v  float64
		}
		var all []*series
		for s := range 5 {
			for i := range 4 {
				all = append(all, &series{ls: labels.FromStrings("__name__", name, "service", "s"+strconv.Itoa(s), "instance", strconv.Itoa(i)),
					t: t0.UnixMilli() + int64(rng.IntN(200_000))})
			}
		}
		end := t0.UnixMilli() + 20*60_000
		for step := 0; ; step++ {
			// Two appenders per round, committed in either order.
			apps := []*recentAppender{db.Appender(ctx).(*recentAppender), db.Appender(ctx).(*recentAppender)}
			done := 0
			for k, s := range all {
				if s.t > end {
					done++
					continue
				}
				v := s.v
				switch rng.IntN(30) {
				case 0:
					v = math.Float64frombits(value.StaleNaN)
				case 1:
					v = math.NaN()
				default:
					s.v += float64(rng.IntN(100))
					v = s.v
				}
				if rng.IntN(40) != 0 { // now and then a missed scrape
					_, err := apps[k%2].Append(0, s.ls, s.t, v)
					require.NoError(t, err)
				}
				s.t += 15_000 + int64(rng.IntN(2000)) - 1000
				if rng.IntN(200) == 0 {
					s.t += 10 * 60_000 // gone for a while
				}
			}
			first := rng.IntN(2)
			require.NoError(t, apps[first].Commit())
			require.NoError(t, apps[1-first].Commit())
			if done == len(all) {
				break
			}
		}
		cached, fromTSDB := 0, 0
		for range 300 {
			maxt := t0.UnixMilli() + int64(rng.IntN(22*60_000))
			mint := maxt - int64(1+rng.IntN(180_000))
			ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", name)}
			if rng.IntN(2) == 0 {
				ms = append(ms, labels.MustNewMatcher(labels.MatchRegexp, "service", "s1|s3"))
			}
			want := collectFloats(t, func(fn func(labels.Labels, []promql.FPoint)) error {
				return db.selectFloatsTSDB(ctx, mint, maxt, ms, fn)
			})
			var got []floatsAnswer
			if db.recent.selectFloats(mint, maxt, db.headMin(), ms, func(ls labels.Labels, pts []promql.FPoint) {
				if len(pts) > 0 {
					got = append(got, floatsAnswer{ls.String(), append([]promql.FPoint(nil), pts...)})
				}
			}) {
				cached++
				sameFloats(t, want, got, "floats")
			} else {
				fromTSDB++
			}
			wl := collectLatest(t, func(fn func(labels.Labels, int64, float64)) error { return db.selectLatestTSDB(ctx, maxt, ms, fn) })
			var gl []latestAnswer
			if db.recent.selectLatest(maxt-db.lookback.Milliseconds()+1, maxt, db.headMin(), ms, func(ls labels.Labels, ts int64, v float64) {
				gl = append(gl, latestAnswer{ls.String(), ts, v})
			}) {
				require.Equal(t, len(wl), len(gl))
				for i := range wl {
					require.Equal(t, wl[i].ls, gl[i].ls)
					require.Equal(t, wl[i].t, gl[i].t)
					require.Equal(t, math.Float64bits(wl[i].v), math.Float64bits(gl[i].v))
				}
			}
		}
		require.Positive(t, cached, "seed %d", seed)
		require.Positive(t, fromTSDB, "seed %d", seed)
		// The window of a cycle at the end: answered from the cache.
		ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", name)}
		require.True(t, db.recent.selectFloats(end-60_000, end, db.headMin(), ms, func(labels.Labels, []promql.FPoint) {}))
		require.True(t, db.recent.selectLatest(end-db.lookback.Milliseconds()+1, end, db.headMin(), ms, func(labels.Labels, int64, float64) {}))
	}
}

// TestRecentHistogramNotCached: a series of a cached metric with a native
// histogram sample is never answered from the cache, so the TSDB path
// reports it (signals.ErrNotFloat) and the reader asks PromQL.
func TestRecentHistogramNotCached(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	name := signals.SeriesMetrics()[0]
	ls := labels.FromStrings("__name__", name, "service", "h")
	app := db.Appender(ctx)
	for i := range 4 {
		_, err := app.Append(0, ls, t0.UnixMilli()+int64(i)*15_000, float64(i))
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", name)}
	end := t0.UnixMilli() + 45_000
	require.True(t, db.recent.selectFloats(end-40_000, end, db.headMin(), ms, func(labels.Labels, []promql.FPoint) {}))
	app = db.Appender(ctx)
	_, err := app.AppendHistogram(0, ls, end+15_000, tsdbutil.GenerateTestHistogram(1), nil)
	require.NoError(t, err)
	require.NoError(t, app.Commit())
	require.False(t, db.recent.selectFloats(end-40_000, end+15_000, db.headMin(), ms, func(labels.Labels, []promql.FPoint) {}))
	err = db.SelectFloats(ctx, end-40_000, end+15_000, ms, func(labels.Labels, []promql.FPoint) {})
	require.ErrorIs(t, err, signals.ErrNotFloat)
}

// TestRecentRollback: what an appender rolls back never reaches the cache.
func TestRecentRollback(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	name := signals.SeriesMetrics()[0]
	ls := labels.FromStrings("__name__", name, "service", "r")
	app := db.Appender(ctx)
	_, err := app.Append(0, ls, t0.UnixMilli(), 1)
	require.NoError(t, err)
	require.NoError(t, app.Rollback())
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", name)}
	n := 0
	_ = db.recent.selectFloats(t0.UnixMilli()-1, t0.UnixMilli(), 0, ms, func(labels.Labels, []promql.FPoint) { n++ })
	require.Zero(t, n)
}
