package governor

import (
	"fmt"
	"math"
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"governor.dev/governor/sdk/shed"
)

// OverloadOptions configure the overload throttle: while the process's
// goroutines wait too long for a CPU, it refuses a growing share of the
// lowest traffic classes on every route with a concurrency limit, before
// any other stage runs.
//
// Why: when the CPU is saturated, requests queue in front of the handler
// (the accept backlog, socket buffers and Go's run queue) where no
// concurrency limit sees them; the limit is not full, yet every request
// waits. The only way to drain that queue is to admit less work than the
// CPU can do, and the throttle takes it from the lowest classes first.
//
// What it reads: the mean scheduling latency (the time a runnable goroutine
// waits to run, runtime/metrics "/sched/latencies:seconds") of the last
// Window, the process's CPU time and the number of goroutines runnable at
// the window's end, read once per Window by the one admission that finds
// the window over (off the hot path, without allocating), and the time
// left to their deadline of the requests that state one (Request.Deadline,
// sampled).
//
// When it acts: after two consecutive windows above Target (a single slow
// window, such as a GC pause, does nothing) in which the process kept at
// least half of its CPUs busy (CPUTimeSource), it sheds a share of the batch
// class that grows with every further slow window, in proportion to how far
// the latency is above Target (at most one class per window); when batch
// is fully shed, browse, then core; critical only with ShedCritical, and
// only when every other class is fully shed. A severe onset is acted on in
// its first window: when the process kept at least 80% of its CPUs busy over
// the window and the goroutines runnable at its end (RunQueueSource) would
// wait at least 2.5 x Target to run (Little's law: their number over the
// rate at which goroutines were scheduled in the window, which the runtime
// times one in eight) and at least an eighth of the time the requests
// reaching Admit had left to their stated deadlines (when they state one; a
// queue they can still wait out is left to the latency, and the runnable
// goroutines are only the part of the queue before Admit that the runtime
// sees: the rest waits in socket buffers and the accept backlog), the window
// counts at once and adds a class; in the first ten windows after the
// throttle starts, a class for every quarter of the time left that the run
// queue's wait reaches, if that is more (at a spike's onset the requests
// already queued before Admit arrive dead while the level climbs). Once the
// throttle has been on for ten windows, it takes a run queue of 1.5 eighths
// of the time left (at a steady overload the level holds the run queue near
// an eighth of it, and a Poisson burst takes a window or two just past it)
// and, once batch is fully shed, two such windows in a row (one window's
// estimate is noisy, and a steady overload that the latency holds would
// otherwise see a class refused at every burst). A stall is not such a
// window: the process's CPUs idle through it. Once the throttle is on, a
// run queue that long also counts a window in which the process got less
// than half of its CPUs: the queue is its own work, and refusing drains it
// (the level then moves as in any other window). While windows stay severe, they are half as long, so a
// spike reaches the higher classes within a few tenths of a second.
// Once the throttle is on, the latency and the run queue must agree: the
// latency is the wait of the goroutines that ran in the window, the run
// queue the wait of those runnable at its end, so a slow window whose queue
// has drained, or a quick one with a queue building, holds the level, and
// otherwise the level moves by the smaller of the two errors (the latency
// alone lags the queue: at a steady overload the level rose on the wait of
// a queue already drained, and the CPUs idled while it fell back). Each
// window below Target gives back in proportion to how far below it the
// latency (and the run queue) is (at most 0.3 classes per window: a quiet
// CPU clears a full level in about 1.3 s, 13 windows; a window that lasted
// longer because no request came to end it gives back as the Windows it
// lasted would have, and, when the process left its CPUs idle through it,
// its run queue is not read: a level left from an overload does not greet
// the traffic that returns after a quiet spell). In the ten windows
// after a severe one, a window in which the process left part of its CPUs
// idle with no run queue (shorter than Target) gives back at least 1.5
// classes per unit of the idle share, whatever the latency: the class the
// severe window added drains the queue, and once it has drained, the level
// refuses work the CPUs could do (at a steady 2x overload the onset took
// the level to 2.7-3 where 1.7 was needed, and it fell 0.2-0.3 a window
// while the CPU idled for half a second). A window in which
// the CPUs were busy but too few goroutines were scheduled to measure
// (long-running work) leaves the level as it is. Windows end on time even
// while the process's goroutines queue for the CPU: one admission in 16
// refreshes the Governor's coarse clock (clock.Coarse.Refresh), whose own
// goroutine waits in that queue.
// Refusals carry ReasonOverload (ErrOverload, a kind of ErrShed) and count
// under the outcome "overload"; governor_sdk_overload_level and
// governor_sdk_sched_latency_seconds show the throttle's state.
type OverloadOptions struct {
	// Disabled turns the throttle off.
	Disabled bool
	// Target is the mean scheduling latency per window above which the
	// throttle acts; 0 means 10ms. A process on a dedicated, lightly loaded
	// CPU sees well under 1ms; set it above what the process sees at its
	// busiest healthy load.
	Target time.Duration
	// Window is how often the latency is read and the shed share adjusted;
	// 0 means 100ms. At least 10ms.
	Window time.Duration
	// ShedCritical lets the throttle shed the critical class once every
	// other class is fully shed. Off by default: critical requests are left
	// to the concurrency limit, its reserve and their deadlines, so a flood
	// of critical traffic alone is not throttled.
	ShedCritical bool
	// Source reads the scheduling latency histogram; nil means the Go
	// runtime's (RuntimeSchedLatency) when Options.Clock is nil. With an
	// injected clock (tests, simulations) the throttle runs only when Source
	// is set: the runtime's latencies are real time, meaningless against a
	// simulated clock.
	Source SchedSource
}

