package loadscore

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
)

const mib = 1 << 20

func entry(svc string, vals map[signals.Signal]float64) *signals.Entry {
	e := &signals.Entry{Key: signals.Key{Service: svc, Instance: "i1"}, Values: map[signals.Signal]signals.Value{}}
	for _, s := range signals.All {
		e.Values[s] = signals.Unknown(signals.Missing, "no series")
	}
	for s, v := range vals {
		e.Values[s] = signals.KnownValue(v)
	}
	return e
}

func opts(t *testing.T, o Options) *Options {
	n, err := o.normalize()
	require.NoError(t, err)
	return &n
}

type wantTerm struct {
	term                 Term
	normalized, eff, con float64
	known                bool
}

func TestCompute(t *testing.T) {
	full := map[signals.Signal]float64{signals.CPU: 0.8, signals.Memory: 256 * mib, signals.LatencyP99: 0.5, signals.InFlight: 30, signals.Limit: 40, signals.QueueDelayP99: 0.01}
	noMem := map[signals.Signal]float64{signals.CPU: 0.8, signals.LatencyP99: 0.5}
	tests := []struct {
		name   string
		opts   Options
		vals   map[signals.Signal]float64
		score  float64 // NaN: unknown
		known  float64
		terms  []wantTerm
		reason string
	}{
		{
			// 0.4×0.8 + 0.3×0.25 + 0.3×min(0.5/0.25, 1) = 0.32 + 0.075 + 0.3
			name: "defaults, all known", vals: full, score: 0.695, known: 1,
			terms: []wantTerm{{CPU, 0.8, 0.4, 0.32, true}, {Memory, 0.25, 0.3, 0.075, true}, {Latency, 1, 0.3, 0.3, true}},
		},
		{
			// memory unknown: its 0.3 is spread over cpu and latency:
			// (0.4×0.8 + 0.3×1) / 0.7 = 0.62 / 0.7
			name: "memory unknown is redistributed", vals: noMem, score: 0.62 / 0.7, known: 0.7,
			terms: []wantTerm{{CPU, 0.8, 0.4 / 0.7, 0.32 / 0.7, true}, {Memory, math.NaN(), 0, 0, false}, {Latency, 1, 0.3 / 0.7, 0.3 / 0.7, true}},
		},
		{
			name: "too little known", vals: map[signals.Signal]float64{signals.CPU: 0.9}, score: math.NaN(), known: 0.4,
			reason: "known weight 0.40 below the required 0.50",
		},
		{
			name: "lower requirement", opts: Options{MinKnownWeight: 0.4}, vals: map[signals.Signal]float64{signals.CPU: 0.9}, score: 0.9, known: 0.4,
		},
		{
			// weights sum to 1.5; inflight 30/40 = 0.75, queue 0.01/0.05 = 0.2:
			// (0.32 + 0.075 + 0.3 + 0.25×0.75 + 0.25×0.2) / 1.5 = 0.9325 / 1.5
			name: "optional terms", opts: Options{Weights: Weights{CPU: 0.4, Memory: 0.3, Latency: 0.3, InFlight: 0.25, Queue: 0.25}},
			vals: full, score: 0.9325 / 1.5, known: 1,
			terms: []wantTerm{
				{CPU, 0.8, 0.4 / 1.5, 0.32 / 1.5, true}, {Memory, 0.25, 0.2, 0.05, true}, {Latency, 1, 0.2, 0.2, true},
				{InFlight, 0.75, 0.25 / 1.5, 0.1875 / 1.5, true}, {Queue, 0.2, 0.25 / 1.5, 0.05 / 1.5, true},
			},
		},
		{
			// checkout's own targets: 2 cores, 512 MiB, 1 s p99:
			// 0.4×0.4 + 0.3×0.5 + 0.3×0.5 = 0.46
			name: "service targets", opts: Options{ServiceTargets: map[string]Targets{"checkout": {CPUCores: 2, MemoryBytes: 512 * mib, Latency: time.Second}}},
			vals: full, score: 0.46, known: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := Compute(opts(t, tt.opts), entry("checkout", tt.vals))
			require.InDelta(t, tt.known, raw.KnownWeight, 1e-12)
			if math.IsNaN(tt.score) {
				require.False(t, raw.Known)
				require.True(t, math.IsNaN(raw.Score))
				require.Equal(t, tt.reason, raw.Reason)
				return
			}
			require.True(t, raw.Known, raw.Reason)
			require.InDelta(t, tt.score, raw.Score, 1e-12)
			sum := 0.0
			for _, c := range raw.Terms {
				sum += c.Contribution
			}
			require.InDelta(t, raw.Score, sum, 1e-12, "contributions add up to the score")
			for i, w := range tt.terms {
				c := raw.Terms[i]
				require.Equal(t, w.term, c.Term)
				require.Equal(t, w.known, c.Known)
				if !w.known {
					require.True(t, math.IsNaN(c.Normalized))
					require.Equal(t, "unknown (missing: no series)", c.Reason)
					continue
				}
				require.InDelta(t, w.normalized, c.Normalized, 1e-12, c.Term)
				require.InDelta(t, w.eff, c.EffectiveWeight, 1e-12, c.Term)
				require.InDelta(t, w.con, c.Contribution, 1e-12, c.Term)
			}
		})
	}
}

