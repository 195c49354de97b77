package governor_test

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/shed"
)

// pending is an admitted request finishing at a virtual time.
type pending struct {
	at      time.Duration
	latency time.Duration
	p       governor.Permit
}

type pendingHeap []pending

func (h pendingHeap) Len() int           { return len(h) }
func (h pendingHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h pendingHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)        { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TestOverloadShedsLowClassesFirst drives the admission core with the real
// adaptive limiter (sdk/limit, gradient) in virtual time: a backend that
// serves 20 requests at once in 10 ms and slows down in proportion beyond
// that, offered 1.5 times its capacity in an even mix of the four classes. The
// limit must settle near the capacity, and the overload must fall on the
// lowest classes: critical and core are served, batch is mostly shed.
func TestOverloadShedsLowClassesFirst(t *testing.T) {
	clk := clock.NewFake(fakeStart)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Shards = 4
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := route("api", "/")
	r.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmGradient, Initial: 10, Max: 200}
	if err := g.Apply(ruleset(r), 1); err != nil {
		t.Fatal(err)
	}
	const (
		capacity = 20
		service  = 10 * time.Millisecond
		perMs    = 3 // 3000 req/s offered; capacity is 2000 req/s
	)
	var inflight pendingHeap
	var offered, served [4]int
	var now time.Duration
	ctx := context.Background()
	for step := 0; step < 20000; step++ { // 20 s of virtual time
		now += time.Millisecond
		clk.Advance(time.Millisecond)
		for len(inflight) > 0 && inflight[0].at <= now {
			x := heap.Pop(&inflight).(pending)
			x.p.Release(x.latency, governor.Success)
		}
		for i := range perMs {
			c := (step*perMs + i + step/3) % 4
			p, err := g.Admit(ctx, governor.Request{Path: "/", Priority: classPrio[c]})
			if step >= 5000 { // judge after a 5 s settling period
				offered[c]++
			}
			if err != nil {
				continue
			}
			if step >= 5000 {
				served[c]++
			}
			lat := service
			if n := len(inflight) + 1; n > capacity {
				lat = service * time.Duration(n) / capacity
			}
			heap.Push(&inflight, pending{at: now + lat, latency: lat, p: p})
		}
	}
	share := func(c int) float64 { return float64(served[c]) / float64(offered[c]) }
	t.Logf("served share by class: critical %.2f core %.2f browse %.2f batch %.2f", share(0), share(1), share(2), share(3))
	limit, _ := g.Limit("api")
	t.Logf("limit %d", limit)
	if limit < capacity/2 || limit > 4*capacity {
		t.Errorf("limit settled at %d, want near the capacity of %d", limit, capacity)
	}
	if share(0) < 0.99 || share(1) < 0.97 {
		t.Errorf("critical %.2f and core %.2f served; want them (half the load, within capacity) served", share(0), share(1))
	}
	if share(3) > 0.1 {
		t.Errorf("batch served %.2f; the overload should fall on it first", share(3))
	}
	for c := 1; c < 4; c++ {
		if share(c) > share(c-1)+0.01 {
			t.Errorf("class %s served %.2f, more than %s %.2f", classPrio[c], share(c), classPrio[c-1], share(c-1))
		}
	}
}

