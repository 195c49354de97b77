// Package limittest drives a limit.Limiter against a small simulated server
// in virtual time, deterministically: the same seed gives the same run.
//
// The server has a fixed capacity: a request admitted while at most Capacity
// requests are in flight takes Base; beyond that it queues, and its latency
// grows in proportion (Base x inflight / Capacity), with optional uniform
// noise and periodic pauses of the whole server (GC-like stalls). Requests arrive at a fixed rate (evenly spaced or Poisson), are
// admitted while in-flight is below the limiter's Limit (a refusal is
// reported to Refused, as the admission core does), and report to
// Observe when they finish (or time out, as drops). The simulation advances a
// clock.Fake, so code under test that reads the same clock sees virtual time.
//
// Tests and the overload laboratory change Server between Run calls (a
// latency step, a capacity drop) and read Stats and the limiter's state.
package limittest

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
)

// Server is the simulated service.
type Server struct {
	// Capacity is how many requests it serves at full speed at once.
	Capacity int
	// Base is the latency while in flight <= Capacity.
	Base time.Duration
	// Jitter is the relative latency noise: each latency is multiplied by a
	// uniform factor in [1-Jitter, 1+Jitter]. 0 means none.
	Jitter float64
	// Pause stalls the whole server (a GC pause, a noisy neighbour): every
	// PauseEvery, for PauseFor, nothing progresses. 0 means never.
	PauseEvery, PauseFor time.Duration
}

// finish returns when a request admitted at t needing d of service
// completes, stretched by the pauses it runs into.
func (s Server) finish(t, d int64) int64 {
	every, length := int64(s.PauseEvery), int64(s.PauseFor)
	end := t + d
	if every <= 0 || length <= 0 {
		return end
	}
	k := t / every
	if start := k * every; t < start+length {
		end += start + length - t // admitted during a pause: waits for its end
	}
	for next := (k + 1) * every; next < end; next += every {
		end += length
	}
	return end
}

// Latency returns the latency of a request admitted with inflight requests in
// flight (including itself), without noise.
func (s Server) Latency(inflight int) time.Duration {
	d := float64(s.Base)
	if c := max(s.Capacity, 1); inflight > c {
		d *= float64(inflight) / float64(c)
	}
	return time.Duration(d)
}

// Stats counts what happened to the offered requests.
type Stats struct {
	Offered   int64         // arrived
	Admitted  int64         // admitted by the limiter
	Rejected  int64         // refused by the limiter
	Completed int64         // finished within the timeout
	Dropped   int64         // timed out (reported to Observe as dropped)
	Latency   time.Duration // sum of the latencies of completed requests
}

// Sub returns s - o, the counts of a period.
func (s Stats) Sub(o Stats) Stats {
	return Stats{s.Offered - o.Offered, s.Admitted - o.Admitted, s.Rejected - o.Rejected,
		s.Completed - o.Completed, s.Dropped - o.Dropped, s.Latency - o.Latency}
}

// Goodput returns the share of offered requests that completed in time.
func (s Stats) Goodput() float64 {
	if s.Offered == 0 {
		return 0
	}
	return float64(s.Completed) / float64(s.Offered)
}

// MeanLatency returns the average latency of completed requests.
func (s Stats) MeanLatency() time.Duration {
	if s.Completed == 0 {
		return 0
	}
	return s.Latency / time.Duration(s.Completed)
}

// Config describes a simulation.
type Config struct {
	Server Server
	// Rate is the offered load in requests per second.
	Rate float64
	// Poisson spaces arrivals randomly (exponential gaps) instead of evenly.
	Poisson bool
	// Timeout drops requests slower than this (0: never).
	Timeout time.Duration
	// Seed makes the noise and the arrivals repeatable.
	Seed uint64
}

// Sim is a running simulation. It is not safe for concurrent use.
type Sim struct {
	// Server, Rate and Timeout may be changed between Run calls.
	Config
	clk      *clock.Fake
	lim      limit.Limiter
	rng      *rand.Rand
	inflight int
	next     int64 // next arrival, virtual ns
	pending  completions
	stats    Stats
}

