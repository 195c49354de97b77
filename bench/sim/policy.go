package sim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"governor.dev/governor/bench/report"
	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/rules"
)

// Policy is an admission controller driven in virtual time.
type Policy interface {
	// Admit decides on a request of class rank class, with inflight
	// requests already admitted and not finished. An admitted request's
	// handle comes back to Done.
	Admit(now time.Duration, class, inflight int) (handle any, ok bool)
	// Done reports a finished request: its handle, its server-side
	// latency, the in-flight count when it was admitted (itself included),
	// and whether it missed its deadline.
	Done(handle any, now, rtt time.Duration, inflight int, dropped bool)
	// Limit is the current concurrency limit, or -1 for policies without one.
	Limit() int
}

// Env is what a policy may observe of the simulated server.
type Env struct {
	// Clock is the virtual clock; the simulator advances it.
	Clock *clock.Fake
	// CPU is the server's CPU utilisation (0..1) averaged over the last
	// 100 ms, for the CPU-gated re-implementations.
	CPU func() float64
	// Inflight is the number of requests admitted and not finished.
	Inflight func() int
	// CapacityRPS is the server's nominal capacity (for the static
	// baselines, which are given oracle knowledge of it).
	CapacityRPS float64
	// StaticLimit is the concurrency of the "static" baseline.
	StaticLimit int
	// Deadline is the scenario's client deadline: an attempt admitted at
	// t states the deadline t + Deadline (the simulator has no queueing
	// before admission).
	Deadline time.Duration
}

// Factory builds a policy for one run.
type Factory func(env *Env) (Policy, error)

// Factories are the policies the simulator knows. The "-reimpl" ones are
// re-implementations from published formulas or source, not the original
// code (which cannot run in virtual time); "governor", "governor-little"
// and "governor-nodeadline" (which does not pass the attempt's deadline to
// Admit) run Governor's real sdk/limit and sdk/shed code, and "xrate" the
// real golang.org/x/time/rate. "governor-nosched" is "governor" with the
// overload throttle off; in the simulator the two are the same, as the
// throttle reads Go's scheduling latency, which the simulator does not
// model (there is no queue before admission), and a Governor on an
// injected clock without a latency source runs without it.
func Factories() map[string]Factory {
	return map[string]Factory{
		"governor":                 governorFactory(rules.AlgorithmGradient, true),
		"governor-nodeadline":      governorFactory(rules.AlgorithmGradient, false),
		"governor-nosched":         governorFactory(rules.AlgorithmGradient, true),
		"governor-little":          governorFactory(rules.AlgorithmLittle, true),
		"none":                     func(*Env) (Policy, error) { return nonePolicy{}, nil },
		"static":                   func(e *Env) (Policy, error) { return staticPolicy(e.StaticLimit), nil },
		"xrate":                    newXRatePolicy,
		"netflix-gradient2-reimpl": func(*Env) (Policy, error) { return newGradient2(), nil },
		"netflix-vegas-reimpl":     func(*Env) (Policy, error) { return newVegas(), nil },
		"envoy-gradient-reimpl":    newEnvoy,
		"aegis-bbr-reimpl":         newBBRModel,
		"gozero-shedder-reimpl":    newGoZeroModel,
	}
}

// Names lists the simulator's policies, sorted.
func Names() []string {
	var out []string
	for n := range Factories() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ParseList checks a comma-separated list of policy names; empty means all.
func ParseList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return Names(), nil
	}
	f := Factories()
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := f[n]; !ok {
			return nil, fmt.Errorf("%w: %q (known: %s)", ErrUnknown, n, strings.Join(Names(), ", "))
		}
		out = append(out, n)
	}
	return out, nil
}

// governor is Governor's real admission core (package governor of the
// SDK: sdk/limit's adaptive limit split into sdk/shed's class ceilings) with
// its default ruleset and the given algorithm, on the virtual clock and one
// shard so runs are repeatable.
type governorPolicy struct {
	g        *governor.Governor
	ctx      context.Context
	clk      *clock.Fake
	deadline time.Duration // 0: the deadline is not passed
}

var classNames = [...]string{"critical", "core", "browse", "batch"}

func governorFactory(algorithm string, deadlines bool) Factory {
	return func(e *Env) (Policy, error) {
		rs := governor.DefaultRuleset("sim")
		rs.Routes[0].Concurrency.Algorithm = algorithm
		opts := governor.DefaultOptions("sim")
		opts.Defaults = rs
		opts.Clock = e.Clock
		opts.Shards = 1
		p := &governorPolicy{ctx: context.Background(), clk: e.Clock}
		g, err := governor.New(opts)
		if err != nil {
			return nil, fmt.Errorf("sim: governor %s: %w", algorithm, err)
		}
		p.g = g
		if deadlines {
			p.deadline = e.Deadline
		}
		return p, nil
	}
}

func (p *governorPolicy) Admit(_ time.Duration, class, _ int) (any, bool) {
	req := governor.Request{Path: "/", Method: "GET", Priority: classNames[class]}
	if p.deadline > 0 {
		req.Deadline = p.clk.Now().Add(p.deadline)
	}
	pm, err := p.g.Admit(p.ctx, req)
	if err != nil {
		return nil, false
	}
	return pm, true
}

func (p *governorPolicy) Done(h any, _, rtt time.Duration, _ int, dropped bool) {
	o := governor.Success
	if dropped {
		o = governor.Dropped
	}
	h.(governor.Permit).Release(rtt, o)
}

func (p *governorPolicy) Limit() int {
	l, _ := p.g.Limit("default")
	return l
}

var _ report.LimitStater = (*governorPolicy)(nil)

// LimitState is the route limiter's state after its last decided window
// (for the trace); false when the algorithm exposes none.
func (p *governorPolicy) LimitState() (limit.Snapshot, bool) {
	return p.g.LimiterState("default")
}

type nonePolicy struct{}

func (nonePolicy) Admit(time.Duration, int, int) (any, bool)         { return nil, true }
func (nonePolicy) Done(any, time.Duration, time.Duration, int, bool) {}
func (nonePolicy) Limit() int                                        { return -1 }

type staticPolicy int

func (s staticPolicy) Admit(_ time.Duration, _, inflight int) (any, bool) {
	return nil, inflight < int(s)
}
func (staticPolicy) Done(any, time.Duration, time.Duration, int, bool) {}
func (s staticPolicy) Limit() int                                      { return int(s) }

// xratePolicy is the real golang.org/x/time/rate token bucket, fed virtual
// time through AllowN.
type xratePolicy struct {
	l     *rate.Limiter
	start time.Time
}

func newXRatePolicy(e *Env) (Policy, error) {
	r := e.CapacityRPS
	return &xratePolicy{l: rate.NewLimiter(rate.Limit(r), max(1, int(r/10))), start: e.Clock.Now()}, nil
}

func (x *xratePolicy) Admit(now time.Duration, _, _ int) (any, bool) {
	return nil, x.l.AllowN(x.start.Add(now), 1)
}
func (x *xratePolicy) Done(any, time.Duration, time.Duration, int, bool) {}
func (x *xratePolicy) Limit() int                                        { return -1 }
