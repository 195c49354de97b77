package signals_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
)

// promqlOnly hides the store's SeriesSource side: a Reader over it sends
// every shared query to the PromQL engine.
type promqlOnly struct{ signals.PromQLSource }

var rateMetrics = []string{"governor_sdk_requests_total", "governor_sdk_request_errors_total", "governor_sdk_request_duration_seconds_bucket", "governor_sdk_queue_delay_seconds_bucket"}

// rateSample is one stored sample of the seeded fleet.
type rateSample struct {
	t int64
	v float64
}

// seededSeries draws one counter series over [0, 6m] from rng: scrapes
// roughly every 15 s with jitter, and now and then a counter reset, a
// gap, a stale marker (the series ends, sometimes to come back), a NaN, a
// negative value, a late start or an early end.
func seededSeries(rng *rand.Rand, t0 int64) []rateSample {
	var out []rateSample
	v := float64(rng.IntN(1000))
	start := t0 + int64(rng.IntN(4))*15_000
	if rng.IntN(6) == 0 {
		start += int64(rng.IntN(300_000)) // late start: in some windows one sample, or none
	}
	end := t0 + 6*60_000
	if rng.IntN(6) == 0 {
		end = start + int64(rng.IntN(360_000)) // ends early, without a marker
	}
	for t := start; t <= end; t += 15_000 + int64(rng.IntN(3_000)) - 1_500 {
		switch rng.IntN(40) {
		case 0: // counter reset (an instance restart)
			v = float64(rng.IntN(50))
		case 1: // a missed scrape
			continue
		case 2: // the series went away: a stale marker, maybe back later
			out = append(out, rateSample{t, math.Float64frombits(value.StaleNaN)})
			t += int64(rng.IntN(120_000))
			continue
		case 3:
			out = append(out, rateSample{t, math.NaN()})
			continue
		case 4:
			out = append(out, rateSample{t, -float64(rng.IntN(10))})
			continue
		case 5: // a flat stretch
		default:
			v += float64(rng.IntN(500)) * rng.Float64()
		}
		out = append(out, rateSample{t, v})
	}
	return out
}

// openSeededStore stores a fleet drawn from seed: services (one with a
// name a regular expression would misread), instances, classes and
// outcomes (deadline among them), error series for some, latency buckets
// with irregular le labels, and a series without a service.
func openSeededStore(t testing.TB, seed uint64) (*embedded.DB, time.Time) {
	rng := rand.New(rand.NewPCG(seed, 7))
	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	t0 := sharedT0.UnixMilli()
	var all []storedSeries
	add := func(kv ...string) {
		all = append(all, storedSeries{labels.FromStrings(kv...), seededSeries(rng, t0)})
	}
	services := []string{"a", "b", "c.d", "cxd", "e", "f"}
	for si, svc := range services {
		for i := range 1 + si%3 {
			inst := svc + "-" + strconv.Itoa(i)
			base := func(name string, kv ...string) []string {
				return append([]string{"__name__", name, "job", "sdk", "service", svc, "instance", inst}, kv...)
			}
			for _, class := range []string{"critical", "batch", ""} {
				for _, oc := range []string{"admitted", "shed", "rate_limited", "queue_timeout", "deadline", "overload", "exempt"} {
					if rng.IntN(3) == 0 {
						continue
					}
					if class == "" {
						add(base("governor_sdk_requests_total", "outcome", oc)...)
					} else {
						add(base("governor_sdk_requests_total", "class", class, "outcome", oc)...)
					}
				}
				if rng.IntN(2) == 0 {
					add(base("governor_sdk_request_errors_total", "class", class)...)
				}
			}
			for _, le := range []string{"0.005", "0.05", "0.5", "1", "+Inf", "5e-1"} {
				if le == "5e-1" && si != 2 {
					continue // a bucket written twice under two le spellings
				}
				add(base("governor_sdk_request_duration_seconds_bucket", "le", le)...)
			}
			if (si+i)%2 == 0 {
				for _, le := range []string{"0.001", "0.01", "0.1", "+Inf"} {
					add(base("governor_sdk_queue_delay_seconds_bucket", "route", "a", "le", le)...)
					add(base("governor_sdk_queue_delay_seconds_bucket", "route", "b", "le", le)...)
				}
			}
			add(base("governor_sdk_rules_version")...)
			add(base("governor_sdk_inflight", "route", "a")...)
			add(base("governor_sdk_inflight", "route", "b")...)
			add(base("governor_sdk_limit", "route", "a")...)
		}
	}
	all = append(all, storedSeries{labels.FromStrings("__name__", "governor_sdk_requests_total", "instance", "x", "outcome", "admitted"), seededSeries(rng, t0)})
	storeByTime(t, db, all)
	return db, sharedT0
}

