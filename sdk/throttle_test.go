package governor_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// fakeSched is a synthetic cumulative scheduling latency histogram.
type fakeSched struct {
	mu      sync.Mutex
	counts  []uint64
	buckets []float64
	out     []uint64
}

func newFakeSched() *fakeSched {
	b := []float64{0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}
	return &fakeSched{buckets: b, counts: make([]uint64, len(b)-1), out: make([]uint64, len(b)-1)}
}

// add records n wake-ups that waited lat.
func (f *fakeSched) add(lat time.Duration, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := lat.Seconds()
	i := len(f.counts) - 1
	for j := range f.counts {
		if s < f.buckets[j+1] {
			i = j
			break
		}
	}
	f.counts[i] += n
}

func (f *fakeSched) ReadSchedLatency() ([]uint64, []float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(f.out, f.counts)
	return f.out, f.buckets
}

type throttled struct {
	g   *governor.Governor
	clk *clock.Fake
	src *fakeSched
	reg *prometheus.Registry
}

// newThrottled returns a governor on a fake clock with a fake scheduling
// latency source, a fixed limit far above what the tests admit and
// priority shedding, so only the overload throttle refuses.
func newThrottled(t *testing.T, o governor.OverloadOptions) *throttled {
	t.Helper()
	tt := &throttled{clk: clock.NewFake(fakeStart), src: newFakeSched(), reg: prometheus.NewRegistry()}
	if o.Source == nil {
		o.Source = tt.src
	}
	opts := governor.DefaultOptions("svc")
	opts.Clock = tt.clk
	opts.Overload = o
	opts.Registerer = tt.reg
	r := route("api", "/")
	r.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 100000}
	r.Shedding = &rules.Shedding{}
	opts.Defaults = ruleset(r)
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	tt.g = g
	return tt
}

// window lets one 100ms window pass with 200 wake-ups that waited lat, then
// offers n requests of every class and returns the share of each class
// (critical, core, browse, batch) that was refused.
func (tt *throttled) window(t *testing.T, lat time.Duration, n int) [4]float64 {
	t.Helper()
	tt.src.add(lat, 200)
	tt.clk.Advance(100 * time.Millisecond)
	return admitEach(t, tt.g, n)
}

func TestThrottleShedsLowerClassesFirstWhileLatencyIsHigh(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{ShedCritical: true})
	for range 5 {
		if r := tt.window(t, time.Millisecond, 100); r != [4]float64{} {
			t.Fatalf("refused %v at 1ms scheduling latency, want nothing", r)
		}
	}
	prev := 0.0
	sawBrowse, sawCore, sawCritical := false, false, false
	for w := range 30 {
		r := tt.window(t, 80*time.Millisecond, 400)
		level, lat := tt.g.OverloadLevel()
		if w == 0 && (level != 0 || r != [4]float64{}) {
			t.Fatalf("first slow window: level %v, refused %v, want nothing (one slow window is not trusted)", level, r)
		}
		if lat < 50*time.Millisecond || lat > 100*time.Millisecond {
			t.Fatalf("window latency %v, want the 80ms bucket's midpoint (75ms)", lat)
		}
		if level < prev {
			t.Fatalf("window %d: level fell from %v to %v while latency stayed high", w, prev, level)
		}
		prev = level
		// A class is refused only once every lower class is refused
		// entirely (up to sampling noise on the partial class).
		for c := 0; c < 3; c++ {
			if r[c] > 0 && r[c+1] < 1 {
				t.Fatalf("window %d (level %.2f): class %d refused %.2f while class %d refused only %.2f: %v", w, level, c, r[c], c+1, r[c+1], r)
			}
		}
		sawBrowse = sawBrowse || r[2] > 0
		sawCore = sawCore || r[1] > 0
		sawCritical = sawCritical || r[0] > 0
		if r[0] > 0 && (r[1] < 1 || r[2] < 1 || r[3] < 1) {
			t.Fatalf("critical refused %v before every other class was fully shed: %v", r[0], r)
		}
	}
	if !sawBrowse || !sawCore || !sawCritical {
		t.Fatalf("30 slow windows at 75ms: browse %v core %v critical %v shed, want the throttle to reach every class (level %v)", sawBrowse, sawCore, sawCritical, prev)
	}
	if prev != 4 {
		t.Fatalf("level %v after 30 slow windows, want the maximum 4", prev)
	}
}

