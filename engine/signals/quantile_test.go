package signals_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
)

// storedSeries is one series to store with its samples.
type storedSeries struct {
	ls      labels.Labels
	samples []rateSample
}

// storeByTime appends the series' samples with one commit per sample time,
// as scrapes commit.
func storeByTime(t testing.TB, db *embedded.DB, all []storedSeries) {
	t.Helper()
	var times []int64
	for _, s := range all {
		for _, p := range s.samples {
			times = append(times, p.t)
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	next := make([]int, len(all))
	for _, ts := range times {
		app := db.Appender(context.Background())
		for i, s := range all {
			if next[i] < len(s.samples) && s.samples[next[i]].t == ts {
				_, err := app.Append(0, s.ls, ts, s.samples[next[i]].v)
				require.NoError(t, err)
				next[i]++
			}
		}
		require.NoError(t, app.Commit())
	}
}

// openDownstreamStore stores a fleet drawn from seed calling its
// downstreams: the latency buckets of every service, instance and
// downstream with the seeded counters (resets, gaps, stale markers, NaN and
// negative values, late starts, early ends, and buckets that are not
// monotonic), a bucket written under two le spellings, le labels that are
// no number or NaN, a series without le, one without a downstream and one
// without a service, and another metric's buckets.
func openDownstreamStore(t testing.TB, seed uint64) (*embedded.DB, time.Time) {
	rng := rand.New(rand.NewPCG(seed, 11))
	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	t0 := sharedT0.UnixMilli()
	var all []storedSeries
	add := func(kv ...string) {
		all = append(all, storedSeries{labels.FromStrings(kv...), seededSeries(rng, t0)})
	}
	metric := signals.DownstreamP99.Metric
	services := []string{"a", "b", "c.d", "e"}
	for si, svc := range services {
		for i := range 1 + si%3 {
			inst := svc + "-" + strconv.Itoa(i)
			for _, ds := range []string{services[(si+1)%len(services)], "db"}[:1+si%2] {
				for _, le := range []string{"0.005", "0.05", "0.5", "5e-1", "1", "+Inf", "bad", "NaN"} {
					switch {
					case le == "5e-1" && si != 1, le == "bad" && si != 2, le == "NaN" && si != 3:
						continue
					case rng.IntN(8) == 0:
						continue // a bucket this instance does not have
					}
					add("__name__", metric, "job", "sdk", "service", svc, "instance", inst, "downstream", ds, "le", le)
				}
			}
		}
	}
	add("__name__", metric, "job", "sdk", "service", "a", "instance", "a-9", "downstream", "db")
	add("__name__", metric, "job", "sdk", "service", "b", "instance", "b-9", "le", "+Inf")
	add("__name__", metric, "job", "sdk", "instance", "x", "downstream", "db", "le", "0.5")
	add("__name__", metric, "job", "sdk", "instance", "x", "downstream", "db", "le", "+Inf")
	add("__name__", "governor_sdk_request_duration_seconds_bucket", "job", "sdk", "service", "a", "instance", "a-0", "le", "+Inf")
	storeByTime(t, db, all)
	return db, sharedT0
}

// quantiles are the queries of the comparisons: the engine's downstream
// p99 and others over the same buckets.
var quantiles = []signals.BucketQuantile{
	signals.DownstreamP99,
	{Q: 0.5, Metric: signals.DownstreamP99.Metric, By: []string{"service"}, Window: 45 * time.Second},
	{Q: 0.9, Metric: signals.DownstreamP99.Metric, By: []string{"downstream", "instance"}, Window: 2*time.Minute + 500*time.Millisecond},
	{Q: 1, Metric: signals.DownstreamP99.Metric, By: []string{"service", "downstream"}, Window: time.Minute},
	{Q: 0, Metric: signals.DownstreamP99.Metric, By: nil, Window: 90 * time.Second},
}

// TestBucketQuantileString: the query as the engine sent it before it read
// the samples itself.
func TestBucketQuantileString(t *testing.T) {
	require.Equal(t, `histogram_quantile(0.99, sum by (service, downstream, le) (rate(governor_sdk_downstream_duration_seconds_bucket[1m])))`,
		signals.DownstreamP99.String())
	require.Equal(t, `histogram_quantile(0.9, sum by (downstream, instance, le) (rate(governor_sdk_downstream_duration_seconds_bucket[2m500ms])))`,
		quantiles[2].String())
	require.Equal(t, `histogram_quantile(0, sum by (le) (rate(governor_sdk_downstream_duration_seconds_bucket[1m30s])))`,
		quantiles[4].String())
}

// TestBucketQuantileAgreesWithPromQL compares the quantiles evaluated from
// the store's samples with the store's PromQL engine's answers to the same
// queries, bit for bit, over seeded fleets, for several quantiles,
// groupings, windows and evaluation times; the samples are read without
// sending the engine any query.
func TestBucketQuantileAgreesWithPromQL(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(6) {
		db, t0 := openDownstreamStore(t, seed)
		src := &recordingSeries{DB: db}
		for _, q := range quantiles {
			for _, at := range evalTimes(t0) {
				what := fmt.Sprintf("seed %d, %s: %s", seed, at.Sub(t0), q)
				want, err := db.Query(ctx, q.String(), at)
				require.NoError(t, err, what)
				got, err := q.Eval(ctx, src, at)
				require.NoError(t, err, what)
				sameBits(t, want, got, what)
			}
		}
		require.Empty(t, src.asked)
		require.NotEmpty(t, src.read)
	}
}

// TestBucketQuantileSendsPromQL: a source that only evaluates PromQL is
// sent the query, and a bucket series with a native histogram sample in the
// window leaves the query to the store's PromQL engine.
func TestBucketQuantileSendsPromQL(t *testing.T) {
	ctx := context.Background()
	db, t0 := openDownstreamStore(t, 1)
	at := t0.Add(3 * time.Minute)
	rec := &recording{PromQLSource: db}
	got, err := signals.DownstreamP99.Eval(ctx, rec, at)
	require.NoError(t, err)
	require.Equal(t, []string{signals.DownstreamP99.String()}, rec.asked)
	want, err := db.Query(ctx, signals.DownstreamP99.String(), at)
	require.NoError(t, err)
	sameBits(t, want, got, "PromQL only")

	app := db.Appender(ctx)
	ls := labels.FromStrings("__name__", signals.DownstreamP99.Metric, "service", "h", "downstream", "db", "le", "+Inf")
	for i := range 4 {
		_, err := app.AppendHistogram(0, ls, t0.Add(time.Duration(120+15*i)*time.Second).UnixMilli(), tsdbutil.GenerateTestHistogram(int64(i)), nil)
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	src := &recordingSeries{DB: db}
	got, err = signals.DownstreamP99.Eval(ctx, src, at)
	require.NoError(t, err)
	require.Equal(t, []string{signals.DownstreamP99.String()}, src.asked)
	want, err = db.Query(ctx, signals.DownstreamP99.String(), at)
	require.NoError(t, err)
	sameBits(t, want, got, "native histogram")
}

// TestBucketQuantileCancelled: a cancelled read fails as the PromQL
// engine's would, naming the cancellation.
func TestBucketQuantileCancelled(t *testing.T) {
	db, t0 := openDownstreamStore(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := signals.DownstreamP99.Eval(ctx, db, t0.Add(3*time.Minute))
	require.ErrorIs(t, err, signals.ErrQuery)
	require.ErrorIs(t, err, context.Canceled)
}

// FuzzBucketQuantile draws the buckets of two downstreams of one service
// from the input (le among a few, two spellings of one, one that is no
// number; sample spacing, increases, resets, stale markers, NaN and negative
// values), a quantile, an evaluation time and a window, and checks the
// quantile read from the samples against the PromQL engine's answer to the
// same query, bit for bit.
func FuzzBucketQuantile(f *testing.F) {
	f.Add([]byte{0, 30, 5, 10, 1, 31, 5, 20, 2, 30, 5, 30, 6, 31, 205, 1, 8, 30, 5, 9, 9, 31, 225, 0, 3, 30, 5, 50}, uint8(99), uint16(100), uint8(60))
	f.Add([]byte{4, 1, 250, 0, 5, 2, 250, 0, 10, 3, 235, 0, 12, 4, 245, 3, 13, 5, 100, 255}, uint8(50), uint16(7), uint8(15))
	f.Add([]byte{7, 39, 0, 255, 15, 39, 0, 255, 11, 39, 210, 0, 1, 39, 0, 1}, uint8(255), uint16(400), uint8(200))
	f.Add([]byte{}, uint8(0), uint16(0), uint8(1))
	les := []string{"0.01", "0.1", "1e-1", "1", "+Inf", "x", "10", "0.5"}
	f.Fuzz(func(t *testing.T, data []byte, quantile uint8, atSeconds uint16, windowSeconds uint8) {
		db, err := embedded.Open(embedded.Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, db.Close()) }()
		if len(data) > 400 {
			data = data[:400] // within the head's appendable hour
		}
		t0 := sharedT0.UnixMilli()
		ctx := context.Background()
		var (
			ts   [16]int64
			vals [16]float64
		)
		app := db.Appender(ctx)
		for i := 0; i+3 < len(data); i += 4 {
			s := int(data[i] % 16) // downstream (low bit) and le
			ts[s] += int64(data[i+1]%40+1) * 500
			v := fuzzStep(vals[s], data[i+2], float64(data[i+3]))
			if !math.IsNaN(v) && v >= 0 {
				vals[s] = v
			}
			ls := labels.FromStrings("__name__", signals.DownstreamP99.Metric, "service", "fz", "downstream", strconv.Itoa(s&1), "le", les[s>>1])
			_, err = app.Append(0, ls, t0+ts[s], v)
			require.NoError(t, err)
		}
		require.NoError(t, app.Commit())
		q := signals.DownstreamP99
		q.Q = float64(quantile) / 200 // up to 1.275: above 1 is +Inf
		q.Window = time.Duration(windowSeconds%240+1) * time.Second
		at := sharedT0.Add(time.Duration(atSeconds%600) * time.Second)
		want, err := db.Query(ctx, q.String(), at)
		require.NoError(t, err)
		got, err := q.Eval(ctx, db, at)
		require.NoError(t, err)
		sameBits(t, want, got, fmt.Sprintf("%s at %s", q, at.Sub(sharedT0)))
	})
}
