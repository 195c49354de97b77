package limit_test

import (
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/limit/limittest"
	"governor.dev/governor/sdk/rules"
)

// observeOnly hides a limiter's RefusalObserver: the limiter then hears of
// requests only when they finish, as before stall detection.
type observeOnly struct{ limit.Limiter }

// A slow database: 32 connections at 30 ms, offered 60% of that; then every
// call takes 40 times longer. No request finishes for 1.2 s after the step,
// so Observe alone cannot see it for that long; told of the refusals, the
// limiter halves its limit within 1 s of the step (measured: 0.2 s), once.
// Without them, the same run has not halved within 1 s. Afterwards the gaps
// between the slow answers are not new stalls, and since the requests
// admitted after the cut are no faster, the limiter relearns the no-load RTT
// and lets the limit back up instead of cutting on.
func TestStallHalvesWithinOneSecondOfA40xStep(t *testing.T) {
	cfg := limittest.Config{
		Server: limittest.Server{Capacity: 32, Base: 30 * time.Millisecond, Jitter: 0.1},
		Rate:   640, Seed: 7, Poisson: true,
	}
	var sim *limittest.Sim
	run := func(hide bool) (time.Duration, bool, int, limit.Limiter) {
		clk := clock.NewFake(time.Time{})
		l, err := limit.New(rules.Concurrency{}, clk)
		if err != nil {
			t.Fatal(err)
		}
		var driven limit.Limiter = l
		if hide {
			driven = observeOnly{l}
		}
		sim = limittest.New(clk, driven, cfg)
		sim.Run(5 * time.Second)
		before := l.Limit()
		sim.Server.Base = 1200 * time.Millisecond
		took, ok := sim.RunUntil(time.Second, func() bool { return l.Limit() <= before/2 })
		return took, ok, before, l
	}
	took, ok, before, l := run(false)
	if !ok {
		t.Fatalf("limit %d -> %d: not halved within 1s of a 40x step", before, l.Limit())
	}
	if s := snap(l); s.Stalls != 1 {
		t.Errorf("%d stall cuts, want exactly 1 (one per stall)", s.Stalls)
	}
	halved := l.Limit()
	sim.Run(10 * time.Second)
	s := snap(l)
	if s.Stalls != 1 || s.NoLoadRTT < time.Second || l.Limit() <= halved {
		t.Errorf("10 s into the step: %d stall cuts, no-load RTT %v, limit %d; want one cut, the slow RTT relearned "+
			"and the limit back above %d", s.Stalls, s.NoLoadRTT, l.Limit(), halved)
	}
	t.Logf("limit %d halved %v after a 40x latency step; %d 10 s later (no-load RTT %v)", before, took, l.Limit(), s.NoLoadRTT)
	if _, ok, before, l := run(true); ok {
		t.Errorf("without refusals the limit still halved (%d -> %d) within 1s: the test no longer shows the stall cut", before, l.Limit())
	}
}

// Pauses are not stalls: 40 ms whole-server stalls once a second, at 60% of
// the capacity and at twice the capacity, never count as one (a stall needs
// a window length without any request finishing). What a pause still sheds
// is bounded by TestPausesAreNotOverload.
func TestPausesAreNotStalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
	}{{"0.6x", 6000}, {"2x", 20000}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := overloaded(3)
			cfg.Rate = tc.rate
			cfg.Server.PauseEvery, cfg.Server.PauseFor = time.Second, 40*time.Millisecond
			l, sim := setup(t, rules.Concurrency{}, cfg)
			sim.Run(20 * time.Second)
			if s := snap(l); s.Stalls != 0 {
				t.Errorf("%d stall cuts under 40 ms pauses", s.Stalls)
			}
		})
	}
}

