package outbound

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/balancer"
	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/bulkhead"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/retry"
	"governor.dev/governor/sdk/rules"
)

// Errors returned by this package.
var (
	// ErrInvalidOptions wraps errors from New.
	ErrInvalidOptions = errors.New("outbound: invalid options")
	// ErrInvalidRules wraps errors from Apply; the downstreams in force stay.
	ErrInvalidRules = errors.New("outbound: invalid rules")
)

// Hooks let a service observe its outbound protection; the library never
// logs. Hooks run synchronously on the calling goroutine, outside every lock:
// keep them short. A hook that panics leaves the bulkhead and the call counts
// as they would be without the hook.
type Hooks struct {
	// OnStateChange runs when a downstream's breaker changes state.
	OnStateChange func(downstream string, from, to breaker.State)
	// OnEndpointStateChange runs when one endpoint's breaker changes state
	// (ejection from and return to the balancer).
	OnEndpointStateChange func(downstream, addr string, from, to breaker.State)
	// OnReject runs for every call refused (not for shadow counts) with
	// the *RejectedError.
	OnReject func(err *RejectedError)
}

// LimiterFactory builds the adaptive limiter of a bulkhead.
type LimiterFactory func(cfg rules.Concurrency, clk clock.Clock) (bulkhead.Limiter, error)

// Options configure a Set. The zero value is usable.
type Options struct {
	// Service adds the constant label service to every series.
	Service string
	// Clock times calls. Its Nanotime is read at the start and the end of
	// every call: a clock.Coarse makes that cheap. Default clock.Real.
	Clock clock.Clock
	// Registerer receives the outbound metrics; nil means none.
	Registerer prometheus.Registerer
	// Hooks observe state changes and refusals.
	Hooks Hooks
	// NewLimiter builds adaptive bulkhead limiters; default sdk/limit.New
	// with Max = MaxConcurrent.
	NewLimiter LimiterFactory
	// Float64 and IntN are the random sources for jitter, throttling and
	// balancing; defaults from math/rand/v2.
	Float64 func() float64
	IntN    func(n int) int
}

// Set holds the outbound protection of every downstream of a service. It is
// safe for concurrent use.
type Set struct {
	opts Options
	clk  clock.Clock

	m atomic.Pointer[map[string]*Downstream]

	mu        sync.Mutex // serialises Apply and SetEndpoints
	endpoints map[string][]string
}

// New returns an empty Set and registers its metrics on opts.Registerer.
func New(opts Options) (*Set, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Float64 == nil {
		opts.Float64 = rand.Float64
	}
	if opts.IntN == nil {
		opts.IntN = rand.IntN
	}
	if opts.NewLimiter == nil {
		opts.NewLimiter = defaultLimiter
	}
	s := &Set{opts: opts, clk: opts.Clock, endpoints: map[string][]string{}}
	s.m.Store(&map[string]*Downstream{})
	if r := opts.Registerer; r != nil {
		if opts.Service != "" {
			r = prometheus.WrapRegistererWith(prometheus.Labels{"service": opts.Service}, r)
		}
		if err := r.Register(newCollector(s)); err != nil {
			return nil, fmt.Errorf("%w: registering metrics: %w", ErrInvalidOptions, err)
		}
	}
	return s, nil
}

func defaultLimiter(cfg rules.Concurrency, clk clock.Clock) (bulkhead.Limiter, error) {
	return limit.New(cfg, clk)
}

// Get returns the downstream with the name, or nil when no rule names it.
func (s *Set) Get(name string) *Downstream { return (*s.m.Load())[name] }

// Names returns the names of the downstreams in force, sorted.
func (s *Set) Names() []string { return slices.Sorted(maps.Keys(*s.m.Load())) }

// SetEndpoints sets the endpoints the balancer of a downstream spreads calls
// over. It may be called before the downstream's rules arrive; the list is
// kept across Apply. An empty list means calls go to the address the caller
// gives.
func (s *Set) SetEndpoints(name string, addrs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints[name] = slices.Clone(addrs)
	if d := s.Get(name); d != nil {
		d.bal.Update(addrs)
	}
}

// Apply makes ds the downstream rules in force. It builds every changed
// downstream before swapping, so on error nothing changes. Downstreams whose
// rules are unchanged keep all their state; a changed one keeps the parts
// whose rules are equal. Downstreams missing from ds are dropped with their
// series. ds should have passed rules.Ruleset.Validate; Apply still refuses
// duplicate names and configurations its parts reject.
func (s *Set) Apply(ds []rules.Downstream) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.m.Load()
	next := make(map[string]*Downstream, len(ds))
	for i := range ds {
		r := ds[i]
		if _, dup := next[r.Name]; dup {
			return fmt.Errorf("%w: downstreams[%d].name: duplicate %q", ErrInvalidRules, i, r.Name)
		}
		prev := old[r.Name]
		if prev != nil && reflect.DeepEqual(prev.rule, r) {
			next[r.Name] = prev
			continue
		}
		d, err := s.build(r, prev)
		if err != nil {
			return fmt.Errorf("%w: downstreams[%d] (%s): %w", ErrInvalidRules, i, r.Name, err)
		}
		next[r.Name] = d
	}
	s.m.Store(&next)
	return nil
}