// TestCriticalFloodStaysBounded: critical requests may go beyond the limit
// by their measured concurrency (shed.Plan), at most (1+shed.Overshoot) x
// the limit, but only while the lower classes are admitted beside them
// (shed.Reserve.Room); a flood of critical traffic alone gets no room past
// the limit once a window has measured it. A flood of critical traffic alone, three times what the
// backend serves, must not overload it: the limiter sees the latency the
// extra requests cause and shrinks the limit, and with it the bound, so the
// in-flight count settles near the backend's capacity, not at a multiple of
// it, and the backend keeps serving at its capacity.
func TestCriticalFloodStaysBounded(t *testing.T) {
	clk := clock.NewFake(fakeStart)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Shards = 1 // one shard: the ceiling is exact (shards split it, and a lowered ceiling can leave one over its share)
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := route("api", "/")
	r.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmGradient, Initial: 10, Max: 200}
	if err := g.Apply(ruleset(r), 1); err != nil {
		t.Fatal(err)
	}
	const (
		capacity = 20
		service  = 10 * time.Millisecond
		perMs    = 6 // 6000 critical req/s offered; capacity is 2000 req/s
	)
	var inflight pendingHeap
	var served, maxIn, overBound int
	var latency time.Duration
	var now time.Duration
	ctx := context.Background()
	for step := 0; step < 20000; step++ { // 20 s of virtual time
		now += time.Millisecond
		clk.Advance(time.Millisecond)
		for len(inflight) > 0 && inflight[0].at <= now {
			x := heap.Pop(&inflight).(pending)
			x.p.Release(x.latency, governor.Success)
		}
		for range perMs {
			limit, _ := g.Limit("api")
			p, err := g.Admit(ctx, governor.Request{Path: "/", Priority: "critical"})
			if err != nil {
				continue
			}
			n := len(inflight) + 1
			if n > (1+shed.Overshoot)*limit {
				overBound++
			}
			lat := service
			if n > capacity {
				lat = service * time.Duration(n) / capacity
			}
			heap.Push(&inflight, pending{at: now + lat, latency: lat, p: p})
			if step >= 5000 { // judge after a 5 s settling period
				served++
				latency += lat
				maxIn = max(maxIn, n)
			}
		}
	}
	limit, _ := g.Limit("api")
	mean := latency / time.Duration(max(served, 1))
	t.Logf("critical flood at 3x: limit %d, max in flight %d, mean latency %v, served %.0f/s", limit, maxIn, mean, float64(served)/15)
	if overBound > 0 {
		t.Errorf("%d admissions beyond (1+Overshoot) x the limit", overBound)
	}
	if maxIn > 4*capacity {
		t.Errorf("in flight reached %d, want the flood held near the capacity %d", maxIn, capacity)
	}
	if mean > 3*service {
		t.Errorf("mean latency %v under a critical flood, want at most 3x the %v service time", mean, service)
	}
	if rate := float64(served) / 15; rate < 0.9*capacity/service.Seconds() {
		t.Errorf("served %.0f/s, want at least 90%% of the capacity %.0f/s", rate, capacity/service.Seconds())
	}
}

// onsetSched is a fake source that also reports the process's CPU time
// and the run queue, as the Go runtime's source does.
type onsetSched struct {
	*cpuSched
	runnable atomic.Uint64
}

func (o *onsetSched) ReadRunnable() (uint64, bool) { return o.runnable.Load(), true }

type onsetThrottled struct {
	*throttled
	src   *onsetSched
	procs time.Duration
	// left is the time to the deadline the requests step offers state
	// (none when 0).
	left time.Duration
}

func newOnsetThrottled(t *testing.T, o governor.OverloadOptions) *onsetThrottled {
	t.Helper()
	src := &onsetSched{cpuSched: &cpuSched{fakeSched: newFakeSched()}}
	o.Source = src
	tt := newThrottled(t, o)
	tt.src = src.fakeSched
	return &onsetThrottled{throttled: tt, src: src, procs: time.Duration(runtime.GOMAXPROCS(0))}
}

// step lets d pass in which 200 goroutines waited lat to run and the
// process used share of its CPUs, leaves runnable goroutines waiting at its
// end, and offers n requests of every class; it returns the share of each
// class (critical, core, browse, batch) refused. 200 timed wake-ups in 100ms
// stand for 1,600 (the runtime times one in eight): 16,000 a second, so 400
// runnable goroutines are a 25ms queue (in a 50ms window, 12.5ms), 2.5
// targets.
func (o *onsetThrottled) step(t *testing.T, d, lat time.Duration, share float64, runnable uint64, n int) [4]float64 {
	t.Helper()
	o.src.used.Add(int64(float64(o.procs*d) * share))
	o.src.add(lat, 200)
	o.src.runnable.Store(runnable)
	o.clk.Advance(d)
	var deadline time.Time
	if o.left != 0 {
		deadline = o.clk.Now().Add(o.left)
	}
	return admitEachBy(t, o.g, n, deadline)
}

func (o *onsetThrottled) level() float64 {
	l, _ := o.g.OverloadLevel()
	return l
}

// quiet lets healthy windows pass: 1ms scheduling latency, half the CPUs,
// two goroutines runnable.
func (o *onsetThrottled) quiet(t *testing.T, windows int) {
	t.Helper()
	for range windows {
		if r := o.step(t, 100*time.Millisecond, time.Millisecond, 0.5, 2, 20); r != [4]float64{} {
			t.Fatalf("refused %v in a healthy window (level %v)", r, o.level())
		}
	}
}

