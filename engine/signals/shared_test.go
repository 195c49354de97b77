package signals_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/engine/signals/embedded"
)

var sharedT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// series is one synthetic series: labels and its value at scrape step i.
type series struct {
	kv []string
	at func(i int) float64
}

// edgeFleet covers the cases the shared queries must derive like the
// per-signal templates: several classes and instances, no error series, no
// shed series, no traffic at all, non-monotonic buckets, a bucket with a bad
// le label, a series without a class and one without a service.
func edgeFleet() []series {
	ctr := func(per float64) func(int) float64 { return func(i int) float64 { return per * float64(i) } }
	gauge := func(v float64) func(int) float64 { return func(int) float64 { return v } }
	req := func(svc, inst, class, outcome string, per float64) series {
		kv := []string{"__name__", "governor_sdk_requests_total", "job", "sdk", "service", svc, "instance", inst, "route", "api", "outcome", outcome}
		if class != "" {
			kv = append(kv, "class", class)
		}
		return series{kv: kv, at: ctr(per)}
	}
	other := func(name, svc, inst string, f func(int) float64, kv ...string) series {
		return series{kv: append([]string{"__name__", name, "job", "sdk", "service", svc, "instance", inst}, kv...), at: f}
	}
	var out []series
	for _, inst := range []string{"a1", "a2"} {
		out = append(out,
			req("a", inst, "critical", "admitted", 100),
			req("a", inst, "batch", "admitted", 40),
			req("a", inst, "batch", "shed", 10),
			req("a", inst, "batch", "rate_limited", 3),
			req("a", inst, "critical", "queue_timeout", 1),
			req("a", inst, "", "admitted", 7),
			// A shadow route's would-be refusals count requests already
			// counted as admitted: not offered load.
			req("a", inst, "batch", "shadow_would_shed", 20),
			req("a", inst, "critical", "shadow_would_rate_limit", 5),
			other("governor_sdk_request_errors_total", "a", inst, ctr(2), "class", "critical"),
		)
		for k, le := range []string{"0.01", "0.1", "1", "+Inf"} {
			out = append(out, other("governor_sdk_request_duration_seconds_bucket", "a", inst, ctr(30*float64(k+1)), "le", le))
		}
		out = append(out,
			other("governor_sdk_inflight", "a", inst, gauge(3)),
			other("governor_sdk_limit", "a", inst, gauge(10)),
			other("governor_sdk_rules_version", "a", inst, gauge(1)),
		)
	}
	// b: traffic without errors or shedding; buckets not monotonic and one
	// with an unparsable le.
	out = append(out,
		req("b", "b1", "core", "admitted", 50),
		other("governor_sdk_request_duration_seconds_bucket", "b", "b1", ctr(20), "le", "0.05"),
		other("governor_sdk_request_duration_seconds_bucket", "b", "b1", ctr(15), "le", "0.5"),
		other("governor_sdk_request_duration_seconds_bucket", "b", "b1", ctr(50), "le", "+Inf"),
		other("governor_sdk_request_duration_seconds_bucket", "b", "b1", ctr(5), "le", "soon"),
		other("governor_sdk_rules_version", "b", "b1", gauge(1)),
	)
	// c: no traffic (flat counters), so every ratio and quantile is 0/0.
	out = append(out,
		req("c", "c1", "core", "admitted", 0),
		req("c", "c1", "core", "shed", 0),
		other("governor_sdk_request_errors_total", "c", "c1", ctr(0)),
		other("governor_sdk_request_duration_seconds_bucket", "c", "c1", ctr(0), "le", "0.1"),
		other("governor_sdk_request_duration_seconds_bucket", "c", "c1", ctr(0), "le", "+Inf"),
		other("governor_sdk_rules_version", "c", "c1", gauge(1)),
	)
	// d: errors but no admitted requests (only shed): no error ratio.
	out = append(out,
		req("d", "d1", "batch", "shed", 5),
		other("governor_sdk_request_errors_total", "d", "d1", ctr(1)),
		other("governor_sdk_rules_version", "d", "d1", gauge(1)),
	)
	// e: only shadow outcomes, so no offered load at all.
	out = append(out,
		req("e", "e1", "core", "shadow_would_shed", 5),
		other("governor_sdk_rules_version", "e", "e1", gauge(1)),
	)
	// Process metrics without a service label, joined through the targets;
	// one of a process without SDK gauges, so without a service.
	proc := func(inst string, cpu, mem float64) []series {
		return []series{
			{kv: []string{"__name__", "process_cpu_seconds_total", "job", "sdk", "instance", inst}, at: ctr(cpu)},
			{kv: []string{"__name__", "process_resident_memory_bytes", "job", "sdk", "instance", inst}, at: gauge(mem)},
		}
	}
	out = append(out, proc("a1", 3, 1e8)...)
	out = append(out, proc("a2", 6, 3e8)...)
	out = append(out, proc("b1", 1.5, 2e8)...)
	out = append(out, proc("x9", 15, 9e8)...)
	// A series without a service label.
	out = append(out, series{kv: []string{"__name__", "governor_sdk_requests_total", "job", "sdk", "instance", "x1", "outcome", "admitted"}, at: ctr(9)})
	return out
}