// SchedSource reads a cumulative histogram of scheduling latencies, as
// runtime/metrics.Float64Histogram holds it: counts[i] latencies fell in
// [buckets[i], buckets[i+1]) seconds, counted since the process started
// (len(buckets) == len(counts)+1; the outer bounds may be infinite). The
// throttle reads it once per window, from one goroutine at a time, and does
// not keep the slices past the next call, so an implementation may reuse
// them.
type SchedSource interface {
	ReadSchedLatency() (counts []uint64, buckets []float64)
}

// CPUTimeSource is implemented by a SchedSource that can also tell how much
// CPU time the process has used (cumulative; ok false when unknown). With
// it, a window counts as slow only when the process itself kept its CPUs
// busy (at least half of GOMAXPROCS over the window) or, once the throttle is
// on, has a long run queue (RunQueueSource): a process whose goroutines wait
// because other processes hold the machine's CPUs gains nothing by refusing
// its own work, and the throttle then gives back its level as if the window
// had been quick.
type CPUTimeSource interface {
	ReadCPUTime() (used time.Duration, ok bool)
}

// RunQueueSource is implemented by a SchedSource that can also tell how many
// goroutines are runnable now: ready to run and waiting for a CPU (the Go
// runtime's "/sched/goroutines/runnable:goroutines"). It is the queue the
// latency histogram only reports once its goroutines have run. With it, a
// window whose run queue is a long wait counts as slow whatever share of
// the CPUs the process got, the throttle once on moves its level only
// where the latency and the run queue agree, and with CPUTimeSource as
// well, it acts on the first window of a severe overload (OverloadOptions).
type RunQueueSource interface {
	ReadRunnable() (n uint64, ok bool)
}

// RuntimeSchedLatency returns the Go runtime's scheduling latency histogram
// ("/sched/latencies:seconds"), its count of runnable goroutines
// ("/sched/goroutines/runnable:goroutines"; RunQueueSource) and the
// process's CPU time (getrusage, on Unix; CPUTimeSource). Reading them does
// not allocate.
func RuntimeSchedLatency() SchedSource {
	return &runtimeSched{
		samples:  []rtmetrics.Sample{{Name: "/sched/latencies:seconds"}},
		runnable: []rtmetrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}},
	}
}

type runtimeSched struct {
	mu       sync.Mutex
	samples  []rtmetrics.Sample
	runnable []rtmetrics.Sample
}

func (r *runtimeSched) ReadSchedLatency() ([]uint64, []float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rtmetrics.Read(r.samples)
	if r.samples[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return nil, nil
	}
	h := r.samples[0].Value.Float64Histogram()
	return h.Counts, h.Buckets
}

func (r *runtimeSched) ReadCPUTime() (time.Duration, bool) { return processCPU() }

func (r *runtimeSched) ReadRunnable() (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rtmetrics.Read(r.runnable)
	if r.runnable[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0, false
	}
	return r.runnable[0].Value.Uint64(), true
}