// TestThrottleStartsWithinOneWindowOnASevereSpike: a spike fills the run
// queue while the CPUs are busy; the window that ends with the queue
// already acts, and the windows after it are half as long while the queue
// stays, so every class but critical is refused within 0.3s of the onset.
func TestThrottleStartsWithinOneWindowOnASevereSpike(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 5)
	// The first window of the spike: the latency histogram has seen little
	// of it yet (15ms), the run queue has: 1,000 runnable goroutines at
	// 16,000 wake-ups a second are a 62.5ms wait.
	r := o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 1000, 200)
	if l := o.level(); l < 1 || r[3] < 1 || r[2] != 0 || r[0] != 0 {
		t.Fatalf("after the first window of a severe spike: level %v, refused %v; want all of batch refused at once", l, r)
	}
	// The next window ends after Window/2.
	r = o.step(t, 50*time.Millisecond, 40*time.Millisecond, 1, 1000, 200)
	if l := o.level(); l < 2 || r[2] < 1 {
		t.Fatalf("50ms later: level %v, refused %v; want browse refused too", l, r)
	}
	r = o.step(t, 50*time.Millisecond, 80*time.Millisecond, 1, 1000, 200)
	if l := o.level(); l != 3 || r != [4]float64{0, 1, 1, 1} {
		t.Fatalf("200ms after the first window: level %v, refused %v; want every class but critical", l, r)
	}
	// At the maximum, windows are full length again: 50ms is not a window.
	o.step(t, 50*time.Millisecond, time.Millisecond, 0.5, 0, 1)
	if l := o.level(); l != 3 {
		t.Fatalf("level %v 50ms after reaching 3, want no new window yet", l)
	}
}

// TestThrottleOnsetNeedsBusyCPUsAndAQueue: one slow window starts nothing
// unless the process kept its CPUs busy and the run queue is long: a stall
// (the CPUs idle through it, then the waiting goroutines run), a window the
// process was starved in by other processes, and a slow window with a short
// run queue each wait for a second slow window, and a healthy window after
// them leaves the level at 0.
func TestThrottleOnsetNeedsBusyCPUsAndAQueue(t *testing.T) {
	tests := []struct {
		name     string
		lat      time.Duration
		share    float64
		runnable uint64
	}{
		{"stall", 400 * time.Millisecond, 0.4, 40},
		{"stall with a long queue after it", 300 * time.Millisecond, 0.6, 800},
		{"starved by other processes", 200 * time.Millisecond, 0.3, 20},
		{"starved, with a long queue", 200 * time.Millisecond, 0.3, 800},
		{"busy with a short queue", 60 * time.Millisecond, 1, 20},
		{"busy, queue just under 2.5 targets", 60 * time.Millisecond, 1, 399},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOnsetThrottled(t, governor.OverloadOptions{})
			o.quiet(t, 3)
			for range 20 {
				if r := o.step(t, 100*time.Millisecond, tt.lat, tt.share, tt.runnable, 50); r != [4]float64{} {
					t.Fatalf("one window (%v, CPUs %.0f%% busy, %d runnable) refused %v", tt.lat, tt.share*100, tt.runnable, r)
				}
				o.quiet(t, 1)
				if l := o.level(); l != 0 {
					t.Fatalf("level %v after one slow window and a healthy one, want 0", l)
				}
			}
		})
	}
	// The same windows twice in a row are an overload where the process
	// is busy enough to gain from refusing.
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	o.step(t, 100*time.Millisecond, 60*time.Millisecond, 1, 20, 1)
	o.step(t, 100*time.Millisecond, 60*time.Millisecond, 1, 20, 1)
	if l := o.level(); l == 0 {
		t.Fatal("two slow busy windows in a row left the level at 0")
	}
}