func openEdgeStore(t testing.TB) *embedded.DB {
	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	fleet := edgeFleet()
	for i := 0; i <= 12; i++ {
		app := db.Appender(context.Background())
		ts := sharedT0.Add(time.Duration(i) * 15 * time.Second).UnixMilli()
		for _, s := range fleet {
			_, err := app.Append(0, labels.FromStrings(s.kv...), ts, s.at(i))
			require.NoError(t, err)
		}
		require.NoError(t, app.Commit())
	}
	return db
}

// requireSameSnapshots checks that two snapshots hold the same keys, values
// and statuses, values equal up to summation order.
func requireSameSnapshots(t *testing.T, want, got *signals.Snapshot) {
	t.Helper()
	require.Equal(t, want.Keys(), got.Keys())
	same := func(what string, w, g signals.Value) {
		t.Helper()
		require.Equal(t, w.Status, g.Status, "%s: want %s, got %s", what, w, g)
		if w.Known() {
			require.InDelta(t, w.V, g.V, 1e-9*math.Max(1, math.Abs(w.V)), what)
		}
	}
	for _, k := range want.Keys() {
		we, ge := want.Entries[k], got.Entries[k]
		for _, s := range signals.All {
			same(k.String()+" "+string(s), we.Values[s], ge.Values[s])
		}
		require.Len(t, ge.ShedByClass, len(we.ShedByClass), k.String())
		for c, w := range we.ShedByClass {
			same(k.String()+" class "+c, w, ge.ShedByClass[c])
		}
	}
	require.Equal(t, len(want.Errors), len(got.Errors))
}

func TestSharedQueriesAgreeWithTemplates(t *testing.T) {
	db := openEdgeStore(t)
	at := sharedT0.Add(3 * time.Minute)
	perSignal, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1, PerSignal: true})
	require.NoError(t, err)
	shared, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1})
	require.NoError(t, err)
	for _, tt := range []struct {
		name     string
		scope    signals.Scope
		services []string
	}{
		{"per service", signals.PerService, nil},
		{"per instance", signals.PerInstance, nil},
		{"some services", signals.PerService, []string{"a", "c"}},
		{"one service per instance", signals.PerInstance, []string{"b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, err := perSignal.Read(context.Background(), at, tt.scope, tt.services...)
			require.NoError(t, err)
			got, err := shared.Read(context.Background(), at, tt.scope, tt.services...)
			require.NoError(t, err)
			requireSameSnapshots(t, want, got)
		})
	}

	// The cases the fleet was built for, checked by hand once.
	snap, err := shared.Read(context.Background(), at, signals.PerService)
	require.NoError(t, err)
	a, b, c, d := signals.Key{Service: "a"}, signals.Key{Service: "b"}, signals.Key{Service: "c"}, signals.Key{Service: "d"}
	require.InDelta(t, 2*161.0/15, snap.Get(a, signals.RequestRate).V, 1e-9, "shadow outcomes are not offered requests")
	require.InDelta(t, 2.0/147, snap.Get(a, signals.ErrorRatio).V, 1e-9)
	require.InDelta(t, 14.0/161, snap.Get(a, signals.ShedRatio).V, 1e-9)
	require.InDelta(t, 13.0/53, snap.Entries[a].ShedByClass["batch"].V, 1e-9)
	require.InDelta(t, 1.0/101, snap.Entries[a].ShedByClass["critical"].V, 1e-9)
	require.InDelta(t, 0.0, snap.Entries[a].ShedByClass[""].V, 1e-9, "a series without a class counts as class \"\"")
	require.InDelta(t, 0.3, snap.Get(a, signals.CPU).V, 1e-9, "the average over a's instances")
	require.InDelta(t, 2e8, snap.Get(a, signals.Memory).V, 1e-3)
	require.InDelta(t, 0.1, snap.Get(b, signals.CPU).V, 1e-9)
	require.Equal(t, signals.Missing, snap.Get(c, signals.CPU).Status, "no process metrics")
	require.Equal(t, signals.KnownValue(0), snap.Get(b, signals.ErrorRatio), "no error series is a zero error ratio")
	require.Equal(t, signals.KnownValue(0), snap.Get(b, signals.ShedRatio))
	require.True(t, snap.Get(b, signals.LatencyP99).Known())
	for _, s := range []signals.Signal{signals.ErrorRatio, signals.ShedRatio, signals.LatencyP50, signals.LatencyP99} {
		require.Equal(t, signals.NotFinite, snap.Get(c, s).Status, "%s of an idle service", s)
	}
	require.Equal(t, signals.Missing, snap.Get(d, signals.ErrorRatio).Status, "errors without admitted requests")
	e := signals.Key{Service: "e"}
	for _, s := range []signals.Signal{signals.RequestRate, signals.ShedRatio} {
		require.Equal(t, signals.Missing, snap.Get(e, s).Status, "%s of a service with only shadow outcomes", s)
	}
	require.Empty(t, snap.Entries[e].ShedByClass)
	require.True(t, slicesContain(snap.Warnings, "lacks the labels of its scope"), snap.Warnings)
	require.Equal(t, 1, countContaining(snap.Warnings, "without a valid le label"), snap.Warnings)
	require.Equal(t, 2, countContaining(snap.Warnings, "fixed for monotonicity in 1 groups"), "b's buckets, for p50 and p99: %q", snap.Warnings)
}

