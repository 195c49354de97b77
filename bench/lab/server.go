package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"governor.dev/governor/bench/limiters"
	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/rules"
)

// Request headers between the load generator and the server. The load
// generator draws every cost, so all limiters serve identical requests.
const (
	hClass    = "X-Bench-Class"    // class rank 0..3
	hUser     = "X-Bench-User"     // user key
	hCPU      = "X-Bench-Cpu"      // CPU cost, ns
	hWait     = "X-Bench-Wait"     // downstream wait before latency events, ns
	hDeadline = "X-Bench-Deadline" // absolute deadline, Unix ns
)

// server is the live mode's server process: a handler that does real CPU
// work and waits on a simulated downstream, behind the limiter under test.
type server struct {
	s       *scenario.Scenario
	lim     limiters.Limiter
	gate    sync.RWMutex
	burn    *burner
	pool    chan struct{} // downstream connections; nil when unlimited
	t0      atomic.Int64  // Unix ns of the run's start (0: not started)
	started chan struct{}
	once    sync.Once
	// inflight counts admitted requests (for tracing).
	inflight atomic.Int64
	mu       sync.Mutex
	limits   []int // the limiter's limit every 100 ms since the start
	// traced turns on the per-request measurements below (BENCH_TRACE).
	traced bool
	tr     traceCounts
}

// traceCounts are the per-second measurements BENCH_TRACE prints: where a
// request's time goes before the handler, and what the refusals cost.
type traceCounts struct {
	n        atomic.Int64 // requests that reached the handler
	preSum   atomic.Int64 // sum of send-to-handler times, ns
	preMax   atomic.Int64
	dead     atomic.Int64 // reached the handler after their deadline
	refused  atomic.Int64
	overload atomic.Int64 // refused by Governor's overload throttle
	refSum   atomic.Int64 // time in the handler of refused requests, ns
	admitted atomic.Int64
	handSum  atomic.Int64 // handler time of admitted requests, ns
	burnSum  atomic.Int64 // CPU burned as the requests' cost, ns
	// Per 100 ms tick, for the step trace (stepTrace).
	tickDone    atomic.Int64 // admitted requests that finished
	tickRefused atomic.Int64
}

// newServer builds the server; perNs is the burner's work rate (0: measure
// it now).
func newServer(s *scenario.Scenario, lim limiters.Limiter, perNs float64) *server {
	sv := &server{s: s, lim: lim, started: make(chan struct{}), traced: os.Getenv("BENCH_TRACE") != ""}
	sv.burn = newBurner(&sv.gate)
	if perNs > 0 {
		sv.burn.perNs = perNs
	}
	if s.Downstream != nil && s.Downstream.Concurrency > 0 {
		sv.pool = make(chan struct{}, s.Downstream.Concurrency)
	}
	return sv
}

// elapsed is the scenario time now (negative before the start).
func (sv *server) elapsed() time.Duration {
	t0 := sv.t0.Load()
	if t0 == 0 {
		return -1
	}
	return time.Duration(time.Now().UnixNano() - t0)
}

func (sv *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", func(w http.ResponseWriter, r *http.Request) {
		sv.once.Do(func() {
			sv.t0.Store(time.Now().UnixNano())
			close(sv.started)
		})
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /work", sv.work)
	return mux
}

func header(r *http.Request, name string) int64 {
	v, _ := strconv.ParseInt(r.Header.Get(name), 10, 64)
	return v
}