// TestThrottleReleasesGradually: after a severe onset took the level to
// 3, healthy windows in which the CPUs stay busy give it back at most 0.3
// classes at a time, in
// full-length windows (a quiet half window moves nothing), so the level
// takes at least ten windows to clear, and core comes back before browse.
func TestThrottleReleasesGradually(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	for i := 0; i < 8 && o.level() < 3; i++ {
		o.step(t, 50*time.Millisecond, 100*time.Millisecond, 1, 1000, 1)
	}
	if l := o.level(); l != 3 {
		t.Fatalf("level %v after a severe onset, want 3", l)
	}
	prev := 3.0
	windows := 0
	for prev > 0 {
		// Half a window: no roll while falling.
		o.step(t, 50*time.Millisecond, time.Millisecond, 1, 2, 1)
		if l := o.level(); l != prev {
			t.Fatalf("level moved from %v to %v 50ms into a window while falling", prev, l)
		}
		r := o.step(t, 50*time.Millisecond, time.Millisecond, 1, 2, 400)
		windows++
		l := o.level()
		if l > prev || prev-l > 0.3+1e-9 {
			t.Fatalf("healthy window %d: level %v -> %v, want a cut of at most 0.3", windows, prev, l)
		}
		if l > 2 && r[1] > 0 && r[2] < 1 {
			t.Fatalf("level %v refused core %v but browse only %v", l, r[1], r[2])
		}
		prev = l
		if windows > 15 {
			t.Fatalf("level %v after 15 healthy windows, want 0", l)
		}
	}
	if windows < 10 {
		t.Fatalf("level 3 cleared in %d healthy windows, want at least 10 (0.3 a window)", windows)
	}
}

// TestThrottleQuietSpellsRunQueueHoldsNothing: after a minute in which no
// request came and the process idled, the few goroutines runnable when the
// first request back ends the window are not a run queue that holds the
// level: timed against the spell's few wake-ups they read as a 0.4s wait,
// and the level stayed at 3. A long window in which the CPUs were busy
// (the coarse clock fell behind at a spike) still reads its run queue.
func TestThrottleQuietSpellsRunQueueHoldsNothing(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	for i := 0; i < 8 && o.level() < 3; i++ {
		o.step(t, 50*time.Millisecond, 100*time.Millisecond, 1, 1000, 1)
	}
	if l := o.level(); l != 3 {
		t.Fatalf("level %v after a severe onset, want 3", l)
	}
	o.src.used.Add(int64(float64(o.procs*time.Minute) * 0.02))
	o.src.add(time.Millisecond, 400)
	o.src.runnable.Store(20)
	o.clk.Advance(time.Minute)
	if r := admitEach(t, o.g, 100); o.level() != 0 || r != [4]float64{} {
		t.Fatalf("after a quiet minute: level %v, refused %v; want 0 and nothing", o.level(), r)
	}
	o.quiet(t, 3)
	o.step(t, 300*time.Millisecond, 15*time.Millisecond, 1, 1000, 1)
	if l := o.level(); l < 1 {
		t.Fatalf("level %v after a 300ms window with busy CPUs and a long run queue, want at least 1", l)
	}
}

// TestThrottleBusyShareFollowsGOMAXPROCS: the share of its CPUs the process
// used is of GOMAXPROCS as it is now. The runtime changes GOMAXPROCS when
// the container's CPU limit changes; against the count read at New, a
// process that saturated its one remaining CPU read as a quarter busy, and
// the throttle never acted.
func TestThrottleBusyShareFollowsGOMAXPROCS(t *testing.T) {
	prev := runtime.GOMAXPROCS(4)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	runtime.GOMAXPROCS(1)
	o.procs = 1
	for range 10 {
		o.step(t, 100*time.Millisecond, 60*time.Millisecond, 1, 1000, 1)
	}
	if l := o.level(); l == 0 {
		t.Fatal("level 0 after a second in which the process saturated its GOMAXPROCS with a long run queue")
	}
}

// TestThrottleLongRunQueueIsTheProcesssOwn: a process that gets only 30% of
// its CPUs from a busy machine does not start refusing on slow windows,
// whether its run queue is short or long: other processes taking the CPUs
// for a while are no reason to. Once an overload started the throttle, a
// long run queue keeps it on though the process is starved (the queue is
// its own work, and refusing drains it), where a short one gives back.
func TestThrottleLongRunQueueIsTheProcesssOwn(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	for _, runnable := range []uint64{20, 800} { // 1.25ms and 50ms queues
		for range 10 {
			o.step(t, 100*time.Millisecond, 200*time.Millisecond, 0.3, runnable, 1)
		}
		if l := o.level(); l != 0 {
			t.Fatalf("level %v while starved with %d runnable, want 0", l, runnable)
		}
	}
	o.step(t, 100*time.Millisecond, 200*time.Millisecond, 1, 800, 1) // a busy window: the onset
	start := o.level()
	if start == 0 {
		t.Fatal("a busy window with a long run queue did not start the throttle")
	}
	for w := range 3 {
		o.step(t, 100*time.Millisecond, 200*time.Millisecond, 0.3, 800, 1)
		if l := o.level(); l < start || (l == start && l < 3) {
			t.Fatalf("starved window %d with a long run queue: level %v after %v, want it rising", w+1, l, start)
		}
		start = o.level()
	}
	o.step(t, 100*time.Millisecond, 200*time.Millisecond, 0.3, 20, 1)
	if l := o.level(); l >= start {
		t.Fatalf("starved window with a short run queue: level %v after %v, want a cut", l, start)
	}
}