// sameBits checks that two PromQL vectors are the same samples, labels and
// values to the bit (NaN equal to NaN), in any order.
func sameBits(t *testing.T, want, got *signals.Result, what string) {
	t.Helper()
	require.Equal(t, want.Type, got.Type, what)
	byLabels := func(r *signals.Result) map[string]signals.Point {
		m := map[string]signals.Point{}
		for _, s := range r.Samples {
			_, dup := m[s.Labels.String()]
			require.False(t, dup, "%s: %s twice", what, s.Labels)
			m[s.Labels.String()] = s.Point
		}
		return m
	}
	w, g := byLabels(want), byLabels(got)
	require.Equal(t, len(w), len(g), "%s: samples", what)
	for l, wp := range w {
		gp, ok := g[l]
		require.True(t, ok, "%s: %s missing", what, l)
		require.True(t, wp.T.Equal(gp.T), "%s: %s at %s, want %s", what, l, gp.T, wp.T)
		same := math.Float64bits(wp.V) == math.Float64bits(gp.V) || (math.IsNaN(wp.V) && math.IsNaN(gp.V))
		require.True(t, same, "%s: %s = %v, PromQL says %v", what, l, gp.V, wp.V)
	}
}

// evalTimes are the evaluation times of the comparisons: on a scrape, just
// after one, with the window's start on a sample, mid-way, and long after
// the last sample (every window empty).
func evalTimes(t0 time.Time) []time.Time {
	var out []time.Time
	for _, d := range []time.Duration{
		15 * time.Second, time.Minute, time.Minute + time.Millisecond, 75 * time.Second,
		2*time.Minute + 7*time.Second, 3 * time.Minute, 4*time.Minute + 59*time.Second,
		6 * time.Minute, 6*time.Minute + 50*time.Second, 20 * time.Minute,
	} {
		out = append(out, t0.Add(d))
	}
	return out
}

// TestSeriesSourceRatesAgreeWithPromQL compares the shared rate queries
// evaluated from the store's samples with the store's PromQL engine's
// answers to the same queries, bit for bit, over seeded fleets with counter
// resets, gaps, stale markers, NaN and negative values, late starts and
// early ends, for both scopes, several service selections, windows and
// evaluation times.
func TestSeriesSourceRatesAgreeWithPromQL(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(6) {
		db, t0 := openSeededStore(t, seed)
		for _, window := range []time.Duration{time.Minute, 45 * time.Second, 2*time.Minute + 500*time.Millisecond} {
			for _, scope := range []signals.Scope{signals.PerService, signals.PerInstance} {
				for _, services := range [][]string{nil, {"a"}, {"c.d"}, {"a", "c.d", "f"}, {"nope"}} {
					texts, err := signals.SharedRateQueries(scope, window, services...)
					require.NoError(t, err)
					for _, at := range evalTimes(t0) {
						for _, m := range rateMetrics {
							what := fmt.Sprintf("seed %d, %s, %s, %v, %s: %s", seed, window, scope, services, at.Sub(t0), texts[m])
							want, err := db.Query(ctx, texts[m], at)
							require.NoError(t, err, what)
							require.Empty(t, want.Warnings, what)
							got, err := signals.EvalSharedRate(ctx, db, m, scope, window, at, services...)
							require.NoError(t, err, what)
							sameBits(t, want, got, what)
						}
					}
				}
			}
		}
	}
}

