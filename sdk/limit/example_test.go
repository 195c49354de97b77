package limit_test

import (
	"fmt"
	"testing/fstest"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/limit/limittest"
	"governor.dev/governor/sdk/rules"
)

// How an admission path uses a Limiter: compare in-flight with Limit before
// the request, report the request to Observe after it, with the caller's own
// clock reading.
func Example() {
	clk := clock.NewFake(time.Time{}) // clock.Real{} or a clock.Coarse in production
	l, err := limit.New(rules.Concurrency{}, clk)
	if err != nil {
		panic(err)
	}
	inflight := 0

	inflight++ // admit
	if inflight > l.Limit() {
		inflight--
		fmt.Println("rejected")
		return
	}
	admittedWith, start := inflight, clk.Nanotime()
	clk.Advance(12 * time.Millisecond) // serve the request
	now := clk.Nanotime()
	l.Observe(now, now-start, admittedWith, false)
	inflight--

	fmt.Println("limit:", l.Limit())
	// Output: limit: 20
}

// The gradient limiter finds a server's capacity: 100 workers at 10 ms,
// offered twice what they can serve.
func ExampleNew() {
	clk := clock.NewFake(time.Time{})
	l, err := limit.New(rules.Concurrency{Algorithm: rules.AlgorithmGradient}, clk)
	if err != nil {
		panic(err)
	}
	sim := limittest.New(clk, l, limittest.Config{
		Server: limittest.Server{Capacity: 100, Base: 10 * time.Millisecond},
		Rate:   20000,
	})
	sim.Run(5 * time.Second)
	s := l.(limit.Inspector).Snapshot()
	fmt.Println("limit above capacity:", s.Limit > 100)
	fmt.Println("latency within tolerance and headroom:", s.SampleRTT < 18*time.Millisecond)
	fmt.Println("no-load RTT:", s.NoLoadRTT)
	// Output:
	// limit above capacity: true
	// latency within tolerance and headroom: true
	// no-load RTT: 10ms
}

// A rule change builds a new limiter; WithInitialLimit carries the learned
// limit over so the service does not start learning again from Initial.
func ExampleWithInitialLimit() {
	old, _ := limit.New(rules.Concurrency{}, nil)
	next, err := limit.New(rules.Concurrency{Tolerance: 0.3, Max: 500}, nil, limit.WithInitialLimit(old.Limit()))
	if err != nil {
		panic(err)
	}
	fmt.Println(next.Limit())
	// Output: 20
}

// A rule change keeps what the old limiter learned, including the no-load
// RTT, which would be inflated if re-learned on a loaded service.
func ExampleWithSnapshot() {
	clk := clock.NewFake(time.Time{})
	old, _ := limit.New(rules.Concurrency{}, clk)
	sim := limittest.New(clk, old, limittest.Config{
		Server: limittest.Server{Capacity: 100, Base: 10 * time.Millisecond}, Rate: 20000,
	})
	sim.Run(3 * time.Second)
	learned := old.(limit.Inspector).Snapshot()

	next, err := limit.New(rules.Concurrency{Tolerance: 0.3}, clk, limit.WithSnapshot(learned))
	if err != nil {
		panic(err)
	}
	s := next.(limit.Inspector).Snapshot()
	fmt.Println("same limit:", s.Learned == learned.Learned, "no-load RTT:", s.NoLoadRTT)
	// Output: same limit: true no-load RTT: 10ms
}

// Errors name the field.
func ExampleNew_invalid() {
	_, err := limit.New(rules.Concurrency{Min: 50, Max: 10}, nil)
	fmt.Println(err)
	// Output: limit: invalid config: concurrency.min (50) must not exceed max (10)
}

// Little's law engaged by the container's CPU. In production the file system
// is os.DirFS("/") and the clock clock.Real{}; here a fake cgroup v2 with a
// quota of 2 CPUs.
func ExampleNewCPUSignal() {
	clk := clock.NewFake(time.Time{})
	cgroup := fstest.MapFS{
		"proc/self/cgroup":       {Data: []byte("0::/\n")},
		"sys/fs/cgroup/cpu.stat": {Data: []byte("usage_usec 0\n")},
		"sys/fs/cgroup/cpu.max":  {Data: []byte("200000 100000\n")},
	}
	sampler, err := limit.NewCPUSampler(cgroup, clk)
	if err != nil {
		panic(err)
	}
	sig, err := limit.NewCPUSignal(sampler, clk, limit.DefaultCPUSignalOptions())
	if err != nil {
		panic(err)
	}
	l, err := limit.New(rules.Concurrency{Algorithm: rules.AlgorithmLittle}, clk, limit.WithOverloadSignal(sig.Overloaded))
	if err != nil {
		panic(err)
	}

	// 1.8 of the 2 CPUs busy for a second.
	cgroup["sys/fs/cgroup/cpu.stat"] = &fstest.MapFile{Data: []byte("usage_usec 1800000\n")}
	clk.Advance(time.Second)
	fmt.Println(sampler.Source(), sampler.CPUs(), "CPUs, overloaded:", sig.Overloaded())

	// The next window closing consults the signal and enforces the limit.
	for range 10 {
		l.Observe(clk.Nanotime(), int64(10*time.Millisecond), 15, false)
	}
	clk.Advance(100 * time.Millisecond)
	l.Observe(clk.Nanotime(), int64(10*time.Millisecond), 15, false)
	fmt.Println("engaged:", l.(limit.Inspector).Snapshot().Engaged, "limit:", l.Limit())
	// Output:
	// cgroup2 2 CPUs, overloaded: true
	// engaged: true limit: 20
}
