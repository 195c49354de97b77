package signals

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPartialDataClassification(t *testing.T) {
	tests := []struct {
		warning string
		partial bool
	}{
		{"partial response: store 2 unreachable", true},
		{"failed to receive any data from Addr: 10.0.0.7:10901 LabelSets: {replica=\"b\"}: context deadline exceeded", true},
		{"No StoreAPIs matched for this query", true},
		{"remote_read: error sending request: connection refused", true},
		{"12 more warning annotations omitted", true}, // may hide a store's warning
		{"PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"up\"", false},
		{"PromQL warning: encountered a mix of histograms and floats for metric name \"x\"", false},
		{"info: PromQL info: metric might not be a counter", false}, // an info as promapi reports it
		{InfoPrefix + "3 native histogram samples dropped", false},
		{InfoPrefix + "input to histogram_quantile needed to be fixed for monotonicity in 1 groups", false},
	}
	for _, tt := range tests {
		t.Run(tt.warning, func(t *testing.T) {
			require.Equal(t, tt.partial, PartialData(tt.warning))
		})
	}
}

// A query that warns data may be missing makes its signal Partial for
// every key of the read, the keys it did not answer for included (their
// series may be the missing ones); an info annotation changes nothing.
func TestPartialWarningMakesItsSignalPartialForEveryKey(t *testing.T) {
	const warn = "partial response: store 2 unreachable"
	f := newFixture(t, ReaderOptions{})
	f.answer(Freshness, PerService, fresh(time.Second, "service", "a"), fresh(time.Second, "service", "b"))
	f.src.answers[f.q(RequestRate, PerService)] = &Result{Type: TypeVector, Samples: []Sample{smp(10, "service", "a"), smp(20, "service", "b")},
		Warnings: []string{"PromQL info: x", warn}}
	f.src.answers[f.q(ErrorRatio, PerService)] = &Result{Type: TypeVector, Samples: []Sample{smp(0.1, "service", "a")}, Warnings: []string{warn}}
	f.src.answers[f.q(LatencyP99, PerService)] = &Result{Type: TypeVector, Samples: []Sample{smp(0.2, "service", "a"), smp(0.3, "service", "b")},
		Warnings: []string{"PromQL info: metric might not be a counter"}}
	f.src.answers[f.q(ShedRatioByClass, PerService)] = &Result{Type: TypeVector, Samples: []Sample{smp(0.1, "service", "a", "class", "batch")},
		Warnings: []string{warn}}
	snap, err := f.r.Read(context.Background(), now, PerService)
	require.NoError(t, err)
	for _, k := range []Key{{Service: "a"}, {Service: "b"}} {
		for _, s := range []Signal{RequestRate, ErrorRatio} {
			v := snap.Get(k, s)
			require.Equal(t, Partial, v.Status, "%s %s: %s", k, s, v)
			require.Equal(t, string(s)+": "+warn, v.Detail)
			require.True(t, math.IsNaN(v.V))
		}
		require.True(t, snap.Get(k, LatencyP99).Known(), "an info blocks nothing")
		detail, ok := snap.Entries[k].Partial()
		require.True(t, ok)
		require.Equal(t, "request_rate: "+warn, detail)
	}
	require.Equal(t, Partial, snap.Entries[Key{Service: "a"}].ShedByClass["batch"].Status)
	require.Equal(t, map[Signal]string{RequestRate: warn, ErrorRatio: warn, ShedRatioByClass: warn}, snap.Partial)
	require.Contains(t, snap.Warnings, "latency_p99: PromQL info: metric might not be a counter")
	require.Empty(t, snap.Errors)

	b, err := json.Marshal(snap)
	require.NoError(t, err)
	require.Contains(t, string(b), `{"value":null,"status":"partial","detail":"request_rate: `+warn+`"}`)
	require.Contains(t, string(b), `"partial":{"error_ratio":"`+warn+`"`)
}

// promqlFake is a PromQLSource answering every query through f, so the
// Reader derives the default signals from its shared queries.
type promqlFake struct {
	f func(q string) (*Result, error)
}

func (p promqlFake) Query(_ context.Context, q string, _ time.Time) (*Result, error) { return p.f(q) }
func (p promqlFake) QueryRange(context.Context, string, Range) (*Result, error) {
	return nil, fmt.Errorf("not used")
}
func (promqlFake) EvaluatesPromQL() {}

