// Package sim is the overload laboratory's deterministic discrete-event
// simulator. A scenario's traffic (drawn from its seed) is played against a
// simulated server in virtual time: admitted requests share the server's
// cores (processor sharing, scaled by capacity events, stopped by pauses),
// then wait on a downstream with a bounded connection pool. Clients keep
// deadlines and retry (with or without a budget). The same seed gives the
// same requests to every policy, so runs are exactly repeatable and
// policies are compared on identical traffic.
//
// Governor runs as its real code (sdk/limit driven through clock.Fake, and
// sdk/shed's class ceilings); the peers that cannot run in virtual time are
// re-implemented from their published formulas and labelled "-reimpl".
package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
	"governor.dev/governor/sdk/clock"
)

// ErrUnknown is returned for a policy name the simulator does not know.
var ErrUnknown = errors.New("sim: unknown policy")

// Options tune the simulated server.
type Options struct {
	// Cores of the server; default 1 (the live server runs on one core).
	Cores int
	// Tick is the time step; default 100µs.
	Tick time.Duration
	// Trace, if not nil, receives a line per virtual second: the limit,
	// the requests in flight, at the downstream and waiting for one of its
	// connections, the admissions and refusals of the second, and the
	// limiter's state where the policy exposes it (Governor's
	// limit.Snapshot). With nil, BENCH_TRACE in the environment sends the
	// lines to stderr, as in live mode.
	Trace io.Writer
}

func (o Options) withDefaults() Options {
	if o.Cores <= 0 {
		o.Cores = 1
	}
	if o.Tick <= 0 {
		o.Tick = 100 * time.Microsecond
	}
	if o.Trace == nil && os.Getenv("BENCH_TRACE") != "" {
		o.Trace = os.Stderr
	}
	return o
}

// Capacity is the simulated server's CPU capacity in requests per second.
func Capacity(s *scenario.Scenario, o Options) float64 {
	o = o.withDefaults()
	return float64(o.Cores) / s.Cost.CPU.Mean.D().Seconds()
}

// Output is one policy's run.
type Output struct {
	Attempts []report.Attempt
	// Limits samples the policy's limit every 100 ms (-1: no limit).
	Limits []int
}

// Run plays the scenario against the named policy.
func Run(s *scenario.Scenario, name string, o Options) (Output, error) {
	f, ok := Factories()[name]
	if !ok {
		return Output{}, fmt.Errorf("%w: %q", ErrUnknown, name)
	}
	o = o.withDefaults()
	e := newEngine(s, o)
	env := &Env{
		Clock:       e.clk,
		CPU:         e.cpuUtil,
		Inflight:    func() int { return e.inflight },
		CapacityRPS: Capacity(s, o),
		StaticLimit: s.StaticLimit(Capacity(s, o)),
		Deadline:    s.Client.Deadline.D(),
	}
	p, err := f(env)
	if err != nil {
		return Output{}, err
	}
	e.policy = p
	e.run()
	return Output{Attempts: e.attempts, Limits: e.limits}, nil
}

type job struct {
	att      int32
	handle   any
	inflight int
	finishV  float64
	wait     time.Duration
	end      time.Duration
	done     bool
}

type engine struct {
	s      *scenario.Scenario
	o      Options
	clk    *clock.Fake
	policy Policy

	reqs   []scenario.Request
	pauses []time.Duration
	budget *scenario.Budget

	attempts []report.Attempt
	jobs     []*job // by attempt index (nil when rejected)
	limits   []int

	now      time.Duration
	inflight int
	v        float64 // processor-sharing virtual time
	cpuQ     jobHeap // by finishV
	dsQ      jobHeap // in service at the downstream, by end
	dsWait   []*job  // waiting for a downstream connection
	timeouts eventHeap
	retries  eventHeap

	busy, busyPrev float64 // CPU busy ticks in the current / last 100 ms
	busyTicks      int

	// The trace's counts of the current virtual second (Options.Trace).
	admitted, refused int
}

func newEngine(s *scenario.Scenario, o Options) *engine {
	src := scenario.NewSource(s, 0)
	capRPS := Capacity(s, o)
	e := &engine{s: s, o: o, clk: clock.NewFake(time.Time{})}
	e.reqs = src.Requests(capRPS)
	e.budget = scenario.NewBudget(s.Client.RetryBudget)
	e.pauses = src.PauseSchedule()
	return e
}

func (e *engine) cpuUtil() float64 { return e.busyPrev }

func (e *engine) paused(t time.Duration) bool {
	if e.s.Pauses == nil {
		return false
	}
	for len(e.pauses) > 0 && e.pauses[0]+e.s.Pauses.Length.D() <= t {
		e.pauses = e.pauses[1:]
	}
	return len(e.pauses) > 0 && e.pauses[0] <= t
}