func TestInFlightNeedsALimit(t *testing.T) {
	o := opts(t, Options{Weights: Weights{InFlight: 1}, MinKnownWeight: 1})
	tests := []struct {
		name   string
		vals   map[signals.Signal]float64
		reason string
	}{
		{"no limit", map[signals.Signal]float64{signals.InFlight: 3}, "limit unknown (missing: no series)"},
		{"zero limit", map[signals.Signal]float64{signals.InFlight: 3, signals.Limit: 0}, "limit is 0"},
		{"no inflight", map[signals.Signal]float64{signals.Limit: 10}, "unknown (missing: no series)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := Compute(o, entry("s", tt.vals))
			require.False(t, raw.Known)
			require.Equal(t, tt.reason, raw.Terms[0].Reason)
		})
	}
	raw := Compute(o, entry("s", map[signals.Signal]float64{signals.InFlight: 50, signals.Limit: 40}))
	require.Equal(t, 1.0, raw.Score, "over the limit clamps to 1")
}

// A known limit that is not a finite number (a snapshot not built by
// signals.Reader) makes the inflight term unknown, not 0, and the score
// still encodes.
func TestInfiniteLimitIsUnknown(t *testing.T) {
	tr, err := New(Options{Weights: Weights{InFlight: 1}})
	require.NoError(t, err)
	sc := tr.Observe(t0, entry("s", map[signals.Signal]float64{signals.InFlight: 3, signals.Limit: math.Inf(1)}))
	require.False(t, sc.Raw.Known)
	require.Equal(t, "limit unknown (not_finite: +Inf)", sc.Raw.Terms[0].Reason)
	_, err = json.Marshal(sc)
	require.NoError(t, err)
}

func TestStaleSignalIsUnknownNotZero(t *testing.T) {
	e := entry("s", map[signals.Signal]float64{signals.Memory: 0, signals.LatencyP99: 0})
	e.Values[signals.CPU] = signals.Unknown(signals.Stale, "newest sample 3m0s old (max 2m0s)")
	raw := Compute(opts(t, Options{}), e)
	require.True(t, raw.Known)
	require.Equal(t, 0.0, raw.Score)
	require.Equal(t, "unknown (stale: newest sample 3m0s old (max 2m0s))", raw.Terms[0].Reason)
	require.InDelta(t, 0.6, raw.KnownWeight, 1e-12)
}

// A p99 read from a query that warned of missing data (a store of a
// federated setup unavailable) may lack the slow series: the term is left
// out, saying why, rather than scored as if complete.
func TestPartialSignalIsLeftOutWithItsWarning(t *testing.T) {
	e := entry("s", map[signals.Signal]float64{signals.CPU: 1, signals.Memory: 0, signals.LatencyP99: 0.01})
	e.Values[signals.LatencyP99] = signals.Unknown(signals.Partial, "latency_p99: partial response: store 2 unreachable")
	raw := Compute(opts(t, Options{}), e)
	require.True(t, raw.Known)
	require.InDelta(t, 0.7, raw.KnownWeight, 1e-12)
	require.InDelta(t, 0.4/0.7, raw.Score, 1e-12, "cpu and memory only")
	lat := raw.Terms[2]
	require.Equal(t, Latency, lat.Term)
	require.False(t, lat.Known)
	require.Zero(t, lat.EffectiveWeight)
	require.Equal(t, "unknown (partial: latency_p99: partial response: store 2 unreachable)", lat.Reason)
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown term", Options{Weights: Weights{"disk": 1}}, `weights: unknown term "disk"`},
		{"negative weight", Options{Weights: Weights{CPU: -1}}, "weights.cpu must be a finite number >= 0"},
		{"NaN weight", Options{Weights: Weights{CPU: math.NaN()}}, "weights.cpu"},
		{"all zero", Options{Weights: Weights{CPU: 0}}, "at least one term"},
		{"sum not finite", Options{Weights: Weights{CPU: 1e308, Memory: 1e308}}, "weights: their sum +Inf must be finite"},
		{"bad target", Options{Targets: Targets{CPUCores: -2}}, "targets.cpu_cores must be positive"},
		{"bad service target", Options{ServiceTargets: map[string]Targets{"a": {Latency: -time.Second}}}, "service_targets.a.latency must be positive"},
		{"min known", Options{MinKnownWeight: 1.5}, "min_known_weight must be in (0, 1]"},
		{"hysteresis", Options{ActAbove: 0.5, ReleaseBelow: 0.6}, "release_below < act_above"},
		{"act above 1", Options{ActAbove: 1.2, ReleaseBelow: 0.5}, "act_above must be below 1"},
		{"act at 1, never exceeded", Options{ActAbove: 1, ReleaseBelow: 0.5}, "act_above must be below 1"},
		{"act at 1 with default release", Options{ActAbove: 1}, "act_above must be below 1"},
		{"NaN act above", Options{ActAbove: math.NaN()}, "act_above NaN"},
		{"act below default release", Options{ActAbove: 0.4}, "release_below 0.5, act_above 0.4"},
		{"negative release", Options{ReleaseBelow: -0.1}, "0 < release_below"},
		{"half life", Options{HalfLife: -time.Second}, "half_life must be positive, got -1s"},
		{"max gap", Options{MaxGap: -time.Minute}, "max_gap must be positive, got -1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			require.ErrorIs(t, err, ErrInvalidOption)
			require.ErrorContains(t, err, tt.want)
		})
	}
	tr, err := New(Options{})
	require.NoError(t, err)
	require.Equal(t, DefaultOptions().Weights, tr.Options().Weights)
	require.Equal(t, 0.8, tr.Options().ActAbove)
	tr, err = New(Options{ActAbove: 0.9})
	require.NoError(t, err)
	require.Equal(t, 0.5, tr.Options().ReleaseBelow, "an unset threshold keeps its default")
}