// A refusal before the first window, or while requests keep finishing,
// changes nothing, and the fixed limit ignores refusals.
func TestRefusedWithoutStallKeepsTheLimit(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l, err := limit.New(rules.Concurrency{Initial: 40}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := l.(limit.RefusalObserver)
	r.Refused(clk.Nanotime()) // not started: nothing to judge
	for i := 0; i < 1000; i++ {
		clk.Advance(time.Millisecond)
		l.Observe(clk.Nanotime(), int64(10*time.Millisecond), 20, false)
		r.Refused(clk.Nanotime())
	}
	if s := snap(l); s.Stalls != 0 || l.Limit() < 40 {
		t.Errorf("limit %d after %d stall cuts, want >= 40 and none: requests kept finishing", l.Limit(), s.Stalls)
	}
	f, _ := limit.New(rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 8}, nil)
	f.(limit.RefusalObserver).Refused(int64(time.Hour))
	if f.Limit() != 8 {
		t.Errorf("fixed limit %d after a refusal, want 8", f.Limit())
	}
}

// A quiet route (5 requests/s of 10 ms) that gets a burst of more requests
// than its limit after half a second without one: the window is long
// overdue when the first refusal comes, but nothing was in flight during the
// silence, and the burst's requests all finish 10 ms later. No stall: the
// silence counts from the first refusal. (Counted from the overdue window
// end, every burst halved the limit, down to Min after four.)
func TestBurstsAfterQuietSpellsAreNotStalls(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l, err := limit.New(rules.Concurrency{}, clk)
	if err != nil {
		t.Fatal(err)
	}
	r := l.(limit.RefusalObserver)
	before := l.Limit()
	for range 5 {
		for range 10 { // 2 s at 5 requests/s
			clk.Advance(200 * time.Millisecond)
			l.Observe(clk.Nanotime(), int64(10*time.Millisecond), 1, false)
		}
		clk.Advance(500 * time.Millisecond)
		n := l.Limit() // the burst fills the limit; 10 more are refused
		for range 10 {
			r.Refused(clk.Nanotime())
		}
		clk.Advance(10 * time.Millisecond)
		for range n {
			l.Observe(clk.Nanotime(), int64(10*time.Millisecond), n, false)
		}
	}
	if s := snap(l); s.Stalls != 0 || l.Limit() < before {
		t.Errorf("limit %d -> %d after %d stall cuts; want no cut: every burst's requests finished in 10 ms", before, l.Limit(), s.Stalls)
	}
}

// The same step while a routine probe is lowering the limit: the probe's
// measurement is void (its requests are as stuck as any), so the stall
// abandons it and halves the limit as it would otherwise, within 1 s. Where
// the first probe falls is a matter of the seed (the clock reading by
// default): a step during it must not wait for the probe's windows, which
// need answers the stall holds back.
func TestStallDuringAProbeHalvesWithinOneSecond(t *testing.T) {
	cfg := limittest.Config{
		Server: limittest.Server{Capacity: 32, Base: 30 * time.Millisecond, Jitter: 0.1},
		Rate:   1500, Seed: 7, Poisson: true,
	}
	clk := clock.NewFake(time.Time{})
	l, err := limit.New(rules.Concurrency{}, clk, limit.WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	sim := limittest.New(clk, l, cfg)
	if _, ok := sim.RunUntil(10*time.Second, func() bool { return snap(l).Probing }); !ok {
		t.Fatal("no probe within 10 s")
	}
	before := l.Limit()
	sim.Server.Base = 1200 * time.Millisecond
	took, ok := sim.RunUntil(time.Second, func() bool { return l.Limit() <= before/2 })
	if !ok {
		t.Fatalf("limit %d -> %d (probing %v): not halved within 1s of a 40x step during a probe", before, l.Limit(), snap(l).Probing)
	}
	if s := snap(l); s.Stalls != 1 || s.Probing {
		t.Errorf("%d stall cuts, probing %v; want one cut and the probe abandoned", s.Stalls, s.Probing)
	}
	t.Logf("limit %d halved %v after a 40x latency step during a probe", before, took)
}
