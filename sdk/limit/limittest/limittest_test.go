package limittest_test

import (
	"fmt"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/limit/limittest"
	"governor.dev/governor/sdk/rules"
)

func TestServerLatency(t *testing.T) {
	s := limittest.Server{Capacity: 10, Base: 10 * time.Millisecond}
	tests := []struct {
		inflight int
		want     time.Duration
	}{
		{1, 10 * time.Millisecond},
		{10, 10 * time.Millisecond},
		{20, 20 * time.Millisecond},
		{100, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := s.Latency(tt.inflight); got != tt.want {
			t.Errorf("Latency(%d) = %v, want %v", tt.inflight, got, tt.want)
		}
	}
	if got := (limittest.Server{Base: time.Millisecond}).Latency(3); got != 3*time.Millisecond {
		t.Errorf("zero capacity is treated as 1: Latency(3) = %v", got)
	}
}

func TestServerPauses(t *testing.T) {
	ms := int64(time.Millisecond)
	s := limittest.Server{Capacity: 1, Base: 15 * time.Millisecond, PauseEvery: 100 * time.Millisecond, PauseFor: 20 * time.Millisecond}
	clk := clock.NewFake(time.Time{})
	l, err := limit.New(rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 1}, clk)
	if err != nil {
		t.Fatal(err)
	}
	// One request at a time, arrivals every 30 ms: t=0 waits for the pause
	// (0-20 ms) and ends at 35; t=30 is refused (in flight); t=60 ends at
	// 75; t=90 runs into the pause at 100 and ends at 125.
	sim := limittest.New(clk, l, limittest.Config{Server: s, Rate: 33.3333333})
	var rtts []int64
	sim.RunUntil(128*time.Millisecond, func() bool {
		st := sim.Stats()
		if n := int(st.Completed); n > len(rtts) {
			rtts = append(rtts, int64(st.Latency)-sum(rtts))
		}
		return false
	})
	want := []int64{35 * ms, 15 * ms, 35 * ms}
	if len(rtts) != len(want) {
		t.Fatalf("latencies %v, want %v", rtts, want)
	}
	for i := range want {
		if rtts[i] != want[i] {
			t.Fatalf("latencies %v, want %v", rtts, want)
		}
	}
}

func sum(v []int64) int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}

func run(seed uint64) (limittest.Stats, int) {
	clk := clock.NewFake(time.Time{})
	l, err := limit.New(rules.Concurrency{}, clk)
	if err != nil {
		panic(err)
	}
	sim := limittest.New(clk, l, limittest.Config{
		Server: limittest.Server{Capacity: 50, Base: 5 * time.Millisecond, Jitter: 0.3},
		Rate:   15000, Poisson: true, Timeout: 20 * time.Millisecond, Seed: seed,
	})
	sim.Run(3 * time.Second)
	return sim.Stats(), l.Limit()
}

func TestSimIsDeterministic(t *testing.T) {
	a, la := run(42)
	b, lb := run(42)
	if a != b || la != lb {
		t.Fatalf("same seed, different runs: %+v limit %d vs %+v limit %d", a, la, b, lb)
	}
	c, _ := run(43)
	if a == c {
		t.Fatalf("different seeds gave identical runs: %+v", a)
	}
	if a.Offered != a.Admitted+a.Rejected {
		t.Fatalf("offered %d != admitted %d + rejected %d", a.Offered, a.Admitted, a.Rejected)
	}
}

func TestSimRespectsTheLimit(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	l, err := limit.New(rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 10}, clk)
	if err != nil {
		t.Fatal(err)
	}
	sim := limittest.New(clk, l, limittest.Config{Server: limittest.Server{Capacity: 5, Base: 10 * time.Millisecond}, Rate: 5000})
	worst := 0
	sim.RunUntil(time.Second, func() bool { worst = max(worst, sim.Inflight()); return false })
	if worst != 10 {
		t.Fatalf("peak in-flight %d, want exactly the limit 10", worst)
	}
	st := sim.Stats()
	// 10 in flight on 5 workers: every request takes 20 ms, 500 per second.
	if st.Completed < 480 || st.Completed > 500 {
		t.Fatalf("completed %d in 1s, want about 500", st.Completed)
	}
	if got := st.MeanLatency(); got < 18*time.Millisecond || got > 20*time.Millisecond {
		t.Fatalf("mean latency %v, want 20ms", got)
	}
	if sim.Now() != time.Second {
		t.Fatalf("virtual time %v, want 1s", sim.Now())
	}
}