func TestThrottleSparesCriticalByDefault(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{})
	tt.window(t, time.Millisecond, 1)
	var r [4]float64
	for range 30 {
		r = tt.window(t, 400*time.Millisecond, 100)
		if r[0] != 0 {
			t.Fatalf("critical refused %v without ShedCritical", r[0])
		}
	}
	if l, _ := tt.g.OverloadLevel(); l != 3 || r != [4]float64{0, 1, 1, 1} {
		t.Fatalf("level %v, refused %v after 30 windows at 400ms, want 3 and every class but critical", l, r)
	}
}

func TestThrottlePartialShare(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{})
	tt.window(t, time.Millisecond, 1)
	// 15ms against a 10ms target: relative error 0.5, +0.05 classes per
	// window from the second slow one.
	for range 11 {
		tt.window(t, 15*time.Millisecond, 1)
	}
	level, _ := tt.g.OverloadLevel()
	if level < 0.45 || level > 0.55 {
		t.Fatalf("level %v after 10 counted windows at 1.5x the target, want 0.5", level)
	}
	r := tt.window(t, 10*time.Millisecond, 4000) // at the target: level holds
	if r[3] < 0.45 || r[3] > 0.6 || r[2] != 0 {
		t.Fatalf("at level ~0.5 refused %v, want about half of batch and nothing else", r)
	}
}

func TestThrottleBacksOffWhenLatencyFalls(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{})
	tt.window(t, time.Millisecond, 1)
	for range 12 {
		tt.window(t, 150*time.Millisecond, 1)
	}
	high, _ := tt.g.OverloadLevel()
	if high < 3 {
		t.Fatalf("level %v after 12 slow windows, want at least 3", high)
	}
	// A window just below the target gives back little.
	tt.window(t, 7*time.Millisecond, 1)
	if l, _ := tt.g.OverloadLevel(); l > high || l < high-0.2 {
		t.Fatalf("one window at 7ms moved the level from %v to %v, want a small cut", high, l)
	}
	for w := range 20 {
		r := tt.window(t, time.Millisecond, 200)
		if l, _ := tt.g.OverloadLevel(); l == 0 {
			if w > 14 {
				t.Fatalf("level cleared after %d quiet windows, want at most 15", w+1)
			}
			if r != [4]float64{} {
				t.Fatalf("refused %v at level 0", r)
			}
			return
		}
	}
	l, _ := tt.g.OverloadLevel()
	t.Fatalf("level %v after 20 quiet windows, want 0", l)
}

// TestThrottleClearsAfterAQuietSpell: a level left from an overload gives
// back for every Window of a spell in which no request came (the load
// balancer took the instance out), not for the one window the first
// request back ends: the traffic that returns after a quiet minute was
// refused as if the overload had just ended.
func TestThrottleClearsAfterAQuietSpell(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{})
	tt.window(t, time.Millisecond, 1)
	for range 12 {
		tt.window(t, 150*time.Millisecond, 1)
	}
	if l, _ := tt.g.OverloadLevel(); l < 3 {
		t.Fatalf("level %v after 12 slow windows, want at least 3", l)
	}
	tt.src.add(time.Millisecond, 60000)
	tt.clk.Advance(time.Minute)
	r := admitEach(t, tt.g, 100)
	if l, _ := tt.g.OverloadLevel(); l != 0 || r != [4]float64{} {
		t.Fatalf("after a quiet minute: level %v, refused %v; want 0 and nothing", l, r)
	}
}