func (sv *server) work(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	waitPause(&sv.gate) // a pause stops new work too
	class := int(header(r, hClass))
	if class < 0 || class >= len(rules.Classes) {
		http.Error(w, "bad class", http.StatusBadRequest)
		return
	}
	deadline := time.Unix(0, header(r, hDeadline))
	if sv.traced {
		// The generator sent the request one client deadline before its
		// deadline: the rest is time in the network, the accept queue, the
		// run queue and the HTTP parser.
		pre := int64(start.Sub(deadline.Add(-sv.s.Client.Deadline.D())))
		sv.tr.n.Add(1)
		sv.tr.preSum.Add(pre)
		for m := sv.tr.preMax.Load(); pre > m && !sv.tr.preMax.CompareAndSwap(m, pre); m = sv.tr.preMax.Load() {
		}
		if start.After(deadline) {
			sv.tr.dead.Add(1)
		}
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	stated, _, _ := httpgov.ParseDeadline(r.Header, start)
	t, err := sv.lim.Acquire(ctx, limiters.Request{Class: rules.Classes[class], User: uint64(header(r, hUser)), Deadline: stated})
	if err != nil {
		if sv.traced {
			sv.tr.refused.Add(1)
			sv.tr.tickRefused.Add(1)
			sv.tr.refSum.Add(int64(time.Since(start)))
			if errors.Is(err, governor.ErrOverload) {
				sv.tr.overload.Add(1)
			}
		}
		code := http.StatusServiceUnavailable // gave up waiting in a queue
		if errors.Is(err, limiters.ErrRejected) {
			code = http.StatusTooManyRequests
		}
		w.WriteHeader(code)
		return
	}
	sv.inflight.Add(1)
	defer sv.inflight.Add(-1)
	at := sv.elapsed()
	cpu := time.Duration(header(r, hCPU))
	if f := sv.s.CapacityFactorAt(at); f > 0 && at >= 0 {
		cpu = time.Duration(float64(cpu) / f)
	}
	sv.burn.burn(cpu)
	if sv.traced {
		sv.tr.burnSum.Add(int64(cpu))
	}
	if wait := time.Duration(header(r, hWait)); wait > 0 {
		if sv.pool != nil {
			sv.pool <- struct{}{}
		}
		if at := sv.elapsed(); at >= 0 {
			wait = time.Duration(float64(wait) * sv.s.LatencyFactorAt(at))
		}
		time.Sleep(wait)
		if sv.pool != nil {
			<-sv.pool
		}
	}
	latency := time.Since(start)
	sv.lim.Release(t, latency, time.Now().After(deadline))
	if sv.traced {
		sv.tr.admitted.Add(1)
		sv.tr.tickDone.Add(1)
		sv.tr.handSum.Add(int64(latency))
	}
	w.WriteHeader(http.StatusOK)
}

// pauses stalls the server on the scenario's pause schedule.
func (sv *server) pauses(ctx context.Context) {
	if sv.s.Pauses == nil {
		return
	}
	select {
	case <-sv.started:
	case <-ctx.Done():
		return
	}
	t0 := time.Unix(0, sv.t0.Load())
	for _, at := range scenario.NewSource(sv.s, 1).PauseSchedule() {
		select {
		case <-time.After(time.Until(t0.Add(at))):
		case <-ctx.Done():
			return
		}
		sv.gate.Lock()
		time.Sleep(sv.s.Pauses.Length.D())
		sv.gate.Unlock()
	}
}

// serve listens on a random loopback port, reports the address through
// ready, and serves until ctx ends.
func (sv *server) serve(ctx context.Context, ready func(addr string) error) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("lab: server: %w", err)
	}
	hs := &http.Server{Handler: sv.routes(), ReadHeaderTimeout: 5 * time.Second}
	go sv.pauses(ctx)
	go sv.trace(ctx)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if err := ready(ln.Addr().String()); err != nil {
		hs.Close()
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("lab: server: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return nil
}

// trace samples the limiter's limit every 100 ms from the start of the run
// (for limiters that expose one), and when BENCH_TRACE is set logs to stderr
// once a second: the limit, the in-flight count, the mean and largest time
// from the generator's send to the handler's start ("pre"), how many
// requests reached the handler after their deadline ("dead"), the mean
// handler time of admitted and refused requests, the process's CPU time
// beyond the requests' own cost per request handled ("overhead": accepting,
// parsing, refusing, garbage collection), the most goroutines runnable at
// one of its 100 ms ticks, and for Governor the overload throttle's level at
// every tick and its limiter's state (limitState).
func (sv *server) trace(ctx context.Context) {
	l, ok := sv.lim.(interface{ Limit() int })
	if !ok && !sv.traced {
		return
	}
	ov, _ := sv.lim.(interface {
		Overload() (float64, time.Duration)
	})
	var levels, ticks []byte
	var runnable uint64 // the most goroutines runnable at a tick this second
	tick := newSchedLatency()
	lastTick := time.Now()
	select {
	case <-sv.started:
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	lastCPU := processCPU()
	sched := newSchedLatency()
	for n := 1; ; n++ {
		select {
		case <-t.C:
			lim := -1
			if ok {
				lim = l.Limit()
				sv.mu.Lock()
				sv.limits = append(sv.limits, lim)
				sv.mu.Unlock()
			}
			if sv.traced {
				r := sched.runnable()
				runnable = max(runnable, r)
				// What the throttle reads per window: the mean latency and
				// the run queue's wait by Little's law, in ms.
				mean, _, n := tick.window()
				now := time.Now()
				q := 0.0
				if n > 0 {
					q = float64(r) * now.Sub(lastTick).Seconds() / float64(n) * 1e3
				}
				lastTick = now
				if len(ticks) > 0 {
					ticks = append(ticks, '/')
				}
				ticks = strconv.AppendFloat(ticks, mean.Seconds()*1e3, 'f', 0, 64)
				ticks = append(ticks, ':')
				ticks = strconv.AppendFloat(ticks, q, 'f', 0, 64)
			}
			if sv.traced {
				sv.stepTrace(lim)
			}
			if sv.traced && ov != nil {
				level, _ := ov.Overload()
				if len(levels) > 0 {
					levels = append(levels, '/')
				}
				levels = strconv.AppendFloat(levels, level, 'f', 1, 64)
			}
			if sv.traced && n%10 == 0 {
				cpu := processCPU()
				sv.logSecond(lim, cpu-lastCPU, sched, runnable, levels, ticks)
				lastCPU = cpu
				levels, ticks, runnable = levels[:0], ticks[:0], 0
			}
		case <-ctx.Done():
			return
		}
	}
}

// stepTrace prints, around the scenario's events (from 1 s before each
// starts to 3 s after), one line per 100 ms tick: the limit, the requests in
// flight, and how many admitted requests finished and how many were refused
// since the previous tick, and the limiter's state (limitState). The
// per-second lines are too coarse to see how fast the limit reacts to a
// step.
func (sv *server) stepTrace(lim int) {
	done, ref := sv.tr.tickDone.Swap(0), sv.tr.tickRefused.Swap(0)
	at := sv.elapsed()
	near := false
	for _, e := range sv.s.Events {
		if from := e.From.D(); at >= from-time.Second && at <= from+3*time.Second {
			near = true
		}
	}
	if near {
		fmt.Fprintf(os.Stderr, "step t=%.2fs wall=%d limit=%d inflight=%d done=%d refused=%d%s\n",
			at.Seconds(), time.Now().UnixNano(), lim, sv.inflight.Load(), done, ref, report.LimitState(sv.lim))
	}
}

// logSecond prints and resets one second of trace counts.
func (sv *server) logSecond(lim int, cpu time.Duration, sched *schedLatency, runnable uint64, levels, ticks []byte) {
	tr := &sv.tr
	n, pre, preMax, dead := tr.n.Swap(0), tr.preSum.Swap(0), tr.preMax.Swap(0), tr.dead.Swap(0)
	ref, refSum, adm, hand, burn := tr.refused.Swap(0), tr.refSum.Swap(0), tr.admitted.Swap(0), tr.handSum.Swap(0), tr.burnSum.Swap(0)
	mean := func(sum, k int64) float64 {
		if k == 0 {
			return 0
		}
		return float64(sum) / float64(k) / 1e6
	}
	over := 0.0
	if n > 0 {
		over = float64(int64(cpu)-burn) / float64(n) / 1e3
	}
	runq, runq99 := sched.second()
	throttle := ""
	if o, ok := sv.lim.(interface {
		Overload() (float64, time.Duration)
	}); ok {
		level, lat := o.Overload()
		throttle = fmt.Sprintf(" throttle=%.2f throttle_runq=%.1fms throttle_refused=%d throttle_levels=%s", level, lat.Seconds()*1e3, tr.overload.Swap(0), levels)
	}
	fmt.Fprintf(os.Stderr, "t=%.1fs limit=%d inflight=%d handled=%d pre_mean=%.1fms pre_max=%.1fms dead=%d admitted=%d handler_mean=%.1fms refused=%d refused_mean=%.3fms cpu=%.0fms burn=%.0fms overhead=%.0fus/req runq_mean=%.2fms runq_p99=%.1fms runnable_max=%d ticks_ms=%s%s%s\n",
		sv.elapsed().Seconds(), lim, sv.inflight.Load(), n, mean(pre, n), float64(preMax)/1e6, dead,
		adm, mean(hand, adm), ref, mean(refSum, ref), float64(cpu)/1e6, float64(burn)/1e6, over,
		runq.Seconds()*1e3, runq99.Seconds()*1e3, runnable, ticks, throttle, report.LimitState(sv.lim))
}

// schedLatency reads Go's /sched/latencies:seconds (time goroutines spent
// runnable before running) and reports it per interval.
type schedLatency struct {
	sample []metrics.Sample
	last   []uint64
	queue  []metrics.Sample
}

func newSchedLatency() *schedLatency {
	l := &schedLatency{
		sample: []metrics.Sample{{Name: "/sched/latencies:seconds"}},
		queue:  []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}},
	}
	l.second()
	return l
}