// ejection reads the outlier ejection settings of balancer rules b (nil:
// none), absent fields left to the balancer's defaults.
func ejection(b *rules.Balancer) balancer.Ejection {
	if b == nil {
		return balancer.Ejection{}
	}
	e := balancer.Ejection{
		ConsecutiveFailures: b.ConsecutiveFailures,
		BaseTime:            b.BaseEjectionTime.D(),
		MaxTime:             b.MaxEjectionTime.D(),
	}
	if p := b.MaxEjectionPercent; p != nil {
		e.MaxShare = float64(*p) / 100
	}
	return e
}

// build makes the downstream for rule r, reusing the parts of prev whose
// rules are equal.
func (s *Set) build(r rules.Downstream, prev *Downstream) (*Downstream, error) {
	name := r.Name
	d := &Downstream{
		name:    name,
		rule:    r,
		shadow:  r.Mode == rules.ModeShadow,
		timeout: r.Timeout.D(),
		clk:     s.clk,
		hooks:   &s.opts.Hooks,
		stats:   &stats{},
	}
	if prev != nil {
		d.stats = prev.stats // counters never go back
	}
	d.refusedOpen = &RejectedError{Downstream: name, Reason: breaker.ErrOpen}
	d.refusedFull = &RejectedError{Downstream: name, Reason: bulkhead.ErrFull}
	var pr rules.Downstream // the previous rules; zero without prev
	if prev != nil {
		pr = prev.rule
	}
	same := func(a, b any) bool { return prev != nil && reflect.DeepEqual(a, b) }
	var err error

	switch {
	case r.Breaker == nil:
	case same(r.Breaker, pr.Breaker):
		d.brk = prev.brk
	default:
		var hook func(from, to breaker.State)
		if f := s.opts.Hooks.OnStateChange; f != nil {
			hook = func(from, to breaker.State) { f(name, from, to) }
		}
		if d.brk, err = breaker.New(*r.Breaker, breaker.Options{OnStateChange: hook, Float64: s.opts.Float64}); err != nil {
			return nil, err
		}
	}

	switch {
	case r.Retry == nil:
	case same(r.Retry, pr.Retry):
		d.retrier = prev.retrier
	default:
		ro := retry.Options{Clock: s.clk, Float64: s.opts.Float64}
		if pr.Retry != nil {
			nb, pb := retry.WithDefaults(*r.Retry), retry.WithDefaults(*pr.Retry)
			if nb.Budget == pb.Budget && nb.MinPerSecond == pb.MinPerSecond {
				ro.Budget = prev.retrier.Budget() // keep what the budget counted
			}
		}
		if d.retrier, err = retry.New(*r.Retry, ro); err != nil {
			return nil, err
		}
	}

	switch {
	case r.Bulkhead == nil:
	case same(r.Bulkhead, pr.Bulkhead):
		d.bh = prev.bh
	default:
		bo := bulkhead.Options{Clock: s.clk}
		if prev != nil && prev.bh != nil {
			bo.Inherit = prev.bh // calls in flight keep counting
		}
		if r.Bulkhead.Adaptive {
			mc := r.Bulkhead.MaxConcurrent
			cfg := rules.Concurrency{Max: mc, Min: min(4, mc), Initial: min(20, mc)}
			if bo.Limiter, err = s.opts.NewLimiter(cfg, s.clk); err != nil {
				return nil, err
			}
		}
		if d.bh, err = bulkhead.New(*r.Bulkhead, bo); err != nil {
			return nil, err
		}
	}

	// Every downstream has a balancer; it is used once endpoints are set.
	// Its endpoints' breakers follow the downstream's breaker rules.
	if same(r.Balancer, pr.Balancer) && same(r.Breaker, pr.Breaker) {
		d.bal, d.balCounts = prev.bal, prev.balCounts
	} else {
		var bc rules.Balancer
		if r.Balancer != nil {
			bc = *r.Balancer
		}
		bo := balancer.Options{Clock: s.clk, IntN: s.opts.IntN, Float64: s.opts.Float64, Breaker: r.Breaker, Ejection: ejection(r.Balancer)}
		if prev != nil {
			bo.Inherit = prev.bal // endpoint statistics, ages and (if equal rules) breakers stay
			// A rebuilt balancer counts from 0: carry what the one it
			// replaces counted, so the exported counters never go back.
			d.balCounts = prev.balCounts.plus(prev.bal)
		}
		if f := s.opts.Hooks.OnEndpointStateChange; f != nil {
			bo.OnStateChange = func(addr string, from, to breaker.State) { f(name, addr, from, to) }
		}
		if d.bal, err = balancer.New(bc, bo); err != nil {
			return nil, err
		}
		d.bal.Update(s.endpoints[name])
	}
	return d, nil
}
