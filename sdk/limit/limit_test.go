package limit

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func TestNewResolvesDefaults(t *testing.T) {
	tests := []struct {
		name       string
		cfg        rules.Concurrency
		opts       []Option
		wantLimit  int
		wantMin    int
		wantMax    int
		wantKind   string
		wantTol    float64
		wantProbeS float64
	}{
		{"empty is gradient with documented defaults", rules.Concurrency{}, nil, 20, 4, 1000, "gradient", 0.5, 60},
		{"fixed starts at max", rules.Concurrency{Algorithm: "fixed", Max: 50}, nil, 50, 0, 0, "fixed", 0, 0},
		{"little", rules.Concurrency{Algorithm: "little", Tolerance: 1, ProbeInterval: rules.Duration(5 * time.Second)}, nil, 20, 4, 1000, "little", 1, 5},
		{"small max lowers initial and min", rules.Concurrency{Max: 3}, nil, 3, 3, 3, "gradient", 0.5, 60},
		{"large min raises initial", rules.Concurrency{Min: 50}, nil, 50, 50, 1000, "gradient", 0.5, 60},
		{"min above default max raises max", rules.Concurrency{Min: 2000}, nil, 2000, 2000, 2000, "gradient", 0.5, 60},
		{"explicit initial", rules.Concurrency{Initial: 7, Min: 2, Max: 9}, nil, 7, 2, 9, "gradient", 0.5, 60},
		{"small initial lowers the default min", rules.Concurrency{Initial: 2}, nil, 2, 2, 1000, "gradient", 0.5, 60},
		{"initial limit option carries a learned limit", rules.Concurrency{}, []Option{WithInitialLimit(300)}, 300, 4, 1000, "gradient", 0.5, 60},
		{"initial limit option is clamped to max", rules.Concurrency{Max: 100}, []Option{WithInitialLimit(300)}, 100, 4, 100, "gradient", 0.5, 60},
		{"initial limit option is clamped to min", rules.Concurrency{Min: 10}, []Option{WithInitialLimit(2)}, 10, 10, 1000, "gradient", 0.5, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.cfg, clock.NewFake(time.Time{}), tt.opts...)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := l.Limit(); got != tt.wantLimit {
				t.Errorf("Limit() = %d, want %d", got, tt.wantLimit)
			}
			var c *core
			switch v := l.(type) {
			case *Gradient:
				c = &v.core
				if tt.wantKind != "gradient" {
					t.Fatalf("got a gradient limiter, want %s", tt.wantKind)
				}
			case *Little:
				c = &v.core
				if tt.wantKind != "little" {
					t.Fatalf("got a little limiter, want %s", tt.wantKind)
				}
			case *Fixed:
				if tt.wantKind != "fixed" {
					t.Fatalf("got a fixed limiter, want %s", tt.wantKind)
				}
				return
			}
			if c.p.min != tt.wantMin || c.p.max != tt.wantMax {
				t.Errorf("bounds = [%d, %d], want [%d, %d]", c.p.min, c.p.max, tt.wantMin, tt.wantMax)
			}
			if c.p.tolerance != tt.wantTol {
				t.Errorf("tolerance = %v, want %v", c.p.tolerance, tt.wantTol)
			}
			if got := time.Duration(c.p.probeInterval).Seconds(); got != tt.wantProbeS {
				t.Errorf("probe interval = %vs, want %vs", got, tt.wantProbeS)
			}
		})
	}
}

