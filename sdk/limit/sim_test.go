package limit_test

import (
	"fmt"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/limit/limittest"
	"governor.dev/governor/sdk/rules"
)

var adaptive = []string{rules.AlgorithmGradient, rules.AlgorithmLittle}

// setup builds a limiter and a simulation on one fake clock.
func setup(t *testing.T, cc rules.Concurrency, cfg limittest.Config, opts ...limit.Option) (limit.Limiter, *limittest.Sim) {
	t.Helper()
	clk := clock.NewFake(time.Time{})
	l, err := limit.New(cc, clk, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l, limittest.New(clk, l, cfg)
}

func snap(l limit.Limiter) limit.Snapshot { return l.(limit.Inspector).Snapshot() }

// A server with 100 workers at 10 ms, offered twice its capacity.
func overloaded(seed uint64) limittest.Config {
	return limittest.Config{
		Server: limittest.Server{Capacity: 100, Base: 10 * time.Millisecond, Jitter: 0.1},
		Rate:   20000, Seed: seed, Poisson: true,
	}
}

// The limiter cuts within 1 s of a 10x latency step and recovers within 2 s
// after it clears, in virtual time. The step lasts 1 s, shorter than it takes
// to conclude that the slowness is not its own queue (see
// TestSlowDependencyIsRelearned). The measured times are logged (-v).
func TestLatencyStep(t *testing.T) {
	for _, alg := range adaptive {
		t.Run(alg, func(t *testing.T) {
			l, sim := setup(t, rules.Concurrency{Algorithm: alg}, overloaded(1))
			sim.Run(5 * time.Second)
			before := l.Limit()
			if before < 100 {
				t.Fatalf("settled limit %d is below the server's capacity 100", before)
			}

			sim.Server.Base = 100 * time.Millisecond
			firstCut, _ := sim.RunUntil(time.Second, func() bool { return l.Limit() < before*9/10 })
			half, ok := sim.RunUntil(time.Second-firstCut, func() bool { return l.Limit() <= before/2 })
			half += firstCut
			if !ok || half > time.Second {
				t.Fatalf("limit %d -> %d: not halved within 1s of the step (took %v)", before, l.Limit(), half)
			}
			sim.Run(time.Second - half)
			bottom := l.Limit()

			sim.Server.Base = 10 * time.Millisecond
			recovered, ok := sim.RunUntil(2*time.Second, func() bool { return l.Limit() >= before*9/10 })
			if !ok {
				t.Fatalf("limit %d: not back to 90%% of %d within 2s after the step cleared", l.Limit(), before)
			}
			sim.Run(2*time.Second - recovered)
			mark := sim.Stats()
			sim.Run(time.Second)
			if lat := sim.Stats().Sub(mark).MeanLatency(); lat > 18*time.Millisecond {
				t.Fatalf("latency 2s after the step cleared %v, want at most 1.8x the 10ms base", lat)
			}
			t.Logf("%s: limit %d; 10x latency step: first cut after %v, halved after %v, %d when it cleared 1s later; "+
				"back to 90%% after %v (virtual time)", alg, before, firstCut, half, bottom, recovered)
		})
	}
}

// A dependency that stays 10x slower is not overload the limiter can fix:
// once halving the limit did not bring the latency down, it probes at once,
// adopts the slower no-load RTT and lets the limit back up to what the server
// can take, instead of holding it at its floor until the next probe interval
// (a minute by default).
func TestSlowDependencyIsRelearned(t *testing.T) {
	for _, alg := range adaptive {
		t.Run(alg, func(t *testing.T) {
			l, sim := setup(t, rules.Concurrency{Algorithm: alg}, overloaded(11))
			sim.Run(5 * time.Second)
			sim.Server.Base = 100 * time.Millisecond
			relearned, ok := sim.RunUntil(10*time.Second, func() bool { return snap(l).NoLoadRTT > 80*time.Millisecond })
			if !ok {
				t.Fatalf("no-load RTT still %v after 10s at 100ms", snap(l).NoLoadRTT)
			}
			sim.Run(5 * time.Second)
			mark := sim.Stats()
			sim.Run(5 * time.Second)
			st := sim.Stats().Sub(mark)
			if lim := l.Limit(); lim < 100 {
				t.Fatalf("limit %d under a 100ms dependency, want at least the 100 workers", lim)
			}
			if lat := st.MeanLatency(); lat > 180*time.Millisecond {
				t.Fatalf("mean latency %v, want within 1.8x the new 100ms base", lat)
			}
			full := 100 / 0.1 * 5.0 // what 100 workers at 100 ms complete in 5 s
			if share := float64(st.Completed) / full; share < 0.9 {
				t.Fatalf("completed %.0f%% of what the server can do", share*100)
			}
			t.Logf("%s: no-load RTT relearned %v after the dependency slowed down; limit %d, latency %v, %.0f%% of the server's throughput",
				alg, relearned, l.Limit(), st.MeanLatency(), float64(st.Completed)/full*100)
		})
	}
}

// A latency step longer than a probe interval is adopted as the new no-load
// RTT; when it clears, the sudden drop of the RTT triggers a probe at once
// instead of leaving the limit tuned to the slow period for a whole interval.
func TestStaleBaselineIsReprobedAtOnce(t *testing.T) {
	for _, alg := range adaptive {
		t.Run(alg, func(t *testing.T) {
			cc := rules.Concurrency{Algorithm: alg, ProbeInterval: rules.Duration(time.Second)}
			l, sim := setup(t, cc, overloaded(2))
			sim.Run(3 * time.Second)
			sim.Server.Base = 100 * time.Millisecond
			sim.Run(5 * time.Second)
			if nl := snap(l).NoLoadRTT; nl < 80*time.Millisecond {
				t.Fatalf("no-load RTT %v after 5s at 100ms, want it adopted", nl)
			}
			sim.Server.Base = 10 * time.Millisecond
			took, ok := sim.RunUntil(2*time.Second, func() bool { return snap(l).NoLoadRTT < 12*time.Millisecond })
			if !ok {
				t.Fatalf("no-load RTT still %v 2s after the step cleared", snap(l).NoLoadRTT)
			}
			sim.Run(time.Second)
			mark := sim.Stats()
			sim.Run(time.Second)
			if lat := sim.Stats().Sub(mark).MeanLatency(); lat > 18*time.Millisecond {
				t.Fatalf("latency %v after the step cleared, want at most 1.8x the 10ms base", lat)
			}
			t.Logf("%s: no-load RTT back to the 10ms base %v after the step cleared", alg, took)
		})
	}
}

// Under sustained overload with a probe every second for a minute, the
// no-load RTT estimate stays at the server's base latency instead of
// creeping up with the queueing the limiter itself allows.
func TestNoLoadRTTDoesNotDriftUnderSustainedLoad(t *testing.T) {
	for _, alg := range adaptive {
		t.Run(alg, func(t *testing.T) {
			cc := rules.Concurrency{Algorithm: alg, ProbeInterval: rules.Duration(time.Second)}
			cfg := limittest.Config{
				Server: limittest.Server{Capacity: 20, Base: 10 * time.Millisecond, Jitter: 0.2},
				Rate:   6000, Poisson: true, Seed: 3,
			}
			l, sim := setup(t, cc, cfg)
			sim.Run(2 * time.Second)
			var worstRTT time.Duration
			var worstLat time.Duration
			for range 60 {
				mark := sim.Stats()
				sim.Run(time.Second)
				s := snap(l)
				worstRTT = max(worstRTT, s.NoLoadRTT)
				worstLat = max(worstLat, sim.Stats().Sub(mark).MeanLatency())
			}
			if p := snap(l).Probes; p < 30 {
				t.Fatalf("only %d probes in 60s", p)
			}
			if worstRTT > 11500*time.Microsecond {
				t.Fatalf("no-load RTT drifted to %v (base 10ms)", worstRTT)
			}
			if worstLat > 20*time.Millisecond {
				t.Fatalf("mean latency reached %v in a second (base 10ms, tolerance 50%%)", worstLat)
			}
			t.Logf("%s: %d probes in 62s at 3x overload; highest no-load RTT %v, worst mean latency of a second %v",
				alg, snap(l).Probes, worstRTT, worstLat)
		})
	}
}

// Probing for the no-load RTT lowers the limit partially and briefly: the
// server keeps most of its throughput during a probe.
func TestProbeKeepsThroughput(t *testing.T) {
	for _, alg := range adaptive {
		t.Run(alg, func(t *testing.T) {
			cc := rules.Concurrency{Algorithm: alg, ProbeInterval: rules.Duration(5 * time.Second)}
			l, sim := setup(t, cc, overloaded(4))
			sim.Run(3 * time.Second)
			const tick = 100 * time.Millisecond
			full := 100.0 / 0.010 * tick.Seconds() // capacity: completions per tick
			var probeTicks, probeDone int64
			minLimit, lowest := l.Limit(), 1.0
			start := sim.Stats()
			for range 300 {
				mark := sim.Stats()
				probing := snap(l).Probing
				sim.Run(tick)
				if probing {
					probeTicks++
					probeDone += sim.Stats().Sub(mark).Completed
					minLimit = min(minLimit, l.Limit())
					lowest = min(lowest, float64(sim.Stats().Sub(mark).Completed)/full)
				}
			}
			if probeTicks == 0 {
				t.Fatal("no probe in 30s")
			}
			share := float64(probeDone) / (float64(probeTicks) * full)
			if share < 0.8 || lowest < 0.6 {
				t.Fatalf("throughput during probes %.0f%% of capacity (lowest tick %.0f%%), want >= 80%% (60%%)", share*100, lowest*100)
			}
			total := sim.Stats().Sub(start)
			if g := float64(total.Completed) / (30 * 100 / 0.010); g < 0.95 {
				t.Fatalf("completions over 30s are %.0f%% of capacity", g*100)
			}
			t.Logf("%s: %d probes over 30s, %d ticks probing; throughput during probes %.1f%% of capacity (lowest tick %.1f%%), lowest limit %d",
				alg, snap(l).Probes, probeTicks, share*100, lowest*100, minLimit)
		})
	}
}

// At low traffic the limit neither decides on too few samples nor ratchets
// down on noisy latency and timeouts it cannot influence.
func TestLowTrafficDoesNotCollapseTheLimit(t *testing.T) {
	tests := []struct {
		name        string
		cfg         limittest.Config
		wantWindows bool
	}{
		{"too few samples for a window", limittest.Config{
			Server: limittest.Server{Capacity: 100, Base: 200 * time.Millisecond, Jitter: 0.9},
			Rate:   2, Poisson: true, Seed: 5,
		}, false},
		{"noisy latency and timeouts at low in-flight", limittest.Config{
			Server: limittest.Server{Capacity: 100, Base: 10 * time.Millisecond, Jitter: 0.9},
			Rate:   300, Poisson: true, Timeout: 15 * time.Millisecond, Seed: 6,
		}, true},
	}
	for _, alg := range adaptive {
		for _, tt := range tests {
			t.Run(alg+"/"+tt.name, func(t *testing.T) {
				l, sim := setup(t, rules.Concurrency{Algorithm: alg}, tt.cfg)
				sim.Run(60 * time.Second)
				s := snap(l)
				if s.Learned != 20 {
					t.Fatalf("learned limit moved from 20 to %d at low traffic (%d windows, %d dropped)", s.Learned, s.Windows, sim.Stats().Dropped)
				}
				if got := s.Windows > 0; got != tt.wantWindows {
					t.Fatalf("decided %d windows", s.Windows)
				}
			})
		}
	}
}

// With flat latency the limit grows only as far as it is used.
func TestFlatLatencyGrowsOnlyWhenUsed(t *testing.T) {
	tests := []struct {
		rate     float64 // demand in-flight = rate x 10ms
		min, max int
	}{
		{rate: 1000, min: 20, max: 20},    // demand 10: the limit of 20 is never used
		{rate: 10000, min: 100, max: 200}, // demand 100: grows to it, not to Max
	}
	for _, alg := range adaptive {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/demand_%.0f", alg, tt.rate/100), func(t *testing.T) {
				cfg := limittest.Config{Server: limittest.Server{Capacity: 1 << 20, Base: 10 * time.Millisecond, Jitter: 0.1}, Rate: tt.rate, Seed: 7}
				l, sim := setup(t, rules.Concurrency{Algorithm: alg}, cfg)
				sim.Run(15 * time.Second)
				if got := snap(l).Learned; got < tt.min || got > tt.max {
					t.Fatalf("learned limit %d with flat latency, want within [%d, %d]", got, tt.min, tt.max)
				}
			})
		}
	}
}