// A known share equal to MinKnownWeight in decimal counts as reaching it,
// whatever the float sums round to: 0.3 of 0.4 known against 0.75, 0.6 of
// 0.75 against 0.8.
func TestKnownShareEqualToTheMinimumIsKnown(t *testing.T) {
	tests := []struct {
		w   Weights
		min float64
	}{
		{Weights{CPU: 0.05, Memory: 0.1, Latency: 0.25}, 0.75},
		{Weights{CPU: 0.05, Memory: 0.15, Latency: 0.55}, 0.8},
		{Weights{CPU: 0.05, Memory: 0.05, Latency: 0.3}, 0.875},
	}
	for _, tt := range tests {
		o := opts(t, Options{Weights: tt.w, MinKnownWeight: tt.min})
		raw := Compute(o, entry("s", map[signals.Signal]float64{signals.CPU: 0.5, signals.LatencyP99: 0.1})) // memory unknown
		require.True(t, raw.Known, "weights %v, min %v: %s", tt.w, tt.min, raw.Reason)
	}
	o := opts(t, Options{Weights: Weights{CPU: 0.05, Memory: 0.1, Latency: 0.25}, MinKnownWeight: 0.76})
	raw := Compute(o, entry("s", map[signals.Signal]float64{signals.CPU: 0.5, signals.LatencyP99: 0.1}))
	require.False(t, raw.Known, "a share really below the minimum stays unknown")
}

// For any weights and signals the score is in [0, 1], the known terms'
// contributions add up to it (to rounding), and it does not fall when one
// signal rises.
func TestScoreBoundedAdditiveAndMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		w := Weights{}
		for _, term := range Terms {
			if r.IntN(3) > 0 {
				w[term] = r.Float64() * math.Pow(10, float64(r.IntN(6)-3))
			}
		}
		o, err := Options{Weights: w, MinKnownWeight: 0.01}.normalize()
		if err != nil {
			continue
		}
		vals := map[signals.Signal]float64{signals.CPU: 2 * r.Float64(), signals.Memory: r.Float64() * (2 << 30), signals.LatencyP99: r.Float64() * 0.5,
			signals.InFlight: r.Float64() * 80, signals.Limit: 40, signals.QueueDelayP99: r.Float64() * 0.1}
		raw := Compute(&o, entry("s", vals))
		require.True(t, raw.Known)
		require.True(t, raw.Score >= 0 && raw.Score <= 1, "score %v", raw.Score)
		sum := 0.0
		for _, c := range raw.Terms {
			sum += c.Contribution
		}
		require.InDelta(t, raw.Score, sum, 1e-15)
		vals[signals.CPU] += 0.1
		require.GreaterOrEqual(t, Compute(&o, entry("s", vals)).Score, raw.Score)
	}
}

func TestNothingKnownIsUnknownWhateverMinKnownWeight(t *testing.T) {
	o := opts(t, Options{MinKnownWeight: 1e-12})
	raw := Compute(o, entry("a", nil))
	require.False(t, raw.Known, "a score with no known term: %+v", raw)
	require.True(t, math.IsNaN(raw.Score))
	tr, err := New(Options{MinKnownWeight: 1e-12})
	require.NoError(t, err)
	at := time.Unix(1000, 0)
	tr.Observe(at, entry("a", map[signals.Signal]float64{signals.CPU: 0.5}))
	sc := tr.Observe(at.Add(10*time.Second), entry("a", nil))
	require.False(t, sc.Known)
	require.InDelta(t, 0.5, sc.Value, 1e-9, "the smoothed score must survive an evaluation with nothing known")
	_, err = tr.MarshalBinary()
	require.NoError(t, err)
}