func TestThrottleIgnoresSingleSlowWindows(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{})
	tt.window(t, time.Millisecond, 1)
	for range 20 {
		// A GC-like stall: one window with a very high mean, then normal.
		for i, lat := range []time.Duration{400 * time.Millisecond, time.Millisecond, 2 * time.Millisecond} {
			if r := tt.window(t, lat, 50); r != [4]float64{} {
				t.Fatalf("window %d after a pause refused %v, want nothing", i, r)
			}
		}
	}
	if l, _ := tt.g.OverloadLevel(); l != 0 {
		t.Fatalf("level %v, want 0", l)
	}
}

func TestThrottleIgnoresQuietWindows(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{})
	tt.window(t, time.Millisecond, 1)
	for range 10 {
		tt.src.add(300*time.Millisecond, 3) // too few wake-ups to mean anything
		tt.clk.Advance(100 * time.Millisecond)
		if _, err := tt.g.Admit(context.Background(), governor.Request{Path: "/", Priority: "batch"}); err != nil {
			t.Fatalf("refused %v in a window with 3 wake-ups", err)
		}
	}
}

func TestThrottleOff(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{Disabled: true})
	for range 20 {
		if r := tt.window(t, 300*time.Millisecond, 20); r != [4]float64{} {
			t.Fatalf("disabled throttle refused %v", r)
		}
	}
	// An injected clock without a Source leaves the throttle off.
	opts := governor.DefaultOptions("svc")
	clk := clock.NewFake(fakeStart)
	opts.Clock = clk
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for range 5 {
		clk.Advance(time.Second)
		if _, err := g.Admit(context.Background(), governor.Request{Path: "/", Priority: "batch"}); err != nil {
			t.Fatal(err)
		}
	}
	if l, lat := g.OverloadLevel(); l != 0 || lat != 0 {
		t.Fatalf("OverloadLevel() = %v, %v without a source, want 0, 0", l, lat)
	}
}

func TestThrottleRejectionReasonAndMetrics(t *testing.T) {
	tt := newThrottled(t, governor.OverloadOptions{Target: 5 * time.Millisecond})
	tt.window(t, time.Millisecond, 1)
	for range 5 {
		tt.window(t, 150*time.Millisecond, 1)
	}
	_, err := tt.g.Admit(context.Background(), governor.Request{Path: "/", Priority: "batch"})
	var rej *governor.Rejection
	if !errors.As(err, &rej) || rej.Reason != governor.ReasonOverload || rej.Reason.String() != "overload" {
		t.Fatalf("Admit = %v, want a *Rejection with ReasonOverload", err)
	}
	if !errors.Is(err, governor.ErrOverload) || !errors.Is(err, governor.ErrShed) || !errors.Is(err, governor.ErrRejected) {
		t.Fatalf("%v does not unwrap to ErrOverload, ErrShed and ErrRejected", err)
	}
	m := gather(t, tt.reg)
	if v := m.value("governor_sdk_requests_total", map[string]string{"route": "api", "class": "batch", "outcome": "overload"}); v < 1 {
		t.Fatalf("requests_total{outcome=overload,class=batch} = %v, want at least 1", v)
	}
	if v := m.value("governor_sdk_overload_level", nil); v < 1 {
		t.Fatalf("overload_level = %v, want at least 1", v)
	}
	if v := m.value("governor_sdk_sched_latency_seconds", nil); v < 0.1 || v > 0.2 {
		t.Fatalf("sched_latency_seconds = %v, want the last window's mean (0.15)", v)
	}
}

func TestThrottleSparesShadowAndUnlimitedRoutes(t *testing.T) {
	src := newFakeSched()
	clk := clock.NewFake(fakeStart)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Overload.Source = src
	shadow := route("shadow", "/shadow")
	shadow.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 100000}
	shadow.Mode = rules.ModeShadow
	plain := route("plain", "/plain")
	opts.Defaults = ruleset(shadow, plain)
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for range 20 {
		src.add(200*time.Millisecond, 100)
		clk.Advance(100 * time.Millisecond)
		for _, path := range []string{"/shadow", "/plain"} {
			p, err := g.Admit(context.Background(), governor.Request{Path: path, Priority: "batch"})
			if err != nil {
				t.Fatalf("%s refused: %v", path, err)
			}
			p.Release(time.Millisecond, governor.Success)
		}
	}
	if l, _ := g.OverloadLevel(); l < 1 {
		t.Fatalf("level %v, want the throttle engaged", l)
	}
}