// Timeouts reported as drops cut the limit until they stop.
func TestDropsCutTheLimit(t *testing.T) {
	for _, alg := range adaptive {
		t.Run(alg, func(t *testing.T) {
			cfg := overloaded(8)
			cfg.Timeout = 13 * time.Millisecond // tighter than the latency the tolerance allows
			l, sim := setup(t, rules.Concurrency{Algorithm: alg}, cfg)
			sim.Run(5 * time.Second)
			mark := sim.Stats()
			sim.Run(5 * time.Second)
			st := sim.Stats().Sub(mark)
			dropped := float64(st.Dropped) / float64(st.Admitted)
			if dropped > 0.05 {
				t.Fatalf("%.1f%% of admitted requests time out at limit %d", dropped*100, l.Limit())
			}
			if g := st.Goodput(); g < 0.4 {
				t.Fatalf("goodput %.2f, want near the capacity share 0.5", g)
			}
			t.Logf("%s: limit %d, %.2f%% of admitted requests time out, goodput %.2f of offered (capacity share 0.5)", alg, l.Limit(), dropped*100, st.Goodput())
		})
	}
}

// Little's law is enforced only while the overload signal is on, and a
// jittery signal does not flap it thanks to the hold time.
func TestLittleEngagement(t *testing.T) {
	light := limittest.Config{Server: limittest.Server{Capacity: 100, Base: 10 * time.Millisecond}, Rate: 1000, Seed: 9}
	t.Run("not engaged without overload", func(t *testing.T) {
		l, sim := setup(t, rules.Concurrency{Algorithm: rules.AlgorithmLittle}, light)
		sim.Run(10 * time.Second)
		// Released, the limit is a loose cap: twice the learned limit (the
		// demand of 10 in flight is below it).
		if s := snap(l); s.Engaged || l.Limit() != 40 || s.Learned != 20 {
			t.Fatalf("light load: Limit() = %d, snapshot %+v", l.Limit(), s)
		}
	})
	tests := []struct {
		name      string
		hold      time.Duration
		maxEngage int
		minEngage int
	}{
		{"hold of 1s keeps a jittery signal engaged", time.Second, 1, 1},
		{"without hold it flaps", 0, 1000, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			jittery := func() bool { calls++; return calls%3 == 0 } // on one window in three
			l, sim := setup(t, rules.Concurrency{Algorithm: rules.AlgorithmLittle}, light,
				limit.WithOverloadSignal(jittery), limit.WithHold(tt.hold))
			engagements, was := 0, false
			for range 200 {
				sim.Run(100 * time.Millisecond)
				on := snap(l).Engaged
				if on && !was {
					engagements++
				}
				was = on
			}
			t.Logf("hold %v: engaged %d times in 20s of a signal on one window in three", tt.hold, engagements)
			if engagements < tt.minEngage || engagements > tt.maxEngage {
				t.Fatalf("engaged %d times in 20s, want between %d and %d", engagements, tt.minEngage, tt.maxEngage)
			}
		})
	}
}