func TestNewRefusesBadInput(t *testing.T) {
	nan := 0.0
	nan = nan / nan
	tests := []struct {
		name      string
		cfg       rules.Concurrency
		opts      []Option
		sentinel  error
		wantField string
	}{
		{"unknown algorithm", rules.Concurrency{Algorithm: "vegas"}, nil, ErrInvalidConfig, "concurrency.algorithm"},
		{"negative initial", rules.Concurrency{Initial: -1}, nil, ErrInvalidConfig, "concurrency.initial"},
		{"huge max", rules.Concurrency{Max: 1 << 21}, nil, ErrInvalidConfig, "concurrency.max"},
		{"min above max", rules.Concurrency{Min: 10, Max: 5}, nil, ErrInvalidConfig, "concurrency.min"},
		{"initial above max", rules.Concurrency{Initial: 10, Max: 5}, nil, ErrInvalidConfig, "concurrency.initial"},
		{"initial below min", rules.Concurrency{Initial: 2, Min: 5}, nil, ErrInvalidConfig, "concurrency.initial"},
		{"fixed without max", rules.Concurrency{Algorithm: "fixed"}, nil, ErrInvalidConfig, "concurrency.max"},
		{"NaN tolerance", rules.Concurrency{Tolerance: nan}, nil, ErrInvalidConfig, "concurrency.tolerance"},
		{"negative tolerance", rules.Concurrency{Tolerance: -0.1}, nil, ErrInvalidConfig, "concurrency.tolerance"},
		{"short probe interval", rules.Concurrency{ProbeInterval: rules.Duration(time.Millisecond)}, nil, ErrInvalidConfig, "concurrency.probe_interval"},
		{"zero initial limit option", rules.Concurrency{}, []Option{WithInitialLimit(0)}, ErrInvalidOption, "initial limit"},
		{"tiny window", rules.Concurrency{}, []Option{WithWindow(time.Microsecond)}, ErrInvalidOption, "window"},
		{"zero min samples", rules.Concurrency{}, []Option{WithMinSamples(0)}, ErrInvalidOption, "min samples"},
		{"nil signal", rules.Concurrency{}, []Option{WithOverloadSignal(nil)}, ErrInvalidOption, "overload signal"},
		{"negative hold", rules.Concurrency{}, []Option{WithHold(-time.Second)}, ErrInvalidOption, "hold"},
		{"too many shards", rules.Concurrency{}, []Option{WithShards(4096)}, ErrInvalidOption, "shards"},
		{"negative snapshot learned", rules.Concurrency{}, []Option{WithSnapshot(Snapshot{Learned: -1})}, ErrInvalidOption, "snapshot Learned"},
		{"negative snapshot no-load RTT", rules.Concurrency{}, []Option{WithSnapshot(Snapshot{NoLoadRTT: -1})}, ErrInvalidOption, "snapshot NoLoadRTT"},
		{"NaN snapshot throughput", rules.Concurrency{Algorithm: "little"}, []Option{WithSnapshot(Snapshot{MaxThroughput: nan})}, ErrInvalidOption, "snapshot MaxThroughput"},
		// An infinite throughput turned NaN at the first window that used
		// the limit: Little's law stopped moving, and the next rule change
		// failed to carry the snapshot.
		{"infinite snapshot throughput", rules.Concurrency{Algorithm: "little"}, []Option{WithSnapshot(Snapshot{MaxThroughput: math.Inf(1)})}, ErrInvalidOption, "snapshot MaxThroughput"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.cfg, nil, tt.opts...)
			if err == nil {
				t.Fatalf("New returned %T, want an error", l)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("error %q does not wrap %q", err, tt.sentinel)
			}
			if !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("error %q does not name %q", err, tt.wantField)
			}
		})
	}
}

// Every rules.Concurrency that rules.Validate accepts must build.
func TestNewAcceptsWhatRulesValidateAccepts(t *testing.T) {
	for _, cc := range []rules.Concurrency{
		{}, {Algorithm: "little", Initial: 1, Min: 1, Max: 1}, {Algorithm: "fixed", Max: 1 << 20},
		{Tolerance: 10, ProbeInterval: rules.Duration(24 * time.Hour)},
	} {
		rs := rules.Ruleset{Service: "s", Routes: []rules.Route{{Name: "r", Match: rules.Match{PathPrefix: "/"}, Concurrency: &cc}}}
		if err := rs.Validate(); err != nil {
			t.Fatalf("rules.Validate(%+v): %v", cc, err)
		}
		if _, err := New(cc, nil); err != nil {
			t.Errorf("New(%+v): %v", cc, err)
		}
	}
}