func (e *engine) run() {
	dt := e.o.Tick
	end := e.s.Length()
	drainUntil := end + 2*e.s.Client.Deadline.D()
	next := 0
	ticksPer100ms := int(100 * time.Millisecond / dt)
	for t := time.Duration(0); t < drainUntil; t += dt {
		e.now = t
		// New first attempts and retries due in this tick, in time order
		// (policies such as x/time/rate must not see time go back).
		for {
			first := next < len(e.reqs) && e.reqs[next].At < t+dt
			retry := len(e.retries) > 0 && e.retries[0].at < t+dt
			if first && (!retry || e.reqs[next].At <= e.retries[0].at) {
				e.send(e.reqs[next].At, int32(next), 0)
				next++
				continue
			}
			if !retry {
				break
			}
			if ev := heap.Pop(&e.retries).(event); ev.at < end {
				e.send(ev.at, ev.req, ev.try)
			}
		}
		e.tickCPU(t, dt)
		e.tickDownstream(t + dt)
		for len(e.timeouts) > 0 && e.timeouts[0].at < t+dt {
			ev := heap.Pop(&e.timeouts).(event)
			// The client gives up at the deadline: retry unless the answer
			// came in time (one finished later in this same tick is late).
			if j := e.jobs[ev.att]; j != nil && (!j.done || e.attempts[ev.att].Outcome == report.Late) {
				e.maybeRetry(ev.at, ev.req, ev.try)
			}
		}
		e.clk.Advance(dt)
		e.busyTicks++
		if e.busyTicks == ticksPer100ms {
			e.busyPrev, e.busy, e.busyTicks = e.busy/float64(ticksPer100ms), 0, 0
			e.limits = append(e.limits, e.policy.Limit())
			if e.o.Trace != nil && len(e.limits)%10 == 0 {
				e.traceSecond()
			}
		}
	}
	// Whatever is still running never answered in time.
	for i, j := range e.jobs {
		if j != nil && !j.done {
			e.attempts[i].Outcome = report.Late
			e.attempts[i].Latency = drainUntil - e.attempts[i].Start
		}
	}
}

func (e *engine) send(at time.Duration, req int32, try uint8) {
	r := e.reqs[req]
	idx := int32(len(e.attempts))
	e.attempts = append(e.attempts, report.Attempt{Request: req, Class: r.Class, Try: try, Start: at})
	if try == 0 {
		e.budget.First(at)
	}
	h, ok := e.policy.Admit(at, int(r.Class), e.inflight)
	if !ok {
		e.refused++
		e.attempts[idx].Outcome = report.Rejected
		e.jobs = append(e.jobs, nil)
		e.maybeRetry(at, req, try)
		return
	}
	e.admitted++
	e.inflight++
	j := &job{att: idx, handle: h, inflight: e.inflight, wait: r.Wait, finishV: e.v + r.CPU.Seconds()}
	e.jobs = append(e.jobs, j)
	heap.Push(&e.cpuQ, jobItem{j, j.finishV})
	heap.Push(&e.timeouts, event{at: at + e.s.Client.Deadline.D(), att: idx, req: req, try: try})
}

func (e *engine) maybeRetry(at time.Duration, req int32, try uint8) {
	c := e.s.Client
	if int(try)+1 >= c.MaxAttempts || !e.budget.Retry(at) {
		return
	}
	heap.Push(&e.retries, event{at: at + c.Backoff.D(), req: req, try: try + 1})
}

func (e *engine) tickCPU(t, dt time.Duration) {
	n := len(e.cpuQ)
	if e.paused(t) {
		e.busy++ // a stall keeps the CPU busy (GC-like) but serves nobody
		return
	}
	if n == 0 {
		return
	}
	cores := float64(e.o.Cores)
	e.busy += math.Min(1, float64(n)/cores)
	rate := e.s.CapacityFactorAt(t) * math.Min(1, cores/float64(n))
	e.v += dt.Seconds() * rate
	for len(e.cpuQ) > 0 && e.cpuQ[0].key <= e.v+1e-12 {
		j := heap.Pop(&e.cpuQ).(jobItem).j
		e.toDownstream(j, t+dt)
	}
}

func (e *engine) toDownstream(j *job, at time.Duration) {
	if j.wait <= 0 {
		e.complete(j, at)
		return
	}
	if k := e.downstreamLimit(); k > 0 && len(e.dsQ) >= k {
		e.dsWait = append(e.dsWait, j)
		return
	}
	e.startDownstream(j, at)
}

func (e *engine) downstreamLimit() int {
	if e.s.Downstream == nil {
		return 0
	}
	return e.s.Downstream.Concurrency
}

func (e *engine) startDownstream(j *job, at time.Duration) {
	w := time.Duration(float64(j.wait) * e.s.LatencyFactorAt(at))
	j.end = at + w
	heap.Push(&e.dsQ, jobItem{j, float64(j.end)})
}

func (e *engine) tickDownstream(until time.Duration) {
	for len(e.dsQ) > 0 && e.dsQ[0].key <= float64(until) {
		j := heap.Pop(&e.dsQ).(jobItem).j
		e.complete(j, j.end)
		if len(e.dsWait) > 0 {
			w := e.dsWait[0]
			e.dsWait = e.dsWait[1:]
			e.startDownstream(w, j.end)
		}
	}
}

func (e *engine) complete(j *job, at time.Duration) {
	j.done = true
	a := &e.attempts[j.att]
	a.Latency = at - a.Start
	late := at > a.Start+e.s.Client.Deadline.D()
	a.Outcome = report.OK
	if late {
		a.Outcome = report.Late
	}
	e.inflight--
	e.policy.Done(j.handle, at, a.Latency, j.inflight, late)
}

type jobItem struct {
	j   *job
	key float64
}

type jobHeap []jobItem

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(a, b int) bool { return h[a].key < h[b].key }
func (h jobHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(jobItem)) }
func (h *jobHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type event struct {
	at  time.Duration
	att int32
	req int32
	try uint8
}

type eventHeap []event

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(a, b int) bool { return h[a].at < h[b].at }
func (h eventHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// traceSecond prints the trace line of the virtual second that just ended.
func (e *engine) traceSecond() {
	fmt.Fprintf(e.o.Trace, "sim t=%ds limit=%d inflight=%d downstream=%d waiting=%d admitted=%d refused=%d%s\n",
		len(e.limits)/10, e.policy.Limit(), e.inflight, len(e.dsQ), len(e.dsWait), e.admitted, e.refused, report.LimitState(e.policy))
	e.admitted, e.refused = 0, 0
}