// TestSeriesSourceGaugesAgreeWithPromQL compares the in-flight, limit and
// freshness templates evaluated from the store's newest samples with the
// store's PromQL engine's answers, bit for bit, over the seeded fleets
// (stale markers, NaN and negative values, series ending early or starting
// late, so newest samples inside and outside the lookback).
func TestSeriesSourceGaugesAgreeWithPromQL(t *testing.T) {
	ctx := context.Background()
	r, err := signals.NewReader(promqlOnly{}, signals.ReaderOptions{})
	require.NoError(t, err)
	for seed := range uint64(6) {
		db, t0 := openSeededStore(t, 200+seed)
		for _, scope := range []signals.Scope{signals.PerService, signals.PerInstance} {
			for _, services := range [][]string{nil, {"a"}, {"c.d"}, {"a", "c.d", "f"}, {"nope"}} {
				for _, s := range signals.GaugeSignals() {
					q, err := r.Query(s, scope, services...)
					require.NoError(t, err)
					for _, at := range append(evalTimes(t0), t0.Add(11*time.Minute), t0.Add(11*time.Minute+time.Millisecond)) {
						what := fmt.Sprintf("seed %d, %s, %v, %s: %s", seed, scope, services, at.Sub(t0), q)
						want, err := db.Query(ctx, q, at)
						require.NoError(t, err, what)
						require.Empty(t, want.Warnings, what)
						got, err := signals.EvalGauge(ctx, db, s, scope, at, services...)
						require.NoError(t, err, what)
						sameBits(t, want, got, what)
					}
				}
			}
		}
	}
}

// requireIdenticalSnapshots checks that two snapshots are the same: keys,
// every signal's status, value (to the bit), class shares, warnings and
// errors.
func requireIdenticalSnapshots(t *testing.T, want, got *signals.Snapshot, what string) {
	t.Helper()
	require.Equal(t, want.Keys(), got.Keys(), what)
	same := func(where string, w, g signals.Value) {
		t.Helper()
		require.Equal(t, w.Status, g.Status, "%s %s: want %s, got %s", what, where, w, g)
		require.Equal(t, w.Detail, g.Detail, "%s %s", what, where)
		if w.Known() {
			require.Equal(t, math.Float64bits(w.V), math.Float64bits(g.V), "%s %s: want %v, got %v", what, where, w.V, g.V)
		}
	}
	for _, k := range want.Keys() {
		we, ge := want.Entries[k], got.Entries[k]
		for _, s := range signals.All {
			same(k.String()+" "+string(s), we.Values[s], ge.Values[s])
		}
		require.Len(t, ge.ShedByClass, len(we.ShedByClass), what+" "+k.String())
		for c, w := range we.ShedByClass {
			same(k.String()+" class "+c, w, ge.ShedByClass[c])
		}
		require.Equal(t, we.Newest, ge.Newest, what)
	}
	require.ElementsMatch(t, want.Warnings, got.Warnings, what)
	require.Equal(t, len(want.Errors), len(got.Errors), what)
}

// TestReaderFromSeriesSourceAgrees reads every signal of the seeded fleets
// through the store's samples and through PromQL (the shared queries, and
// one template per signal): the snapshots are identical to the shared
// PromQL ones and equal to the per-signal ones up to summation order, for
// every service and instance, with the same statuses (NaN, missing, stale).
func TestReaderFromSeriesSourceAgrees(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(4) {
		db, t0 := openSeededStore(t, 100+seed)
		opts := signals.ReaderOptions{MaxAge: time.Minute}
		direct, err := signals.NewReader(db, opts)
		require.NoError(t, err)
		shared, err := signals.NewReader(promqlOnly{db}, opts)
		require.NoError(t, err)
		opts.PerSignal = true
		perSignal, err := signals.NewReader(db, opts)
		require.NoError(t, err)
		for _, scope := range []signals.Scope{signals.PerService, signals.PerInstance} {
			for _, services := range [][]string{nil, {"b"}, {"a", "c.d"}} {
				for _, at := range evalTimes(t0) {
					what := fmt.Sprintf("seed %d, %s, %v, %s", seed, scope, services, at.Sub(t0))
					got, err := direct.Read(ctx, at, scope, services...)
					require.NoError(t, err, what)
					want, err := shared.Read(ctx, at, scope, services...)
					require.NoError(t, err, what)
					requireIdenticalSnapshots(t, want, got, what)
					ps, err := perSignal.Read(ctx, at, scope, services...)
					require.NoError(t, err, what)
					requireSameSnapshots(t, ps, got)
				}
			}
		}
	}
}