func newTestCore(t *testing.T, cfg rules.Concurrency, opts ...Option) *core {
	t.Helper()
	l, err := New(cfg, clock.NewFake(time.Time{}), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &l.(*Gradient).core
}

func TestWindowNeedsMinSamples(t *testing.T) {
	const ms = int64(time.Millisecond)
	c := newTestCore(t, rules.Concurrency{}, WithMinSamples(10))
	// 9 slow samples over 5 windows: no decision, the window is extended.
	for i := range int64(9) {
		c.Observe(50*ms+i*50*ms, 500*ms, 20, false)
	}
	if n := c.Snapshot().Windows; n != 0 {
		t.Fatalf("decided %d windows on 9 samples", n)
	}
	if got := countSamples(c.shards); got != 9 {
		t.Fatalf("samples kept = %d, want 9 (the window extends)", got)
	}
	// The tenth sample completes the window.
	c.Observe(500*ms, 500*ms, 20, false)
	if n := c.Snapshot().Windows; n != 1 {
		t.Fatalf("decided %d windows after 10 samples, want 1", n)
	}
	// Stale windows with too few samples are discarded, not decided.
	for i := range int64(5) {
		c.Observe(600*ms+i*400*ms, 500*ms, 20, false)
	}
	if n := c.Snapshot().Windows; n != 1 {
		t.Fatalf("decided %d windows, want still 1", n)
	}
	if got := countSamples(c.shards); got >= 5 {
		t.Fatalf("stale samples were not discarded: %d kept", got)
	}
}

func TestShardGuardsCloseAStuckWindow(t *testing.T) {
	tests := []struct {
		name  string
		rtt   int64
		calls int
	}{
		{"sample count", 1000, 1<<19 + 10},
		{"rtt sum", 1 << 40, 1<<13 + 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCore(t, rules.Concurrency{}, WithShards(1))
			// A caller whose clock never moves must not overflow the counters.
			for range tt.calls {
				c.Observe(1, tt.rtt, 1, false)
			}
			if c.taken == 0 {
				t.Fatal("no window was closed")
			}
			if c.taken+countSamples(c.shards) != int64(tt.calls) {
				t.Fatalf("accounted %d samples, want %d", c.taken+countSamples(c.shards), tt.calls)
			}
		})
	}
}

func TestPackedCounters(t *testing.T) {
	c := newTestCore(t, rules.Concurrency{Initial: 10}, WithShards(1), WithMinSamples(1000))
	c.Observe(1, 100, 8, false) // 100 ns rounds to 2 units of 64 ns
	c.Observe(1, 200, 7, true)  // 3 units
	c.Observe(1, -5, 9, true)   // a negative rtt counts as 0
	var w window
	take(c.shards, &w)
	want := window{count: 3, drops: 2, maxInflight: 9, sumRTT: 5 * 64}
	if w != want {
		t.Fatalf("window = %+v, want %+v", w, want)
	}
	w.end = 1000
	w.finish(8)
	if !w.used || w.avgRTT != 320.0/3 || w.concurrency != 0.32 {
		t.Fatalf("finish: %+v", w)
	}
}

func TestRTTUnits(t *testing.T) {
	tests := []struct {
		rtt  int64
		want uint64
	}{
		{-1, 0}, {0, 0}, {31, 0}, {32, 1}, {64, 1}, {96, 2}, {int64(time.Millisecond), 15625},
		{int64(time.Hour), maxRTTUnit},
	}
	for _, tt := range tests {
		if got := rttUnits(tt.rtt); got != tt.want {
			t.Errorf("rttUnits(%d) = %d, want %d", tt.rtt, got, tt.want)
		}
	}
}