// A shadow route counts a request it would have shed as admitted and as
// shadow_would_shed: the offered load is the admitted requests only, and
// nothing was shed.
func TestShadowOutcomesAreNotOfferedLoad(t *testing.T) {
	db, err := embedded.Open(embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	req := func(outcome string) labels.Labels {
		return labels.FromStrings("__name__", "governor_sdk_requests_total", "job", "sdk", "service", "a", "instance", "a1", "route", "api", "class", "batch", "outcome", outcome)
	}
	for i := 0; i <= 8; i++ {
		app := db.Appender(context.Background())
		ts := sharedT0.Add(time.Duration(i) * 15 * time.Second).UnixMilli()
		// 100/s offered on a shadow route, all admitted; 40/s would be shed.
		_, err := app.Append(0, req("admitted"), ts, 1500*float64(i))
		require.NoError(t, err)
		_, err = app.Append(0, req("shadow_would_shed"), ts, 600*float64(i))
		require.NoError(t, err)
		_, err = app.Append(0, labels.FromStrings("__name__", "governor_sdk_rules_version", "job", "sdk", "service", "a", "instance", "a1"), ts, 1)
		require.NoError(t, err)
		require.NoError(t, app.Commit())
	}
	at := sharedT0.Add(2 * time.Minute)
	for _, perSignal := range []bool{false, true} {
		r, err := signals.NewReader(db, signals.ReaderOptions{PerSignal: perSignal})
		require.NoError(t, err)
		snap, err := r.Read(context.Background(), at, signals.PerService)
		require.NoError(t, err)
		k := signals.Key{Service: "a"}
		require.InDelta(t, 100, snap.Get(k, signals.RequestRate).V, 1e-9, "perSignal %v", perSignal)
		require.InDelta(t, 0, snap.Get(k, signals.ShedRatio).V, 1e-9)
	}
}

func slicesContain(ws []string, part string) bool { return countContaining(ws, part) > 0 }

func countContaining(ws []string, part string) int {
	n := 0
	for _, w := range ws {
		if strings.Contains(w, part) {
			n++
		}
	}
	return n
}

// recording is a PromQLSource in front of the store that records the queries
// and fails those containing failOn. It hides the store's SeriesSource side,
// so every shared query is sent as PromQL.
type recording struct {
	signals.PromQLSource
	failOn string
	mu     sync.Mutex
	asked  []string
}

func (r *recording) Query(ctx context.Context, q string, at time.Time) (*signals.Result, error) {
	r.mu.Lock()
	r.asked = append(r.asked, q)
	r.mu.Unlock()
	if r.failOn != "" && strings.Contains(q, r.failOn) {
		return nil, errors.New("boom")
	}
	return r.PromQLSource.Query(ctx, q, at)
}

func TestSharedQueryPlan(t *testing.T) {
	db := openEdgeStore(t)
	at := sharedT0.Add(3 * time.Minute)
	for _, tt := range []struct {
		name      string
		opts      signals.ReaderOptions
		failOn    string
		queries   int
		failed    []signals.Signal
		notFailed []signals.Signal
	}{
		{name: "shared", queries: 5 + 4},
		{name: "per signal", opts: signals.ReaderOptions{PerSignal: true}, queries: 13},
		{name: "overridden request rate keeps its template",
			opts:    signals.ReaderOptions{Templates: map[signals.Signal]string{signals.RequestRate: `sum by ({{.By}}) (rate(governor_sdk_requests_total{ {{.Selector}}outcome="admitted"}[{{.Window}}]))`}},
			queries: 5 + 5},
		{name: "overridden latency drops the latency query",
			opts: signals.ReaderOptions{Templates: map[signals.Signal]string{
				signals.LatencyP50: `histogram_quantile(0.5, sum by ({{.By}}, le) (rate(governor_sdk_queue_delay_seconds_bucket{ {{.Selector}} }[{{.Window}}])))`,
				signals.LatencyP99: `histogram_quantile(0.99, sum by ({{.By}}, le) (rate(governor_sdk_queue_delay_seconds_bucket{ {{.Selector}} }[{{.Window}}])))`}},
			queries: 4 + 6},
		{name: "failed requests query fails what derives from it", failOn: "class, outcome", queries: 9,
			failed:    []signals.Signal{signals.RequestRate, signals.ErrorRatio, signals.ShedRatio, signals.ShedRatioByClass},
			notFailed: []signals.Signal{signals.LatencyP99, signals.InFlight}},
		{name: "failed errors query fails the error ratio only", failOn: "request_errors_total", queries: 9,
			failed:    []signals.Signal{signals.ErrorRatio},
			notFailed: []signals.Signal{signals.RequestRate, signals.ShedRatio}},
		{name: "failed process query fails cpu and memory", failOn: "governor_signal", queries: 9,
			failed:    []signals.Signal{signals.CPU, signals.Memory},
			notFailed: []signals.Signal{signals.RequestRate, signals.LatencyP50}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &recording{PromQLSource: db, failOn: tt.failOn}
			tt.opts.MaxAge = -1
			r, err := signals.NewReader(src, tt.opts)
			require.NoError(t, err)
			snap, err := r.Read(context.Background(), at, signals.PerService)
			require.NoError(t, err)
			require.Len(t, src.asked, tt.queries, "%q", src.asked)
			for _, s := range tt.failed {
				require.Contains(t, snap.Errors, s)
				if s == signals.ShedRatioByClass {
					continue // no class answered, so none to mark
				}
				require.Equal(t, signals.Failed, snap.Get(signals.Key{Service: "a"}, s).Status, s)
			}
			for _, s := range tt.notFailed {
				require.NotContains(t, snap.Errors, s)
				require.True(t, snap.Get(signals.Key{Service: "a"}, s).Known(), s)
			}
			want, err := signals.NewReader(db, signals.ReaderOptions{MaxAge: -1, PerSignal: true, Templates: tt.opts.Templates})
			require.NoError(t, err)
			if tt.failOn == "" {
				w, err := want.Read(context.Background(), at, signals.PerService)
				require.NoError(t, err)
				requireSameSnapshots(t, w, snap)
			}
		})
	}
}

// Every read counts the instances each service's sums come from
// (Entry.Reporting): those with a current SDK gauge, whether the reader
// asks PromQL or reads the store's samples.
func TestReadCountsReportingInstances(t *testing.T) {
	db := openEdgeStore(t)
	at := sharedT0.Add(3 * time.Minute)
	for _, opts := range []signals.ReaderOptions{{MaxAge: -1}, {MaxAge: -1, PerSignal: true}} {
		for _, src := range []signals.Source{db, &recording{PromQLSource: db}} {
			r, err := signals.NewReader(src, opts)
			require.NoError(t, err)
			snap, err := r.Read(context.Background(), at, signals.PerService)
			require.NoError(t, err)
			require.Equal(t, 2, snap.Entries[signals.Key{Service: "a"}].Reporting)
			require.Equal(t, 1, snap.Entries[signals.Key{Service: "b"}].Reporting)
			snap, err = r.Read(context.Background(), at, signals.PerInstance, "a")
			require.NoError(t, err)
			require.Equal(t, 1, snap.Entries[signals.Key{Service: "a", Instance: "a2"}].Reporting)
		}
	}
}