// Throttle constants. The level is a number of classes in 1/levelUnit: level
// 1.5 sheds all of batch and half of browse.
const (
	levelUnit     = 1 << 13
	riseGain      = 0.1 // classes added per slow window per unit of relative error
	maxErr        = 10  // relative error counted at most: +1 class per window
	fallGain      = 0.3 // classes removed per quick window per unit of relative error
	idleGain      = 1.5 // classes removed per window per unit of the CPU share left idle with no run queue, after a severe window
	idleWindows   = 10  // windows after a severe one in which idleGain applies
	levelFloor    = 0.02
	notOurs       = -0.5        // the error counted for a slow window in which the process was not busy
	minBusy       = 0.5         // share of GOMAXPROCS the process must have used for a slow window to count
	minWakeups    = 8           // fewer in a window say nothing about the CPU
	onsetBusy     = 0.8         // share of GOMAXPROCS the process must have used for one window to start the throttle
	onsetQueue    = 2.5         // the run queue's wait, in targets, for one window to start the throttle
	onsetLeft     = 1.0 / 8     // the part of the time left the run queue's wait must reach for a severe window, from level 0
	onLeft        = 1.5 / 8     // the same once the level has been above 0 for onsetWindows
	onsetWindows  = 10          // windows after the level left 0 in which a severe window needs only onsetLeft
	onsetStep     = 2.0 / 8     // in those windows, a severe window adds a class per this part of the time left its run queue reaches
	schedSampling = 8           // the runtime times one wake-up in schedSampling (gTrackingPeriod)
	leftEvery     = 4           // one admission in leftEvery with a stated deadline reports its time left
	leftShards    = 8           // the time-left sums are split over this many cache lines
	minLeft       = 4           // time-left samples needed for a window's mean
	leftMaxAge    = time.Second // a mean of time left older than this is forgotten
	refreshEvery  = 16          // one admission in refreshEvery reads the system clock (clock.Coarse.Refresh)
	fastDiv       = 2           // windows are Window/fastDiv while they are severe
	minWindow     = int64(10 * time.Millisecond)
	defaultSched  = 10 * time.Millisecond
	defaultWin    = 100 * time.Millisecond
)

// throttle is the overload throttle of one Governor. The hot path reads one
// word: the end of the current window (high 48 bits, in 1.024µs units from
// the origin) and the level (low 16 bits).
type throttle struct {
	word   atomic.Uint64
	origin int64
	window int64
	target float64 // seconds
	src    SchedSource

	mu      sync.Mutex // held by the admission that rolls the window
	prev    []uint64
	primed  bool
	slow    int // consecutive windows above the target
	queued  int // consecutive severe windows (before the two-in-a-row rule)
	on      int // windows judged since the level last left 0
	settle  int // windows judged since the last severe one, up to idleWindows
	cpu     CPUTimeSource
	rq      RunQueueSource
	lastCPU time.Duration
	lastAt  int64
	haveCPU bool
	rolled  int64         // when the window that ends now began
	left    float64       // mean time left to stated deadlines, seconds; -1 unknown
	leftAt  int64         // when left was measured
	level   float64       // in classes, 0..max
	max     float64       // NumClasses-1, or NumClasses with ShedCritical
	latency atomic.Uint64 // float64 bits: the last window's mean, seconds

	// lefts sum the time left to their stated deadline of the sampled
	// admissions since it was last read; each shard its own cache line.
	lefts [leftShards]leftShard
}

type leftShard struct {
	sum atomic.Int64 // ns, negative times counted as 0
	n   atomic.Int64
	_   [48]byte
}

func newThrottle(o OverloadOptions, injected bool, now int64) (*throttle, error) {
	if o.Target < 0 {
		return nil, fmt.Errorf("%w: Overload.Target must not be negative, got %s", ErrInvalidOptions, o.Target)
	}
	if o.Window < 0 || (o.Window > 0 && o.Window < 10*time.Millisecond) {
		return nil, fmt.Errorf("%w: Overload.Window must be 0 (default 100ms) or at least 10ms, got %s", ErrInvalidOptions, o.Window)
	}
	if o.Disabled {
		return nil, nil
	}
	src := o.Source
	if src == nil {
		if injected {
			return nil, nil
		}
		src = RuntimeSchedLatency()
	}
	t := &throttle{origin: now, rolled: now, left: -1, settle: idleWindows, window: int64(o.Window), target: o.Target.Seconds(), src: src, max: float64(shed.NumClasses - 1)}
	if o.ShedCritical {
		t.max = float64(shed.NumClasses)
	}
	if t.window == 0 {
		t.window = int64(defaultWin)
	}
	if o.Target == 0 {
		t.target = defaultSched.Seconds()
	}
	t.cpu, _ = src.(CPUTimeSource)
	t.rq, _ = src.(RunQueueSource)
	t.mu.Lock()
	t.sample() // the first window's delta starts here
	t.busy(now)
	t.mu.Unlock()
	t.word.Store(t.pack(now+t.window, 0))
	return t, nil
}