// Concurrent Observe calls closing windows lose no sample (run with -race).
func TestConcurrentObserveAccountsEverySample(t *testing.T) {
	const goroutines, each = 8, 20000
	c := newTestCore(t, rules.Concurrency{}, WithWindow(time.Millisecond))
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range int64(each) {
				// Clocks of different goroutines disagree a little, as they do.
				now := i*int64(2*time.Microsecond) + int64(g)*1000
				c.Observe(now, int64(time.Millisecond), 15, i%100 == 0)
			}
		})
	}
	wg.Wait()
	if got := c.taken + countSamples(c.shards); got != goroutines*each {
		t.Fatalf("accounted %d samples, want %d", got, goroutines*each)
	}
	s := c.Snapshot()
	if s.Windows < 10 {
		t.Fatalf("only %d windows decided", s.Windows)
	}
	if s.Limit < 4 || s.Limit > 1000 {
		t.Fatalf("limit %d out of bounds", s.Limit)
	}
}

func TestFixedIgnoresSamples(t *testing.T) {
	l, err := New(rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 42}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(1000) {
		l.Observe(i*int64(time.Millisecond), int64(time.Second), 42, true)
	}
	if l.Limit() != 42 {
		t.Fatalf("Limit() = %d, want 42", l.Limit())
	}
	if s := l.(Inspector).Snapshot(); s.Limit != 42 || !s.Engaged {
		t.Fatalf("Snapshot() = %+v", s)
	}
}

func TestPanickingSignalDoesNotFreezeTheLimiter(t *testing.T) {
	calls := 0
	l, err := New(rules.Concurrency{Algorithm: rules.AlgorithmLittle}, clock.NewFake(time.Time{}),
		WithOverloadSignal(func() bool {
			calls++
			if calls == 1 {
				panic("signal failed")
			}
			return true
		}))
	if err != nil {
		t.Fatal(err)
	}
	observeWindow := func(start int64) {
		for i := range int64(20) {
			l.Observe(start+i*int64(10*time.Millisecond), int64(time.Millisecond), 20, false)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the signal's panic was swallowed")
			}
		}()
		observeWindow(0)
	}()
	observeWindow(int64(time.Second))
	if calls < 2 {
		t.Fatalf("signal called %d times: the window closing is stuck", calls)
	}
}

// A window the limit itself holds below MinSamples (a very slow dependency)
// keeps extending until it can decide, instead of being discarded as low
// traffic.
func TestWindowInUseExtendsUntilItCanDecide(t *testing.T) {
	const ms = int64(time.Millisecond)
	c := newTestCore(t, rules.Concurrency{Initial: 10}, WithMinSamples(10))
	// One sample every 300 ms, admitted with in-flight 10 (the whole limit):
	// the tenth arrives 3 s in, far past ten window lengths.
	for i := range int64(10) {
		c.Observe(300*ms*(i+1), 2000*ms, 10, false)
	}
	if n := c.Snapshot().Windows; n != 1 {
		t.Fatalf("decided %d windows, want 1 (the extended window)", n)
	}
	// The same samples without the limit in use are low traffic: discarded.
	c = newTestCore(t, rules.Concurrency{Initial: 10}, WithMinSamples(10))
	for i := range int64(10) {
		c.Observe(300*ms*(i+1), 2000*ms, 2, false)
	}
	if n := c.Snapshot().Windows; n != 0 {
		t.Fatalf("decided %d windows on low traffic, want 0", n)
	}
}