// New returns a simulation of cfg driving lim (nil: no limit) on clk.
func New(clk *clock.Fake, lim limit.Limiter, cfg Config) *Sim {
	s := &Sim{Config: cfg, clk: clk, lim: lim, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed+1))}
	s.next = clk.Nanotime()
	if cfg.Rate <= 0 {
		s.next = never
	}
	return s
}

// Stats returns the counts so far.
func (s *Sim) Stats() Stats { return s.stats }

// Inflight returns the requests in flight now.
func (s *Sim) Inflight() int { return s.inflight }

// Now returns the virtual time.
func (s *Sim) Now() time.Duration { return time.Duration(s.clk.Nanotime()) }

// Run simulates d of virtual time.
func (s *Sim) Run(d time.Duration) { s.RunUntil(d, nil) }

// RunUntil simulates until done returns true (checked after every event) or d
// has passed, and returns the virtual time that passed and whether done
// returned true.
func (s *Sim) RunUntil(d time.Duration, done func() bool) (time.Duration, bool) {
	start := s.clk.Nanotime()
	end := start + int64(d)
	if s.Rate > 0 && s.next >= never {
		s.next = start // arrivals resume after a period at rate 0
	}
	for {
		t := s.next
		completion := len(s.pending) > 0 && s.pending[0].at <= t
		if completion {
			t = s.pending[0].at
		}
		if t > end {
			s.advance(end)
			return time.Duration(end - start), false
		}
		s.advance(t)
		if completion {
			s.complete(heap.Pop(&s.pending).(request))
		} else {
			s.arrive(t)
		}
		if done != nil && done() {
			return time.Duration(t - start), true
		}
	}
}

func (s *Sim) advance(t int64) {
	if now := s.clk.Nanotime(); t > now {
		s.clk.Advance(time.Duration(t - now))
	}
}

func (s *Sim) arrive(t int64) {
	s.stats.Offered++
	s.next = t + s.gap()
	if s.lim != nil && s.inflight >= s.lim.Limit() {
		s.stats.Rejected++
		if r, ok := s.lim.(limit.RefusalObserver); ok {
			r.Refused(t)
		}
		return
	}
	s.stats.Admitted++
	s.inflight++
	rtt := float64(s.Server.Latency(s.inflight))
	if s.Server.Jitter > 0 {
		rtt *= 1 + s.Server.Jitter*(2*s.rng.Float64()-1)
	}
	at := s.Server.finish(t, int64(rtt))
	r := request{at: at, rtt: at - t, inflight: s.inflight}
	if s.Timeout > 0 && r.rtt > int64(s.Timeout) {
		r.rtt, r.at, r.dropped = int64(s.Timeout), t+int64(s.Timeout), true
	}
	heap.Push(&s.pending, r)
}

func (s *Sim) gap() int64 {
	if s.Rate <= 0 {
		return never
	}
	mean := 1e9 / s.Rate
	if s.Poisson {
		return max(int64(s.rng.ExpFloat64()*mean), 1)
	}
	return max(int64(mean), 1)
}

func (s *Sim) complete(r request) {
	s.inflight--
	if r.dropped {
		s.stats.Dropped++
	} else {
		s.stats.Completed++
		s.stats.Latency += time.Duration(r.rtt)
	}
	if s.lim != nil {
		s.lim.Observe(r.at, r.rtt, r.inflight, r.dropped)
	}
}

// never is the arrival time while Rate is 0.
const never = math.MaxInt64 / 4

type request struct {
	at, rtt  int64
	inflight int
	dropped  bool
}

type completions []request

func (c completions) Len() int           { return len(c) }
func (c completions) Less(i, j int) bool { return c[i].at < c[j].at }
func (c completions) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)        { *c = append(*c, x.(request)) }
func (c *completions) Pop() any {
	old := *c
	r := old[len(old)-1]
	*c = old[:len(old)-1]
	return r
}