// TestThrottleRunQueueSpeedsOnlyBusyWindows: the run queue's estimate
// raises the level faster than the latency does only in a window the
// process kept busy. On a machine that leaves the process 60% of its CPUs,
// a burst of runnable goroutines after a stall (a 50ms wait) moves
// the level by the latency's error, not by a class.
func TestThrottleRunQueueSpeedsOnlyBusyWindows(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	for range 3 {
		o.step(t, 100*time.Millisecond, 15*time.Millisecond, 0.6, 800, 1)
	}
	// 15ms against 10ms: +0.05 a window from the second slow one.
	if l := o.level(); l < 0.09 || l > 0.11 {
		t.Fatalf("level %v after three half-busy windows at 15ms with a long run queue, want 0.1", l)
	}
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 800, 1)
	if l := o.level(); l < 1 {
		t.Fatalf("level %v after a busy window with a 50ms run queue, want at least 1", l)
	}
}

// TestThrottleWindowsEndWhileRequestsArriveDead: at a spike's onset every
// request can reach Admit past its deadline and be refused for it; the
// throttle's windows must end all the same, so that the level has risen
// when requests with time left arrive.
func TestThrottleWindowsEndWhileRequestsArriveDead(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	for range 4 {
		o.src.used.Add(int64(o.procs * 50 * time.Millisecond))
		o.src.add(80*time.Millisecond, 200)
		o.src.runnable.Store(1000)
		o.clk.Advance(50 * time.Millisecond)
		req := governor.Request{Path: "/", Priority: "core", Deadline: o.clk.Now().Add(-time.Millisecond)}
		if _, err := o.g.Admit(context.Background(), req); !errors.Is(err, governor.ErrDeadline) {
			t.Fatalf("Admit past the deadline = %v, want ErrDeadline", err)
		}
	}
	if l := o.level(); l < 2 {
		t.Fatalf("level %v after 200ms of severe windows in which every request was past its deadline, want at least 2", l)
	}
}

// TestThrottleOnsetWaitsForAQueueThatThreatensDeadlines: requests that
// state their deadlines tell the throttle how long they can wait. A run
// queue shorter than an eighth of the time they have left (50ms with 1s
// left; the runnable goroutines are only part of the queue before Admit)
// starts nothing in one window and then moves the level by the latency's
// error alone; the same queue acts at once when the requests reaching Admit
// have less than eight times it left (300ms), as it does when they state no
// deadline for a second.
func TestThrottleOnsetWaitsForAQueueThatThreatensDeadlines(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.left = time.Second
	o.quiet(t, 3)
	// 800 runnable goroutines at 16,000 wake-ups a second: a 50ms wait.
	if r := o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 800, 50); r != [4]float64{} {
		t.Fatalf("one busy window with a 50ms run queue and 1s left refused %v, want nothing", r)
	}
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 800, 50)
	// 15ms against 10ms: +0.05 from the second slow window.
	if l := o.level(); l < 0.04 || l > 0.06 {
		t.Fatalf("level %v after two busy windows at 15ms with a queue the deadlines allow, want 0.05", l)
	}
	// The requests now reach Admit with 300ms left; the window after them
	// is severe.
	o.left = 300 * time.Millisecond
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 800, 50)
	before := o.level()
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 800, 50)
	if l := o.level(); l < before+0.9 {
		t.Fatalf("level %v -> %v in a busy window whose 50ms run queue exceeds an eighth of the 300ms the requests had left, want a class more", before, l)
	}

	// Requests that stop stating deadlines: after a second the run queue
	// alone decides again.
	o = newOnsetThrottled(t, governor.OverloadOptions{})
	o.left = time.Second
	o.quiet(t, 3)
	o.left = 0
	o.quiet(t, 11)
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 800, 50)
	if l := o.level(); l < 1 {
		t.Fatalf("level %v after a busy window with a 50ms run queue, a second after the last stated deadline; want at least 1", l)
	}
}