func (t *throttle) pack(due int64, level uint32) uint64 {
	return uint64(due-t.origin)>>10<<16 | uint64(level)
}

// check returns the level in force at now, rolling the window when it is
// over. It is the throttle's hot path: one atomic load.
func (t *throttle) check(now int64) uint32 {
	w := t.word.Load()
	if now-t.origin >= int64(w>>16<<10) {
		w = t.roll(now)
	}
	return uint32(w & 0xffff)
}

// sheds reports whether a request of class c (0 critical .. NumClasses-1
// batch) is refused at level; r is a uniform random number.
func sheds(level uint32, c int, r uint32) bool {
	from := uint32(shed.NumClasses-1-c) * levelUnit
	if level <= from {
		return false
	}
	x := level - from
	return x >= levelUnit || r&(levelUnit-1) < x
}

// roll reads the latency of the window that ended and adjusts the level.
// One admission does it; the others keep the word they read.
func (t *throttle) roll(now int64) uint64 {
	if !t.mu.TryLock() {
		return t.word.Load()
	}
	defer t.mu.Unlock()
	w := t.word.Load()
	if now-t.origin < int64(w>>16<<10) {
		return w // rolled meanwhile
	}
	lat, n := t.sample()
	share := t.busy(now)
	q := t.runQueue(n, now-t.rolled)
	// A window that no admission ended on time (no request came) counts,
	// when it gives back, as the Windows it lasted.
	span := max(1, (now-t.rolled)/t.window)
	if span > 1 && share >= 0 && share < minBusy {
		// An idle spell: its few wake-ups are not the pace at which the
		// CPUs drain a queue, and the goroutines runnable at its end are
		// the requests coming back. Its run queue is unknown, not long.
		q = -1
	}
	t.rolled = now
	t.latency.Store(math.Float64bits(lat))
	win := t.window
	if t.adjust(lat, n, share, q, t.timeLeft(now), float64(span)) {
		win = max(t.window/fastDiv, minWindow)
	}
	w = t.pack(now+win, uint32(t.level*levelUnit))
	t.word.Store(w)
	return w
}

// note records, for one admission in leftEvery (h is the admission's random
// number), the time left to the deadline the request states (ns).
func (t *throttle) note(left int64, h uint32) {
	if h>>6&(leftEvery-1) != 0 {
		return
	}
	s := &t.lefts[h>>8&(leftShards-1)]
	s.sum.Add(max(left, 0))
	s.n.Add(1)
}

// timeLeft returns the mean time left to their stated deadlines (seconds)
// of the admissions sampled since it last took a mean of at least minLeft
// samples, that mean while it is under leftMaxAge old, or -1: the requests
// state no deadline.
func (t *throttle) timeLeft(now int64) float64 {
	var n int64
	for i := range t.lefts {
		n += t.lefts[i].n.Load()
	}
	if n >= minLeft {
		var sum int64
		n = 0
		for i := range t.lefts {
			sum += t.lefts[i].sum.Swap(0)
			n += t.lefts[i].n.Swap(0)
		}
		t.left, t.leftAt = float64(sum)/float64(n)/1e9, now
	}
	if t.left >= 0 && now-t.leftAt > int64(leftMaxAge) {
		t.left = -1
	}
	return t.left
}