func TestSimWithoutLimitQueuesAndTimesOut(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	sim := limittest.New(clk, nil, limittest.Config{
		Server: limittest.Server{Capacity: 10, Base: 10 * time.Millisecond}, Rate: 2000, Timeout: 50 * time.Millisecond,
	})
	sim.Run(2 * time.Second)
	st := sim.Stats()
	if st.Rejected != 0 {
		t.Fatalf("rejected %d without a limiter", st.Rejected)
	}
	if st.Dropped == 0 || st.Goodput() > 0.5 {
		t.Fatalf("2x overload without a limit: dropped %d, goodput %.2f; want timeouts", st.Dropped, st.Goodput())
	}
}

func TestSimRateChanges(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	sim := limittest.New(clk, nil, limittest.Config{Server: limittest.Server{Capacity: 10, Base: time.Millisecond}})
	sim.Run(time.Second)
	if n := sim.Stats().Offered; n != 0 {
		t.Fatalf("offered %d at rate 0", n)
	}
	sim.Rate = 100
	sim.Run(time.Second)
	if n := sim.Stats().Offered; n != 101 { // at 1s, 1.01s, ... 2s: Run includes its end
		t.Fatalf("offered %d in 1s at 100/s, want 101", n)
	}
	sim.Rate = 0
	sim.Run(time.Second)
	if n := sim.Stats().Offered; n != 102 { // the arrival already scheduled, at 2.01s
		t.Fatalf("offered %d after the rate fell to 0, want 102", n)
	}
}

func TestStatsArithmetic(t *testing.T) {
	a := limittest.Stats{Offered: 10, Admitted: 8, Rejected: 2, Completed: 6, Dropped: 1, Latency: 60 * time.Millisecond}
	b := limittest.Stats{Offered: 4, Admitted: 3, Rejected: 1, Completed: 2, Latency: 20 * time.Millisecond}
	d := a.Sub(b)
	want := limittest.Stats{Offered: 6, Admitted: 5, Rejected: 1, Completed: 4, Dropped: 1, Latency: 40 * time.Millisecond}
	if d != want {
		t.Fatalf("Sub = %+v, want %+v", d, want)
	}
	if d.Goodput() != 4.0/6 || d.MeanLatency() != 10*time.Millisecond {
		t.Fatalf("Goodput %v MeanLatency %v", d.Goodput(), d.MeanLatency())
	}
	var zero limittest.Stats
	if zero.Goodput() != 0 || zero.MeanLatency() != 0 {
		t.Fatal("zero stats must give zero ratios")
	}
}

// Compare a fixed limit set too high with the gradient limiter on a server
// offered twice its capacity with a 50 ms timeout.
func Example() {
	for _, cc := range []rules.Concurrency{
		{Algorithm: rules.AlgorithmFixed, Max: 1000},
		{Algorithm: rules.AlgorithmGradient},
	} {
		clk := clock.NewFake(time.Time{})
		l, err := limit.New(cc, clk)
		if err != nil {
			panic(err)
		}
		sim := limittest.New(clk, l, limittest.Config{
			Server:  limittest.Server{Capacity: 100, Base: 10 * time.Millisecond},
			Rate:    20000,
			Timeout: 50 * time.Millisecond,
		})
		sim.Run(10 * time.Second)
		st := sim.Stats()
		fmt.Printf("%s: goodput above 45%%: %v, mean latency under 20ms: %v\n",
			cc.Algorithm, st.Goodput() > 0.45, st.MeanLatency() < 20*time.Millisecond)
	}
	// Output:
	// fixed: goodput above 45%: false, mean latency under 20ms: false
	// gradient: goodput above 45%: true, mean latency under 20ms: true
}