// TestSeriesSourceNativeHistogramFallsBack: a selected series with a native
// histogram sample in the window is left to the PromQL engine, whose answer
// the Reader keeps (the histogram dropped with a warning).
func TestSeriesSourceNativeHistogramFallsBack(t *testing.T) {
	ctx := context.Background()
	db := openEdgeStore(t)
	app := db.Appender(ctx)
	ls := labels.FromStrings("__name__", "governor_sdk_requests_total", "job", "sdk", "service", "h", "instance", "h1", "outcome", "admitted")
	for i := range 4 {
		_, err := app.AppendHistogram(0, ls, sharedT0.Add(time.Duration(120+15*i)*time.Second).UnixMilli(), tsdbutil.GenerateTestHistogram(int64(i)), nil)
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	at := sharedT0.Add(3 * time.Minute)
	_, err := signals.EvalSharedRate(ctx, db, "governor_sdk_requests_total", signals.PerService, time.Minute, at)
	require.ErrorIs(t, err, signals.ErrNotFloat)
	direct, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	shared, err := signals.NewReader(promqlOnly{db}, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	got, err := direct.Read(ctx, at, signals.PerService)
	require.NoError(t, err)
	want, err := shared.Read(ctx, at, signals.PerService)
	require.NoError(t, err)
	requireIdenticalSnapshots(t, want, got, "native histogram")
	require.True(t, slicesContain(got.Warnings, "native histogram samples dropped"), got.Warnings)
	require.True(t, got.Get(signals.Key{Service: "a"}, signals.RequestRate).Known())
}

// recordingSeries is the store as a SeriesSource that records the PromQL
// queries and the metrics whose samples are read, and fails the sample reads
// of failOn.
type recordingSeries struct {
	*embedded.DB
	failOn string
	mu     sync.Mutex
	asked  []string
	read   []string
}

func (r *recordingSeries) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	r.mu.Lock()
	r.asked = append(r.asked, q)
	r.mu.Unlock()
	return r.DB.Query(ctx, q, at)
}

func (r *recordingSeries) record(ms []*labels.Matcher) error {
	var metric string
	for _, m := range ms {
		if m.Name == "__name__" {
			metric = m.Value
		}
	}
	r.mu.Lock()
	r.read = append(r.read, metric)
	r.mu.Unlock()
	if metric == r.failOn {
		return fmt.Errorf("%w: boom", signals.ErrQuery)
	}
	return nil
}

func (r *recordingSeries) SelectFloats(ctx context.Context, mint, maxt int64, ms []*labels.Matcher, fn func(labels.Labels, []promql.FPoint)) error {
	if err := r.record(ms); err != nil {
		return err
	}
	return r.DB.SelectFloats(ctx, mint, maxt, ms, fn)
}

func (r *recordingSeries) SelectLatest(ctx context.Context, ts int64, ms []*labels.Matcher, fn func(labels.Labels, int64, float64)) error {
	if err := r.record(ms); err != nil {
		return err
	}
	return r.DB.SelectLatest(ctx, ts, ms, fn)
}

// gaugeMetrics are the gauges a Read selects: the SDK's rules version twice,
// for freshness and for the count of reporting instances.
var gaugeMetrics = []string{"governor_sdk_inflight", "governor_sdk_limit", "governor_sdk_rules_version", "governor_sdk_rules_version"}

// TestSeriesSourcePlan: from a SeriesSource the three shared rate queries
// and the in-flight, limit, freshness and reporting templates read samples instead of
// sending PromQL, the others (the process join, the queue delay) are sent as
// before, an overridden template is still sent as written, and a failed
// sample read fails exactly the signals that come from it.
func TestSeriesSourcePlan(t *testing.T) {
	db := openEdgeStore(t)
	all := append(slices.Clone(rateMetrics), gaugeMetrics...)
	at := sharedT0.Add(3 * time.Minute)
	for _, tt := range []struct {
		name      string
		opts      signals.ReaderOptions
		failOn    string
		queries   int
		read      []string
		failed    []signals.Signal
		notFailed []signals.Signal
	}{
		{name: "shared", queries: 1, read: all},
		{name: "per signal", opts: signals.ReaderOptions{PerSignal: true}, queries: 13},
		{name: "overridden request rate keeps its template",
			opts:    signals.ReaderOptions{Templates: map[signals.Signal]string{signals.RequestRate: `sum by ({{.By}}) (rate(governor_sdk_requests_total{ {{.Selector}}outcome="admitted"}[{{.Window}}]))`}},
			queries: 1 + 1, read: all},
		{name: "overridden limit keeps its template",
			opts:    signals.ReaderOptions{Templates: map[signals.Signal]string{signals.Limit: `max by ({{.By}}) (governor_sdk_limit{ {{.Selector}} })`}},
			queries: 1 + 1, read: slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m == "governor_sdk_limit" })},
		{name: "overridden latency reads no buckets",
			opts: signals.ReaderOptions{Templates: map[signals.Signal]string{
				signals.LatencyP50: `histogram_quantile(0.5, sum by ({{.By}}, le) (rate(governor_sdk_queue_delay_seconds_bucket{ {{.Selector}} }[{{.Window}}])))`,
				signals.LatencyP99: `histogram_quantile(0.99, sum by ({{.By}}, le) (rate(governor_sdk_queue_delay_seconds_bucket{ {{.Selector}} }[{{.Window}}])))`}},
			queries: 1 + 2, read: slices.DeleteFunc(slices.Clone(all), func(m string) bool { return m == rateMetrics[2] })},
		{name: "failed requests read fails what derives from it", failOn: rateMetrics[0], queries: 1, read: all,
			failed:    []signals.Signal{signals.RequestRate, signals.ErrorRatio, signals.ShedRatio, signals.ShedRatioByClass},
			notFailed: []signals.Signal{signals.LatencyP99, signals.InFlight}},
		{name: "failed errors read fails the error ratio only", failOn: rateMetrics[1], queries: 1, read: all,
			failed:    []signals.Signal{signals.ErrorRatio},
			notFailed: []signals.Signal{signals.RequestRate, signals.ShedRatio, signals.LatencyP50}},
		{name: "failed bucket read fails the latency quantiles only", failOn: rateMetrics[2], queries: 1, read: all,
			failed:    []signals.Signal{signals.LatencyP50, signals.LatencyP99},
			notFailed: []signals.Signal{signals.RequestRate, signals.ErrorRatio, signals.CPU}},
		{name: "failed in-flight read fails in-flight only", failOn: "governor_sdk_inflight", queries: 1, read: all,
			failed:    []signals.Signal{signals.InFlight},
			notFailed: []signals.Signal{signals.RequestRate, signals.Limit, signals.CPU}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &recordingSeries{DB: db, failOn: tt.failOn}
			tt.opts.MaxAge = -1
			r, err := signals.NewReader(src, tt.opts)
			require.NoError(t, err)
			snap, err := r.Read(context.Background(), at, signals.PerService)
			require.NoError(t, err)
			require.Len(t, src.asked, tt.queries, "%q", src.asked)
			require.ElementsMatch(t, tt.read, src.read)
			for _, s := range tt.failed {
				require.Contains(t, snap.Errors, s)
				require.ErrorIs(t, snap.Errors[s], signals.ErrQuery)
				if s == signals.ShedRatioByClass {
					continue // no class answered, so none to mark
				}
				require.Equal(t, signals.Failed, snap.Get(signals.Key{Service: "a"}, s).Status, s)
			}
			for _, s := range tt.notFailed {
				require.NotContains(t, snap.Errors, s)
				require.True(t, snap.Get(signals.Key{Service: "a"}, s).Known(), s)
			}
			if tt.failOn == "" {
				want, err := signals.NewReader(&recording{PromQLSource: db}, tt.opts)
				require.NoError(t, err)
				w, err := want.Read(context.Background(), at, signals.PerService)
				require.NoError(t, err)
				requireIdenticalSnapshots(t, w, snap, tt.name)
			}
		})
	}
}