// steadyOverload returns a throttle that saw 3 quiet windows, then windows
// busy windows at a 35ms mean latency (the bucket's midpoint) with runnable
// goroutines at their end (560 is a 35ms run queue), the requests stating
// 450ms left to their deadlines.
func steadyOverload(t *testing.T, windows int, runnable uint64) *onsetThrottled {
	t.Helper()
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.left = 450 * time.Millisecond
	o.quiet(t, 3)
	for range windows {
		o.step(t, 100*time.Millisecond, 30*time.Millisecond, 1, runnable, 20)
	}
	return o
}

// TestThrottleSteadyOverloadRisesByTheLatency: in a steady overload the
// throttle holds the level where the latency is near its target; a run
// queue that builds up for a few windows, shorter than the time the
// requests have left, raises it by the latency's error, not by a class
// per window (which would refuse work the CPU could still do in time).
func TestThrottleSteadyOverloadRisesByTheLatency(t *testing.T) {
	// 35ms against 10ms, and a 35ms run queue: +0.25 a window from the
	// second slow one.
	o := steadyOverload(t, 6, 560)
	start := o.level()
	if start < 1.2 || start > 1.3 {
		t.Fatalf("level %v after 6 busy windows at 35ms, want 1.25", start)
	}
	// 25-55ms run queues, under the 56ms (an eighth of the 450ms left) that
	// make a window severe, at 15ms: +0.05 a window.
	for _, runnable := range []uint64{400, 600, 880} {
		o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, runnable, 20)
	}
	if l := o.level(); l > start+0.16 {
		t.Fatalf("level %v -> %v over three windows at 15ms with run queues the deadlines allow, want +0.15 (the latency's error)", start, l)
	}
}

// TestThrottleNeedsTwoQueueWindowsPastTheOnset: once batch is fully
// refused and the throttle has been on for onsetWindows windows, one window
// with a long run queue is a burst the latency can answer (the estimate
// rests on one instant's runnable count and on the runtime's one-in-eight
// sample of wake-ups); two in a row add a class.
func TestThrottleNeedsTwoQueueWindowsPastTheOnset(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	// 35ms against 10ms with a 22.5ms run queue (under the 25ms of a long
	// one): +0.25 on the second slow window (from level 0 the latency
	// alone), +0.125 on each after it (the queue's smaller error).
	for range 12 {
		o.step(t, 100*time.Millisecond, 30*time.Millisecond, 1, 360, 1)
	}
	start := o.level()
	if start < 1.45 || start > 1.55 {
		t.Fatalf("level %v after 12 busy windows at 35ms, want 1.5", start)
	}
	// A 62.5ms run queue at 15ms (the requests state no deadline).
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 1000, 1)
	if l := o.level(); l > start+0.06 {
		t.Fatalf("level %v -> %v after one window with a long run queue past the onset, want the latency's +0.05", start, l)
	}
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 1000, 1)
	if l := o.level(); l < start+1 {
		t.Fatalf("level %v -> %v after a second window with a long run queue, want a class more", start, l)
	}
}

// TestThrottleBusyWindowWithFewWakeupsMovesNothing: the runtime times one
// wake-up in eight, so a short window of an overload whose CPU runs a
// handful of long handlers can count fewer than eight. Such a window says
// nothing about the queue and leaves the level as it is (it used to give
// back as if the CPU had been quiet); a window with few wake-ups and idle
// CPUs still gives back.
func TestThrottleBusyWindowWithFewWakeupsMovesNothing(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.quiet(t, 3)
	o.step(t, 100*time.Millisecond, 100*time.Millisecond, 1, 1000, 1) // severe: the next window is 50ms
	start := o.level()
	if start < 1 {
		t.Fatalf("level %v after a severe window, want at least 1", start)
	}
	few := func(d time.Duration, share float64) {
		o.src.used.Add(int64(float64(o.procs*d) * share))
		o.src.add(100*time.Millisecond, 3)
		o.src.runnable.Store(1000)
		o.clk.Advance(d)
		admitEach(t, o.g, 1)
	}
	few(50*time.Millisecond, 1)
	if l := o.level(); l != start {
		t.Fatalf("level %v -> %v after a busy window with 3 wake-ups, want it unchanged", start, l)
	}
	few(100*time.Millisecond, 0.1)
	if l := o.level(); l >= start {
		t.Fatalf("level %v -> %v after an idle window with 3 wake-ups, want a cut", start, l)
	}
}

