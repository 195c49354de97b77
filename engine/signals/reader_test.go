package signals

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeSource answers rendered queries from a table; unknown queries get an
// empty vector.
type fakeSource struct {
	mu      sync.Mutex
	answers map[string]*Result
	errs    map[string]error
	asked   []string
}

func (f *fakeSource) Query(_ context.Context, q string, _ time.Time) (*Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, q)
	if err := f.errs[q]; err != nil {
		return nil, err
	}
	if r := f.answers[q]; r != nil {
		return r, nil
	}
	return &Result{Type: TypeVector}, nil
}

func (f *fakeSource) QueryRange(context.Context, string, Range) (*Result, error) {
	return nil, errors.New("not used")
}

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t   *testing.T
	src *fakeSource
	r   *Reader
}

func newFixture(t *testing.T, opts ReaderOptions) *fixture {
	src := &fakeSource{answers: map[string]*Result{}, errs: map[string]error{}}
	r, err := NewReader(src, opts)
	require.NoError(t, err)
	return &fixture{t: t, src: src, r: r}
}

func (f *fixture) q(s Signal, scope Scope) string {
	q, err := f.r.Query(s, scope)
	require.NoError(f.t, err)
	return q
}

// answer sets the vector for signal s: pairs of labels and values.
func (f *fixture) answer(s Signal, scope Scope, samples ...Sample) {
	f.src.answers[f.q(s, scope)] = &Result{Type: TypeVector, Samples: samples}
}

func smp(v float64, kv ...string) Sample {
	l := Labels{}
	for i := 0; i < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return Sample{Labels: l, Point: Point{T: now, V: v}}
}

func fresh(ago time.Duration, kv ...string) Sample {
	return smp(float64(now.Add(-ago).UnixMilli())/1000, kv...)
}

func TestReadClassifiesValues(t *testing.T) {
	f := newFixture(t, ReaderOptions{})
	a, b := Key{Service: "a"}, Key{Service: "b"}
	f.answer(Freshness, PerService, fresh(10*time.Second, "service", "a"), fresh(20*time.Second, "service", "b"))
	f.answer(RequestRate, PerService, smp(120, "service", "a"), smp(0, "service", "b"))
	f.answer(ErrorRatio, PerService, smp(1.02, "service", "a"), smp(math.NaN(), "service", "b"))
	f.answer(ShedRatio, PerService, smp(-0.001, "service", "a"))
	f.answer(LatencyP99, PerService, smp(math.Inf(1), "service", "a"), smp(0.2, "service", "b"))
	f.answer(ShedRatioByClass, PerService, smp(0.5, "service", "a", "class", "batch"), smp(0, "service", "a", "class", "critical"))

	snap, err := f.r.Read(context.Background(), now, PerService)
	require.NoError(t, err)
	require.Equal(t, []Key{a, b}, snap.Keys())
	tests := []struct {
		key    Key
		sig    Signal
		want   float64
		status Status
	}{
		{a, RequestRate, 120, Known},
		{b, RequestRate, 0, Known}, // a real zero stays zero
		{a, ErrorRatio, 1, Known},  // clamped into [0, 1]
		{b, ErrorRatio, 0, NotFinite},
		{a, ShedRatio, 0, Known},
		{b, ShedRatio, 0, Missing}, // no series: unknown, never zero
		{a, LatencyP99, 0, NotFinite},
		{b, LatencyP99, 0.2, Known},
		{a, CPU, 0, Missing},
		{Key{Service: "zzz"}, RequestRate, 0, Missing},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.key, tt.sig), func(t *testing.T) {
			v := snap.Get(tt.key, tt.sig)
			require.Equal(t, tt.status, v.Status, v.String())
			if tt.status == Known {
				require.Equal(t, tt.want, v.V)
			} else {
				_, ok := v.Get()
				require.False(t, ok)
				require.True(t, math.IsNaN(v.V), "an unknown value must not read as a number")
			}
		})
	}
	require.Equal(t, map[string]Value{"batch": KnownValue(0.5), "critical": KnownValue(0)}, snap.Entries[a].ShedByClass)
	require.Empty(t, snap.Errors)
	require.True(t, snap.Entries[a].Newest.Equal(now.Add(-10*time.Second)))
}