// A released Little's-law limit is a loose cap: twice the learned limit or
// twice the recent peak in-flight, reached by doubling per window, so neither
// a release nor a stall downstream lets an unbounded backlog in.
func TestReleasedLimitRamps(t *testing.T) {
	on := true
	l, err := New(rules.Concurrency{Algorithm: rules.AlgorithmLittle, Initial: 10}, clock.NewFake(time.Time{}),
		WithOverloadSignal(func() bool { return on }), WithHold(0))
	if err != nil {
		t.Fatal(err)
	}
	const ms = int64(time.Millisecond)
	now := int64(0)
	window := func(inflight func() int) []int {
		for range 20 {
			now += 5 * ms
			l.Observe(now, 5*ms, inflight(), false)
		}
		return []int{l.Limit()}
	}
	light := func() int { return 1 }
	window(light)
	window(light)
	if got := l.Limit(); got != 10 {
		t.Fatalf("engaged limit %d, want 10", got)
	}
	on = false
	var seen []int
	for range 3 {
		seen = append(seen, window(light)...)
	}
	if want := []int{20, 20, 20}; !slices.Equal(seen, want) {
		t.Fatalf("light demand after release: limits %v, want %v (twice the learned 10)", seen, want)
	}
	// Demand that fills whatever is allowed doubles the cap per window.
	seen = nil
	for range 8 {
		seen = append(seen, window(l.Limit)...)
	}
	if want := []int{40, 80, 160, 320, 640, 1000, 1000, 1000}; !slices.Equal(seen, want) {
		t.Fatalf("growing demand after release: limits %v, want %v", seen, want)
	}
	on = true
	window(light)
	if s := l.(Inspector).Snapshot(); !s.Engaged || l.Limit() != s.Learned {
		t.Fatalf("re-engaged: Limit() = %d, snapshot %+v; want the learned limit", l.Limit(), s)
	}
}

// A rule change carries the learned state over with WithSnapshot.
func TestWithSnapshotCarriesLearnedState(t *testing.T) {
	for _, alg := range []string{rules.AlgorithmGradient, rules.AlgorithmLittle} {
		t.Run(alg, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			old, err := New(rules.Concurrency{Algorithm: alg}, clk)
			if err != nil {
				t.Fatal(err)
			}
			const ms = int64(time.Millisecond)
			for i := range int64(200) {
				old.Observe(i*ms, 7*ms, 20, false) // in use, fast: grows
			}
			s := old.(Inspector).Snapshot()
			if s.Learned <= 20 || s.NoLoadRTT != 7*time.Millisecond {
				t.Fatalf("old limiter did not learn: %+v", s)
			}
			next, err := New(rules.Concurrency{Algorithm: alg, Tolerance: 0.3}, clk, WithSnapshot(s))
			if err != nil {
				t.Fatal(err)
			}
			got := next.(Inspector).Snapshot()
			if got.Learned != s.Learned || got.NoLoadRTT != s.NoLoadRTT || got.MaxThroughput != s.MaxThroughput {
				t.Fatalf("carried %+v, want the learned state of %+v", got, s)
			}
		})
	}
	if _, err := New(rules.Concurrency{}, nil, WithSnapshot(Snapshot{NoLoadRTT: -1})); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("negative snapshot: err = %v", err)
	}
}

// Probe schedules repeat on the same clock reading and seed, and differ
// between instances started at different times, so a fleet does not probe
// all at once.
func TestProbeScheduleSeeding(t *testing.T) {
	at := func(start time.Duration, opts ...Option) int64 {
		clk := clock.NewFake(time.Time{})
		clk.Advance(start)
		l, err := New(rules.Concurrency{}, clk, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return coreOf(l).nextProbe - int64(start)
	}
	if a, b := at(time.Second), at(time.Second); a != b {
		t.Fatalf("same start, different probe delays %d and %d", a, b)
	}
	if a, b := at(time.Second), at(time.Second+1); a == b {
		t.Fatalf("different starts, same probe delay %d", a)
	}
	if a, b := at(time.Second, WithSeed(7)), at(2*time.Second, WithSeed(7)); a != b {
		t.Fatalf("same seed, different probe delays %d and %d", a, b)
	}
	for _, start := range []time.Duration{0, time.Second, time.Hour} {
		if d := at(start); d < int64(2250*time.Millisecond) || d > int64(3750*time.Millisecond) {
			t.Fatalf("first probe delay %v outside 3s ± 25%%", time.Duration(d))
		}
	}
}