// TestThrottleHoldsWhileLatencyAndRunQueueDisagree: once the throttle is
// on, the latency (the wait of the goroutines that ran in the window) and
// the run queue (the wait of those runnable at its end) must agree. A slow
// window whose queue has drained holds the level (the level already refuses
// enough: rising on such windows idled the CPUs at a steady 2x), and so does
// a quick window with a queue building (falling would refuse too little);
// when both are slow the level rises by the smaller error, when both are
// quick it falls by the smaller one.
func TestThrottleHoldsWhileLatencyAndRunQueueDisagree(t *testing.T) {
	o := steadyOverload(t, 6, 560)
	if l := o.level(); l < 1.2 || l > 1.3 {
		t.Fatalf("level %v after 6 busy windows at 35ms with a 35ms run queue, want 1.25", l)
	}
	tests := []struct {
		name     string
		lat      time.Duration // the bucket's midpoint is the window's mean
		runnable uint64        // 16 is a 1ms queue
		move     float64
	}{
		{"slow, the queue drained", 30 * time.Millisecond, 2, 0},
		{"quick, a queue building", 3 * time.Millisecond, 240, 0},
		{"both slow: the queue's smaller error", 30 * time.Millisecond, 320, 0.1},
		{"both quick: the queue's smaller error", 3 * time.Millisecond, 80, -0.15},
		{"both quick: the latency's smaller error", 7 * time.Millisecond, 2, -0.075},
	}
	for _, tt := range tests {
		before := o.level()
		o.step(t, 100*time.Millisecond, tt.lat, 1, tt.runnable, 20)
		if got := o.level() - before; math.Abs(got-tt.move) > 0.01 {
			t.Errorf("%s (%v, %d runnable): level %v -> %v, want %+.3f", tt.name, tt.lat, tt.runnable, before, o.level(), tt.move)
		}
	}
}

// TestThrottleSteadySevereNeedsAMargin: in the first windows after the
// throttle starts, a run queue of an eighth of the time left is severe (a
// spike's onset, where the level must reach 3 within a few tenths of a
// second); once the throttle has been on for onsetWindows windows, it takes
// 1.5 eighths. At a steady overload the level holds the run queue near an
// eighth of the time left, and a Poisson burst takes a window or two just
// past it: each such pair added a class and left the CPUs idle for half a
// second.
func TestThrottleSteadySevereNeedsAMargin(t *testing.T) {
	// 35ms against 10ms with a 22.5ms run queue: +0.25 on the second slow
	// window, +0.125 on each after it.
	o := steadyOverload(t, 12, 360)
	start := o.level()
	if start < 1.45 || start > 1.55 {
		t.Fatalf("level %v after 12 busy windows at 35ms, want 1.5", start)
	}
	// 62.5ms run queues: past an eighth of the 450ms left (56ms), under 1.5
	// eighths (84ms); at 15ms, +0.05 a window.
	for range 2 {
		o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 1000, 20)
	}
	if l := o.level(); l > start+0.11 {
		t.Fatalf("level %v -> %v after two windows with a run queue under 1.5 eighths of the time left, want the latency's +0.1", start, l)
	}
	// 125ms run queues: a class on the second.
	before := o.level()
	for range 2 {
		o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 2000, 20)
	}
	if l := o.level(); l < before+1 {
		t.Fatalf("level %v -> %v after two windows with a run queue past 1.5 eighths of the time left, want a class more", before, l)
	}
}

// TestThrottleSpikeOnsetClimbsByTheQueue: in the first onsetWindows windows
// after the throttle starts, a severe window counts at once, also from
// level 1 and after a window that was not severe, and it adds a class for
// every quarter of the time left its run queue reaches. At a spike's onset
// the requests already queued before Admit (in socket buffers, the accept
// backlog and the run queue) die while the level climbs: the critical
// requests lost at a 5.7x spike all arrived dead in its first 0.3-0.6s.
func TestThrottleSpikeOnsetClimbsByTheQueue(t *testing.T) {
	o := newOnsetThrottled(t, governor.OverloadOptions{})
	o.left = 400 * time.Millisecond
	o.quiet(t, 3)
	// 3,200 runnable goroutines at 16,000 wake-ups a second: a 200ms wait,
	// half of the 400ms left: two classes in the first window.
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 3200, 20)
	if l := o.level(); l < 1.99 || l > 2.01 {
		t.Fatalf("level %v after a severe window whose run queue is half of the time left, want 2", l)
	}

	// From level 1 in the onset, a severe window after one that was not
	// severe counts at once.
	o = newOnsetThrottled(t, governor.OverloadOptions{})
	o.left = 400 * time.Millisecond
	o.quiet(t, 3)
	// 62.5ms against 50ms (an eighth of the time left): a class.
	o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 1000, 20)
	if l := o.level(); l < 0.99 || l > 1.01 {
		t.Fatalf("level %v after a severe window whose run queue is past an eighth of the time left, want 1", l)
	}
	// A window (50ms: the last one was severe) whose 25ms queue is short
	// of the time left: the smaller error, +0.15.
	o.step(t, 50*time.Millisecond, 30*time.Millisecond, 1, 800, 20)
	before := o.level()
	if before < 1.14 || before > 1.16 {
		t.Fatalf("level %v after a window with a 25ms run queue at 35ms, want 1.15", before)
	}
	o.step(t, 100*time.Millisecond, 30*time.Millisecond, 1, 1000, 20)
	if l := o.level(); l < before+0.99 {
		t.Fatalf("level %v -> %v after a severe window in the onset, want a class more at once", before, l)
	}
}