// adjust moves the level for a window whose mean latency was lat over n
// wake-ups, in which the process used share of its CPUs (negative: unknown),
// at whose end the run queue would wait q (negative: unknown), and in which
// requests reached Admit with left to their stated deadlines (negative: none
// stated), and which lasted span Windows (1 unless no request came to end
// it on time): an integral controller on the relative error
// (lat-target)/target, raising by up to riseGain*maxErr classes per slow
// window and cutting by up to fallGain per Window of a quick one (span
// of them), so a window just under the target during an overload gives back
// little and a quiet CPU clears the level in about a second.
//
// A long run queue (at least onsetQueue targets, and at least onsetLeft of
// the time the requests had left; onLeft once the level has been above 0
// for onsetWindows windows) in a window the process kept onsetBusy of its
// CPUs busy (severe) adds a class: the requests arriving now would wait
// past their deadlines, and only refusing at once saves them; a queue they
// can wait out moves the level as any other window does, so a steady
// overload is not met with a class refused per window while the CPU could
// serve it. In the first onsetWindows windows after the level left 0 (a
// spike's onset), a severe window counts at once and adds a class for every
// onsetStep of the time left its queue reaches, if that is more: the
// requests queued before Admit arrive dead while the level climbs (at a
// 5.7x spike, every critical request lost arrived dead in its first 0.3-0.6
// s). After them, from level 1, a severe window counts as one only after
// another.
//
// Once the level is above 0, the latency and the run queue must agree: the
// latency is the wait of the goroutines that ran in the window, the run
// queue the wait of those runnable at its end. A slow window whose queue has
// drained (the level already refuses enough) or a quick one with a queue
// building (it refuses too little) holds the level; when both are above the
// target it rises by the smaller error, when both are below it falls by the
// smaller one. On the latency alone, a steady overload ran a limit cycle:
// the level rose on the latency of a queue already drained, the CPUs idled
// for half a second while it fell back, and it fell below the level needed
// while the next queue built.
//
// A long run queue alone, once the throttle is on, makes the window the
// process's own overload even when it used less than minBusy of its CPUs:
// the queue is its own work, whatever share of the machine it gets (from
// level 0 such a window does not count: other processes taking the CPUs for
// a moment are no reason to start refusing). From level 0 the level rises
// only on the second slow window in a row, or on the first severe one. A
// window with fewer than minWakeups wake-ups in which the process kept
// minBusy of its CPUs busy moves nothing.
//
// In the idleWindows windows after a severe one, a window that would fall
// or hold with the run queue under the target falls by at least idleGain
// classes per unit of the CPU share the process left idle: the severe
// window's class was sized to drain the queue, and once the queue has
// drained, the level refuses work the CPUs could do. Past them, an idle
// window gives back by the latency alone (a Poisson lull is no reason to
// admit a burst). It reports whether the window was
// severe and the level is still below its maximum: the next window is then
// shorter.
func (t *throttle) adjust(lat float64, n uint64, share, q, left, span float64) bool {
	if n < minWakeups {
		if share >= minBusy {
			// The CPUs were busy with hardly any wake-ups (the runtime
			// times one in eight): long-running goroutines, or a short
			// window in an overload. The window tells nothing.
			return false
		}
		lat, q = 0, min(q, 0) // a window with hardly any wake-ups has no queue
	}
	e := (lat - t.target) / t.target
	long := q >= onsetQueue*t.target
	onset := t.on < onsetWindows
	part := onsetLeft
	if !onset {
		// At a steady overload the level holds the queue near the time
		// left, and Poisson bursts take single windows just past it.
		part = onLeft
	}
	severe := long && share >= onsetBusy && (left < 0 || q >= part*left)
	if severe {
		t.queued++
	} else {
		t.queued = 0
	}
	// One window's queue is a noisy estimate (the runnable count is one
	// instant): past the onset's first onsetWindows windows, from level 1,
	// it takes two such windows in a row.
	severe = severe && (t.level < 1 || onset || t.queued >= 2)
	if severe {
		e = maxErr
		if onset && left > 0 {
			// In the onset, a class for every onsetStep of the time
			// left the queue reaches: the requests already queued
			// before Admit die while the level climbs.
			e = maxErr * max(1, q/(onsetStep*left))
		}
	}
	if e > 0 && share >= 0 && share < minBusy && (!long || t.level == 0) {
		e = notOurs // the CPUs are taken by others: refusing does not help
	}
	if !severe && t.level > 0 && q >= 0 {
		eq := (q - t.target) / t.target
		switch {
		case e > 0 && eq > 0:
			e = min(e, eq)
		case e < 0 && eq < 0:
			e = max(e, eq)
		default:
			e = 0 // they disagree: hold
		}
	}
	if severe {
		t.settle = 0
	} else if t.settle < idleWindows {
		t.settle++
		if t.level > 0 && e <= 0 && share >= 0 && q >= 0 && q < t.target {
			// The CPUs idled with no queue left after a severe climb:
			// the level refuses work they could do. Give back in
			// proportion to the idle share, whatever the latency of the
			// goroutines that ran says.
			e = min(e, -idleGain*(1-share)/fallGain)
		}
	}
	if t.level > 0 {
		t.on++
	}
	if e > 0 {
		t.slow++
		if t.slow < 2 && t.level == 0 && !severe {
			return false
		}
		if !severe {
			e = min(e, maxErr)
		}
		t.level = min(t.max, t.level+riseGain*e)
		return severe && t.level < t.max
	}
	t.slow = 0
	t.level += fallGain * e * span
	if t.level < levelFloor {
		t.level, t.on = 0, 0
	}
	return false
}