func TestOverloadOptionsValidation(t *testing.T) {
	tests := []struct {
		name  string
		o     governor.OverloadOptions
		field string
	}{
		{"negative target", governor.OverloadOptions{Target: -time.Millisecond}, "Overload.Target"},
		{"negative window", governor.OverloadOptions{Window: -time.Second}, "Overload.Window"},
		{"tiny window", governor.OverloadOptions{Window: time.Millisecond}, "Overload.Window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := governor.DefaultOptions("svc")
			opts.Clock = clock.NewFake(fakeStart)
			opts.Overload = tt.o
			g, err := governor.New(opts)
			if err == nil {
				g.Close()
				t.Fatal("New accepted invalid overload options")
			}
			if !errors.Is(err, governor.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q, want ErrInvalidOptions naming %s", err, tt.field)
			}
		})
	}
}

func TestRuntimeSchedLatencyReads(t *testing.T) {
	counts, buckets := governor.RuntimeSchedLatency().ReadSchedLatency()
	if len(counts) == 0 || len(buckets) != len(counts)+1 {
		t.Fatalf("runtime histogram: %d counts, %d buckets", len(counts), len(buckets))
	}
}

// cpuSched is a fakeSched that also reports the process's CPU time.
type cpuSched struct {
	*fakeSched
	used atomic.Int64
}

func (c *cpuSched) ReadCPUTime() (time.Duration, bool) { return time.Duration(c.used.Load()), true }

func TestThrottleActsOnlyWhenTheProcessIsBusy(t *testing.T) {
	src := &cpuSched{fakeSched: newFakeSched()}
	tt := newThrottled(t, governor.OverloadOptions{Source: src})
	tt.src = src.fakeSched
	procs := time.Duration(runtime.GOMAXPROCS(0))
	window := func(lat time.Duration, share float64) {
		src.used.Add(int64(float64(procs*100*time.Millisecond) * share))
		tt.window(t, lat, 1)
	}
	window(time.Millisecond, 0.9)
	// Slow windows while the process uses 20% of its CPUs: other
	// processes hold the machine, refusing would not help.
	for range 10 {
		window(200*time.Millisecond, 0.2)
	}
	if l, _ := tt.g.OverloadLevel(); l != 0 {
		t.Fatalf("level %v while the process was not busy, want 0", l)
	}
	for range 5 {
		window(200*time.Millisecond, 0.9)
	}
	high, _ := tt.g.OverloadLevel()
	if high < 2 {
		t.Fatalf("level %v after 5 slow, busy windows, want at least 2", high)
	}
	// Still slow, but the process is no longer busy: give back.
	window(200*time.Millisecond, 0.2)
	if l, _ := tt.g.OverloadLevel(); l >= high || l < high-0.3 {
		t.Fatalf("level went from %v to %v in a slow window the process was not busy in, want a cut of 0.15", high, l)
	}
}

// admitEach admits n requests of each class (critical, core, browse,
// batch) and returns the share of each that was refused; any refusal other
// than the overload throttle's fails the test.
func admitEach(t *testing.T, g *governor.Governor, n int) [4]float64 {
	t.Helper()
	return admitEachBy(t, g, n, time.Time{})
}

// admitEachBy is admitEach with every request stating deadline (none when
// zero).
func admitEachBy(t *testing.T, g *governor.Governor, n int, deadline time.Time) [4]float64 {
	t.Helper()
	var refused [4]float64
	for c, name := range []string{"critical", "core", "browse", "batch"} {
		for range n {
			p, err := g.Admit(context.Background(), governor.Request{Path: "/", Priority: name, Deadline: deadline})
			if err != nil {
				if !errors.Is(err, governor.ErrOverload) {
					t.Fatalf("refused for %v, want only overload refusals", err)
				}
				refused[c]++
				continue
			}
			p.Release(time.Millisecond, governor.Success)
		}
		refused[c] /= float64(n)
	}
	return refused
}