// runnable is the number of goroutines ready to run and waiting for the CPU.
func (l *schedLatency) runnable() uint64 {
	metrics.Read(l.queue)
	if l.queue[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return l.queue[0].Value.Uint64()
}

// second returns the mean and the 99th percentile (bucket upper bound) of
// the scheduling latencies since the previous call.
func (l *schedLatency) second() (mean, p99 time.Duration) {
	mean, p99, _ = l.window()
	return mean, p99
}

// window is second with the number of wake-ups.
func (l *schedLatency) window() (mean, p99 time.Duration, total uint64) {
	metrics.Read(l.sample)
	if l.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0, 0
	}
	h := l.sample[0].Value.Float64Histogram()
	if len(l.last) != len(h.Counts) {
		l.last = make([]uint64, len(h.Counts))
	}
	var sum float64
	d := make([]uint64, len(h.Counts))
	for i, c := range h.Counts {
		d[i] = c - l.last[i]
		l.last[i] = c
		total += d[i]
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		if math.IsInf(hi, 1) {
			hi = lo
		}
		if math.IsInf(lo, -1) {
			lo = hi
		}
		sum += float64(d[i]) * (lo + hi) / 2
	}
	if total == 0 {
		return 0, 0, 0
	}
	var seen uint64
	for i, c := range d {
		seen += c
		if float64(seen) >= 0.99*float64(total) {
			hi := h.Buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = h.Buckets[i]
			}
			p99 = time.Duration(hi * 1e9)
			break
		}
	}
	return time.Duration(sum / float64(total) * 1e9), p99, total
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Limits returns the limit samples taken so far (every 100 ms).
func (sv *server) Limits() []int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return append([]int(nil), sv.limits...)
}