// A shared query's partial warning reaches every signal derived from it,
// although the snapshot lists its warning once; a shared query that times
// out makes its signals unknown (Failed), never zero, and leaves the others
// as they are.
func TestSharedQueryPartialOrTimedOutReachesEverySignalDerivedFromIt(t *testing.T) {
	const warn = "partial response: store 2 unreachable"
	src := promqlFake{f: func(q string) (*Result, error) {
		switch {
		case strings.Contains(q, "governor_sdk_requests_total"):
			return &Result{Type: TypeVector, Samples: []Sample{
				smp(10, "service", "a", "class", "core", "outcome", "admitted"),
				smp(1, "service", "a", "class", "core", "outcome", "shed")}, Warnings: []string{warn}}, nil
		case strings.Contains(q, "governor_sdk_request_errors_total"):
			return &Result{Type: TypeVector, Samples: []Sample{smp(1, "service", "a")}}, nil
		case strings.Contains(q, "governor_sdk_request_duration_seconds_bucket"):
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, context.DeadlineExceeded)
		case strings.HasPrefix(q, "max") && strings.Contains(q, "governor_sdk_rules_version"):
			return &Result{Type: TypeVector, Samples: []Sample{fresh(time.Second, "service", "a")}}, nil
		case strings.Contains(q, "governor_sdk_inflight"):
			return &Result{Type: TypeVector, Samples: []Sample{smp(3, "service", "a")}}, nil
		}
		return &Result{Type: TypeVector}, nil
	}}
	r, err := NewReader(src, ReaderOptions{})
	require.NoError(t, err)
	snap, err := r.Read(context.Background(), now, PerService)
	require.NoError(t, err)
	a := Key{Service: "a"}
	for _, s := range []Signal{RequestRate, ShedRatio, ErrorRatio} {
		v := snap.Get(a, s)
		require.Equal(t, Partial, v.Status, "%s: %s", s, v)
		require.Equal(t, string(s)+": "+warn, v.Detail)
	}
	require.Equal(t, Partial, snap.Entries[a].ShedByClass["core"].Status)
	listed := 0
	for _, w := range snap.Warnings {
		if strings.Contains(w, warn) {
			listed++
		}
	}
	require.Equal(t, 1, listed, "listed once: %q", snap.Warnings)
	for _, s := range []Signal{LatencyP50, LatencyP99} {
		v := snap.Get(a, s)
		require.Equal(t, Failed, v.Status, "%s: %s", s, v)
		require.True(t, math.IsNaN(v.V))
		require.ErrorIs(t, snap.Errors[s], context.DeadlineExceeded)
	}
	require.Equal(t, KnownValue(3), snap.Get(a, InFlight))
}

// One signal's query timing out while the others answer: that signal is
// unknown (Failed, NaN), not zero; the others keep their values.
func TestQueryTimeoutMakesOnlyItsSignalUnknown(t *testing.T) {
	f := newFixture(t, ReaderOptions{})
	f.answer(Freshness, PerService, fresh(time.Second, "service", "a"))
	f.answer(RequestRate, PerService, smp(10, "service", "a"))
	f.answer(LatencyP50, PerService, smp(0.1, "service", "a"))
	f.src.errs[f.q(LatencyP99, PerService)] = fmt.Errorf("%w: %w", ErrUnavailable, context.DeadlineExceeded)
	snap, err := f.r.Read(context.Background(), now, PerService)
	require.NoError(t, err)
	a := Key{Service: "a"}
	v := snap.Get(a, LatencyP99)
	require.Equal(t, Failed, v.Status)
	require.True(t, math.IsNaN(v.V))
	require.Contains(t, v.Detail, "deadline exceeded")
	require.Equal(t, KnownValue(10), snap.Get(a, RequestRate))
	require.Equal(t, KnownValue(0.1), snap.Get(a, LatencyP50))
	require.Empty(t, snap.Partial)
}

// While the freshness query is partial, a key it did not answer for may
// have lost its series rather than be gone: it reads Partial, not Stale. A
// key it answered for is judged by its age as usual.
func TestPartialFreshnessMakesUnansweredKeysPartialNotStale(t *testing.T) {
	const warn = "failed to receive any data from Addr: 10.0.0.1:10901: context deadline exceeded"
	f := newFixture(t, ReaderOptions{})
	f.src.answers[f.q(Freshness, PerService)] = &Result{Type: TypeVector,
		Samples: []Sample{fresh(time.Second, "service", "a"), fresh(5*time.Minute, "service", "c")}, Warnings: []string{warn}}
	f.answer(RequestRate, PerService, smp(10, "service", "a"), smp(20, "service", "b"), smp(30, "service", "c"))
	snap, err := f.r.Read(context.Background(), now, PerService)
	require.NoError(t, err)
	require.Equal(t, KnownValue(10), snap.Get(Key{Service: "a"}, RequestRate))
	v := snap.Get(Key{Service: "b"}, RequestRate)
	require.Equal(t, Partial, v.Status, v.String())
	require.Equal(t, "freshness: "+warn, v.Detail)
	require.Equal(t, Stale, snap.Get(Key{Service: "c"}, RequestRate).Status)
	require.Equal(t, map[Signal]string{Freshness: warn}, snap.Partial)
}