func TestReadStaleness(t *testing.T) {
	tests := []struct {
		name       string
		opts       ReaderOptions
		freshness  []Sample
		want       Status
		wantDetail string
	}{
		{"fresh", ReaderOptions{}, []Sample{fresh(90*time.Second, "service", "a")}, Known, ""},
		{"too old", ReaderOptions{}, []Sample{fresh(3*time.Minute, "service", "a")}, Stale, "newest sample 3m0s old (max 2m0s)"},
		{"custom max age", ReaderOptions{MaxAge: 30 * time.Second}, []Sample{fresh(31*time.Second, "service", "a")}, Stale, "max 30s"},
		{"age check disabled", ReaderOptions{MaxAge: -1}, []Sample{fresh(time.Hour, "service", "a")}, Known, ""},
		{"gauge gone", ReaderOptions{}, nil, Stale, "no current SDK sample (target down or gone)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			f.answer(Freshness, PerService, tt.freshness...)
			f.answer(RequestRate, PerService, smp(5, "service", "a"))
			f.answer(ShedRatioByClass, PerService, smp(0.1, "service", "a", "class", "batch"))
			snap, err := f.r.Read(context.Background(), now, PerService)
			require.NoError(t, err)
			v := snap.Get(Key{Service: "a"}, RequestRate)
			require.Equal(t, tt.want, v.Status)
			require.Contains(t, v.Detail, tt.wantDetail)
			require.Equal(t, tt.want, snap.Entries[Key{Service: "a"}].ShedByClass["batch"].Status)
		})
	}
}

func TestReadFailures(t *testing.T) {
	f := newFixture(t, ReaderOptions{})
	f.answer(Freshness, PerInstance, fresh(time.Second, "service", "a", "instance", "i1"))
	f.answer(RequestRate, PerInstance, smp(7, "service", "a", "instance", "i1"), smp(8, "service", "a"), smp(9, "instance", "i2"))
	f.src.errs[f.q(LatencyP99, PerInstance)] = fmt.Errorf("%w: 3 attempts: server error", ErrUnavailable)
	f.src.answers[f.q(CPU, PerInstance)] = &Result{Type: TypeScalar, Samples: []Sample{smp(1)}, Warnings: []string{"partial response"}}
	f.answer(Memory, PerInstance, smp(1, "service", "a", "instance", "i1"), smp(2, "service", "a", "instance", "i1"))

	snap, err := f.r.Read(context.Background(), now, PerInstance)
	require.NoError(t, err)
	k := Key{Service: "a", Instance: "i1"}
	require.Equal(t, []Key{k}, snap.Keys(), "samples without service or instance are dropped")
	require.Equal(t, 7.0, snap.Get(k, RequestRate).V)
	require.Equal(t, Failed, snap.Get(k, LatencyP99).Status)
	require.Contains(t, snap.Get(k, LatencyP99).Detail, "server error")
	require.ErrorIs(t, snap.Errors[LatencyP99], ErrUnavailable)
	require.Equal(t, Failed, snap.Get(k, CPU).Status)
	require.ErrorIs(t, snap.Errors[CPU], ErrQuery)
	require.Equal(t, Failed, snap.Get(k, Memory).Status, "several samples for one key: none is its value")
	require.ErrorIs(t, snap.Errors[Memory], ErrQuery)
	require.Contains(t, snap.Warnings, "cpu: partial response")
	require.Len(t, snap.Warnings, 3) // plus two samples lacking labels
}

func TestReadAllFailed(t *testing.T) {
	f := newFixture(t, ReaderOptions{})
	for s := range f.r.tmpl {
		f.src.errs[f.q(s, PerService)] = fmt.Errorf("%w: connection refused", ErrUnavailable)
	}
	_, err := f.r.Read(context.Background(), now, PerService)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "every query failed")
}

func TestReadServiceSelector(t *testing.T) {
	f := newFixture(t, ReaderOptions{Window: 30 * time.Second})
	_, err := f.r.Read(context.Background(), now, PerInstance, "checkout", "a.b|c")
	require.NoError(t, err)
	require.Len(t, f.src.asked, len(f.r.tmpl))
	for _, q := range f.src.asked {
		require.Contains(t, q, `service=~"checkout|a\\.b\\|c",`)
		require.Contains(t, q, "service, instance")
	}
	q, err := f.r.Query(RequestRate, PerService, "checkout")
	require.NoError(t, err)
	require.Equal(t, `sum by (service) (rate(governor_sdk_requests_total{ service="checkout",outcome!~"shadow_.*"}[30s]))`, q)

	_, err = f.r.Read(context.Background(), now, PerService, "ok", "")
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorContains(t, err, "services[1]: empty service name")
}