// TestThrottleGivesBackTheIdleCPU: in the ten windows after a
// severe one, a window in which the CPUs idled with no run queue left gives
// back 1.5 classes per unit of the idle share, whatever the latency of the
// goroutines that ran says: a severe window adds a class to drain the
// queue, and once it has drained, the level refuses work the CPUs could do.
// At a steady 2x overload the onset took the level to 2.7-3 where about 1.7
// is needed, and it fell 0.2-0.3 a window while the CPU idled for half a
// second. A window with a queue building, or with the CPUs busy, moves as
// before, and so does an idle window long after the last severe one.
func TestThrottleGivesBackTheIdleCPU(t *testing.T) {
	// 1.5 after 12 windows at 35ms, then two windows with a 125ms run
	// queue (past 1.5 eighths of the 450ms left): +0.05, then a class. The
	// next window is 50ms long (the last one was severe): 8 runnable
	// goroutines are a 0.25ms queue, 480 a 15ms one.
	climb := func(t *testing.T) *onsetThrottled {
		o := steadyOverload(t, 12, 360)
		for range 2 {
			o.step(t, 100*time.Millisecond, 15*time.Millisecond, 1, 2000, 20)
		}
		if l := o.level(); l < 2.54 || l > 2.56 {
			t.Fatalf("level %v after a severe climb from 1.5, want 2.55", l)
		}
		return o
	}
	tests := []struct {
		name     string
		lat      time.Duration // the bucket's midpoint is the window's mean
		share    float64
		runnable uint64
		move     float64
	}{
		{"idle 40%, quick, no queue", 7 * time.Millisecond, 0.6, 8, -0.6},
		{"idle 40%, slow, the queue drained", 30 * time.Millisecond, 0.6, 8, -0.6},
		{"idle 10%: the latency's error gives back more", 3 * time.Millisecond, 0.9, 8, -0.195},
		{"busy, quick", 7 * time.Millisecond, 1, 8, -0.075},
		{"busy, slow, the queue drained", 30 * time.Millisecond, 1, 8, 0},
		{"idle 40%, quick, a queue building", 3 * time.Millisecond, 0.6, 480, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := climb(t)
			before := o.level()
			o.step(t, 50*time.Millisecond, tt.lat, tt.share, tt.runnable, 20)
			if got := o.level() - before; math.Abs(got-tt.move) > 0.01 {
				t.Errorf("%v, CPUs %.0f%% busy, %d runnable: level %v -> %v, want %+.3f", tt.lat, tt.share*100, tt.runnable, before, o.level(), tt.move)
			}
		})
	}
	// Ten windows after the severe one, an idle window gives back by the
	// latency alone: the level then follows the queue, and a Poisson lull
	// is no reason to admit a burst.
	o := climb(t)
	o.step(t, 50*time.Millisecond, 30*time.Millisecond, 1, 8, 20)
	for range 9 {
		o.step(t, 100*time.Millisecond, 30*time.Millisecond, 1, 16, 20)
	}
	before := o.level()
	if before < 2.54 || before > 2.56 {
		t.Fatalf("level %v after ten slow windows whose queue drained, want 2.55 (held)", before)
	}
	o.step(t, 100*time.Millisecond, 7*time.Millisecond, 0.6, 16, 20)
	if got := o.level() - before; math.Abs(got+0.075) > 0.01 {
		t.Errorf("idle window ten windows after a severe one: level %v -> %v, want -0.075", before, o.level())
	}
}