type utilizationFunc func() (float64, error)

func (f utilizationFunc) Utilization() (float64, error) { return f() }

// A CPU utilization jittering around the threshold under a real overload
// engages Little's law once and keeps it engaged; the limit holds steady.
func TestLittleWithJitteryCPU(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	i := 0
	cpu := utilizationFunc(func() (float64, error) {
		i++
		return 0.8 + 0.1*float64(i%2*2-1), nil // 0.7, 0.9, 0.7, ...
	})
	sig, err := limit.NewCPUSignal(cpu, clk, limit.CPUSignalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := limit.New(rules.Concurrency{Algorithm: rules.AlgorithmLittle}, clk, limit.WithOverloadSignal(sig.Overloaded))
	if err != nil {
		t.Fatal(err)
	}
	sim := limittest.New(clk, l, overloaded(10))
	sim.Run(5 * time.Second) // past the early first probe
	engagements, was := 0, false
	lo, hi := l.Limit(), l.Limit()
	for range 100 {
		sim.Run(100 * time.Millisecond)
		on := snap(l).Engaged
		if on && !was {
			engagements++
		}
		was = on
		lo, hi = min(lo, l.Limit()), max(hi, l.Limit())
	}
	if engagements != 1 || !was {
		t.Fatalf("engaged %d times, engaged at the end: %v; want once and still", engagements, was)
	}
	if lo < 100 || hi > 200 {
		t.Fatalf("limit moved within [%d, %d] under a steady overload", lo, hi)
	}
	t.Logf("CPU jittering 0.7/0.9: engaged once, limit within [%d, %d] over 10s", lo, hi)
}

// Server pauses (GC-like stalls of 40 ms every second) at 60% load are noise,
// not overload: a single slow window does not cut the limit, so little is
// shed (about 1% and 2% here; 2.5% and 3.3% without that debounce). What is
// still shed is the pile-up of a pause beyond the limit.
func TestPausesAreNotOverload(t *testing.T) {
	tests := []struct {
		alg         string
		maxRejected float64
	}{
		{rules.AlgorithmGradient, 0.015},
		{rules.AlgorithmLittle, 0.025},
	}
	for _, tt := range tests {
		t.Run(tt.alg, func(t *testing.T) {
			cfg := limittest.Config{
				Server: limittest.Server{Capacity: 100, Base: 10 * time.Millisecond, Jitter: 0.2,
					PauseEvery: time.Second, PauseFor: 40 * time.Millisecond},
				Rate: 6000, Poisson: true, Seed: 12,
			}
			l, sim := setup(t, rules.Concurrency{Algorithm: tt.alg}, cfg)
			sim.Run(5 * time.Second)
			mark := sim.Stats()
			sim.Run(20 * time.Second)
			st := sim.Stats().Sub(mark)
			rejected := float64(st.Rejected) / float64(st.Offered)
			if rejected > tt.maxRejected {
				t.Fatalf("rejected %.2f%% at 60%% load with pauses, want at most %.1f%%", rejected*100, tt.maxRejected*100)
			}
			t.Logf("%s: rejected %.2f%% at 60%% load with 40ms pauses every second; limit %d", tt.alg, rejected*100, l.Limit())
		})
	}
}

// A service that starts under overload with a limit far above its capacity
// never sees a fast window; the early first probe finds its no-load RTT
// within seconds instead of after a whole probe interval.
func TestStartUnderLoadLearnsNoLoadRTT(t *testing.T) {
	for _, alg := range adaptive {
		t.Run(alg, func(t *testing.T) {
			cfg := limittest.Config{
				Server: limittest.Server{Capacity: 20, Base: 10 * time.Millisecond, Jitter: 0.1},
				Rate:   6000, Poisson: true, Seed: 13,
			}
			l, sim := setup(t, rules.Concurrency{Algorithm: alg, Initial: 200}, cfg)
			sim.Run(200 * time.Millisecond)
			first := snap(l).NoLoadRTT
			took, ok := sim.RunUntil(5*time.Second, func() bool { return snap(l).NoLoadRTT < 12*time.Millisecond })
			if !ok {
				t.Fatalf("no-load RTT still %v 5s after a start at 10x the capacity", snap(l).NoLoadRTT)
			}
			t.Logf("%s: first estimate %v under load, base 10ms learned %v later", alg, first, took)
		})
	}
}