// runQueue estimates how long a goroutine made runnable now waits to run
// (seconds), by Little's law: the goroutines runnable now over the rate at
// which goroutines were scheduled in the window that ended (n timed
// wake-ups in elapsed ns; the runtime times one in schedSampling, its
// gTrackingPeriod, so the rate is schedSampling*n/elapsed). It is the wall
// time the run queue takes to drain at the pace it drained, whatever share
// of the machine's CPUs the process got. It is only the part of the queue
// before Admit that the runtime sees: the requests still in socket buffers
// and the accept backlog are not runnable goroutines, which is why a severe
// window needs this wait to reach only a part of the time left (onsetLeft,
// onLeft). -1 when unknown; 0 when no wake-up was timed.
func (t *throttle) runQueue(n uint64, elapsed int64) float64 {
	if t.rq == nil || elapsed <= 0 {
		return -1
	}
	r, ok := t.rq.ReadRunnable()
	if !ok {
		return -1
	}
	if n == 0 {
		return 0
	}
	return float64(r) * float64(elapsed) / 1e9 / float64(schedSampling*n)
}

// busy returns the share of its CPUs (of GOMAXPROCS) the process used
// since the previous call; -1 when unknown.
func (t *throttle) busy(now int64) float64 {
	if t.cpu == nil {
		return -1
	}
	used, ok := t.cpu.ReadCPUTime()
	if !ok {
		t.haveCPU = false
		return -1
	}
	prevUsed, prevAt, had := t.lastCPU, t.lastAt, t.haveCPU
	t.lastCPU, t.lastAt, t.haveCPU = used, now, true
	if !had || now <= prevAt {
		return -1
	}
	// GOMAXPROCS is read now, not at New: the runtime changes it when the
	// container's CPU limit changes, and a share of a stale count read a
	// saturated process as idle (or an idle one as saturated).
	procs := float64(runtime.GOMAXPROCS(0))
	return float64(used-prevUsed) / (procs * float64(now-prevAt))
}

// sample returns the mean latency (seconds) and the number of wake-ups
// since the previous sample, and remembers the counts. Bucket midpoints
// stand for their samples (the lower bound for the last, open bucket).
func (t *throttle) sample() (float64, uint64) {
	counts, buckets := t.src.ReadSchedLatency()
	if len(counts) == 0 || len(buckets) != len(counts)+1 {
		return 0, 0
	}
	if len(t.prev) != len(counts) {
		t.prev = make([]uint64, len(counts))
		t.primed = false
	}
	var n uint64
	var sum float64
	for i, c := range counts {
		d := c - t.prev[i]
		if c < t.prev[i] {
			d = 0
		}
		t.prev[i] = c
		if d == 0 {
			continue
		}
		lo, hi := buckets[i], buckets[i+1]
		var v float64
		switch {
		case math.IsInf(lo, -1) || lo < 0:
			v = max(hi, 0)
		case math.IsInf(hi, 1):
			v = lo
		default:
			v = (lo + hi) / 2
		}
		n += d
		sum += v * float64(d)
	}
	if !t.primed {
		t.primed = true
		return 0, 0
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// OverloadLevel returns the overload throttle's level: 0 when it sheds
// nothing, 1 when it sheds all of the batch class, 2.5 when batch and browse
// and half of core, up to 3 (4 with ShedCritical); and the mean scheduling
// latency of the last window it read. Both are 0 when the throttle is off.
func (g *Governor) OverloadLevel() (level float64, latency time.Duration) {
	t := g.throttle
	if t == nil {
		return 0, 0
	}
	level = float64(t.word.Load()&0xffff) / levelUnit
	return level, time.Duration(math.Float64frombits(t.latency.Load()) * 1e9)
}