// When the freshness query fails, no entry can be told from a dead
// target's (whose rate windows still hold its last samples), so every
// entry reads stale, saying why; with the age check disabled nothing
// changes.
func TestReadFreshnessFailedIsStale(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts ReaderOptions
		want Status
	}{
		{"age check on", ReaderOptions{}, Stale},
		{"age check disabled", ReaderOptions{MaxAge: -1}, Known},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			f.src.errs[f.q(Freshness, PerService)] = fmt.Errorf("%w: 3 attempts: server error", ErrUnavailable)
			f.answer(RequestRate, PerService, smp(5, "service", "a"))
			snap, err := f.r.Read(context.Background(), now, PerService)
			require.NoError(t, err)
			v := snap.Get(Key{Service: "a"}, RequestRate)
			require.Equal(t, tt.want, v.Status, "%+v", v)
			if tt.want == Stale {
				require.Contains(t, v.Detail, "the freshness query failed")
			}
			require.ErrorIs(t, snap.Errors[Freshness], ErrUnavailable)
		})
	}
}

// A template that does not aggregate by the scope's labels (a missing sum
// by) answers several series per key: no one of them is the key's value, so
// the signal fails, naming the problem, instead of reading the first.
func TestReadSeveralSeriesPerKeyFailTheSignal(t *testing.T) {
	f := newFixture(t, ReaderOptions{})
	f.answer(Freshness, PerService, fresh(time.Second, "service", "a"), fresh(time.Second, "service", "b"))
	f.answer(RequestRate, PerService, smp(5, "service", "a"), smp(6, "service", "b"))
	f.answer(Memory, PerService, smp(1, "service", "a", "instance", "i1"), smp(2, "service", "a", "instance", "i2"), smp(3, "service", "b"))
	f.answer(ShedRatioByClass, PerService, smp(0.1, "service", "a", "class", "batch", "route", "/x"), smp(0.2, "service", "a", "class", "batch", "route", "/y"))
	snap, err := f.r.Read(context.Background(), now, PerService)
	require.NoError(t, err)
	for _, k := range []Key{{Service: "a"}, {Service: "b"}} {
		require.Equal(t, Failed, snap.Get(k, Memory).Status, "%s", k)
		require.Equal(t, Known, snap.Get(k, RequestRate).Status, "the other signals keep their values")
	}
	require.ErrorIs(t, snap.Errors[Memory], ErrQuery)
	require.ErrorContains(t, snap.Errors[Memory], "1 samples beyond one per key")
	require.ErrorContains(t, snap.Errors[Memory], "sum by (service)")
	require.ErrorIs(t, snap.Errors[ShedRatioByClass], ErrQuery)
	require.Equal(t, Failed, snap.Entries[Key{Service: "a"}].ShedByClass["batch"].Status)
}

// A template that renders at start (window 1m) but fails to render with the
// reader's window fails its own signal, naming the template; the others
// are read.
func TestReadTemplateRenderFailureFailsOnlyItsSignal(t *testing.T) {
	f := newFixture(t, ReaderOptions{Window: 30 * time.Second, Templates: map[Signal]string{
		CPU: `{{if eq .Window "1m"}}sum by ({{.By}}) (up){{else}}{{slice .By 99}}{{end}}`,
	}})
	f.answer(Freshness, PerService, fresh(time.Second, "service", "a"))
	f.answer(RequestRate, PerService, smp(5, "service", "a"))
	snap, err := f.r.Read(context.Background(), now, PerService)
	require.NoError(t, err)
	require.Equal(t, 5.0, snap.Get(Key{Service: "a"}, RequestRate).V)
	require.Equal(t, Failed, snap.Get(Key{Service: "a"}, CPU).Status)
	require.ErrorIs(t, snap.Errors[CPU], ErrInvalidOption)
	require.ErrorContains(t, snap.Errors[CPU], "templates.cpu")
}