// TestSeriesSourceCancelled: a cancelled read fails as the PromQL engine's
// would, naming the cancellation.
func TestSeriesSourceCancelled(t *testing.T) {
	db := openEdgeStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := signals.EvalSharedRate(ctx, db, rateMetrics[0], signals.PerService, time.Minute, sharedT0.Add(3*time.Minute))
	require.ErrorIs(t, err, signals.ErrQuery)
	require.ErrorIs(t, err, context.Canceled)
}

// FuzzSeriesRate draws two counter series of one service from the input
// (sample spacing, increases, resets, stale markers, NaN, negative and flat
// values), an evaluation time and a window, and checks the rate read from
// the samples against the PromQL engine's answer to the same query, bit for
// bit.
func FuzzSeriesRate(f *testing.F) {
	f.Add([]byte{30, 5, 10, 31, 5, 20, 30, 5, 30, 31, 205, 1, 30, 5, 9, 31, 225, 0, 30, 5, 50}, uint16(100), uint8(60))
	f.Add([]byte{1, 250, 0, 2, 250, 0, 3, 235, 0, 4, 245, 3, 5, 100, 255}, uint16(7), uint8(15))
	f.Add([]byte{39, 0, 255, 39, 0, 255, 39, 210, 0, 39, 0, 1}, uint16(400), uint8(200))
	f.Add([]byte{}, uint16(0), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, atSeconds uint16, windowSeconds uint8) {
		db, err := embedded.Open(embedded.Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, db.Close()) }()
		svc := "fz"
		if len(data) > 300 {
			data = data[:300] // within the head's appendable hour
		}
		t0 := sharedT0.UnixMilli()
		ctx := context.Background()
		var (
			ts   [2]int64
			vals [2]float64
		)
		app := db.Appender(ctx)
		for i := 0; i+2 < len(data); i += 3 {
			s := int(data[i] & 1)
			ts[s] += int64(data[i]%40+1) * 500
			v := fuzzStep(vals[s], data[i+1], float64(data[i+2]))
			if !math.IsNaN(v) && v >= 0 {
				vals[s] = v
			}
			ls := labels.FromStrings("__name__", "governor_sdk_request_errors_total", "service", svc, "class", strconv.Itoa(s))
			_, err = app.Append(0, ls, t0+ts[s], v)
			require.NoError(t, err)
		}
		require.NoError(t, app.Commit())
		window := time.Duration(windowSeconds%240+1) * time.Second
		at := sharedT0.Add(time.Duration(atSeconds%600) * time.Second)
		texts, err := signals.SharedRateQueries(signals.PerService, window, svc)
		require.NoError(t, err)
		want, err := db.Query(ctx, texts[rateMetrics[1]], at)
		require.NoError(t, err)
		got, err := signals.EvalSharedRate(ctx, db, rateMetrics[1], signals.PerService, window, at, svc)
		require.NoError(t, err)
		sameBits(t, want, got, fmt.Sprintf("%s at %s over %s", svc, at.Sub(sharedT0), window))
	})
}

// fuzzStep is a fuzzed counter's next sample after prev: mostly an
// increase, else a reset to arg, a stale marker, a NaN, a negative value or
// prev again, as op says.
func fuzzStep(prev float64, op byte, arg float64) float64 {
	switch {
	case op < 200:
		return prev + arg*float64(op)/7
	case op < 220:
		return arg
	case op < 230:
		return math.Float64frombits(value.StaleNaN)
	case op < 240:
		return math.NaN()
	case op < 250:
		return -arg
	}
	return prev
}
