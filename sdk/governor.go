package governor

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/shed"
)

// Governor admits or refuses one service's inbound requests under its rules.
// It is safe for concurrent use; make one per service with New.
type Governor struct {
	opts      Options
	clk       clock.Clock
	ownClock  *clock.Coarse
	shards    int
	start     int64 // Nanotime at New: the instance's warm-up origin
	wallBase  int64 // wall-clock ns minus Nanotime, for cohort epochs
	newLim    LimiterFactory
	state     atomic.Pointer[state]
	applyMu   sync.Mutex
	hooks     hookQueue // OnApply calls waiting to run, in apply order
	metrics   *metrics
	outbound  *outbound.Set
	throttle  *throttle // nil when off
	closeOnce sync.Once
	// registered holds the collectors New registered, which Close takes
	// back.
	registered *recordingRegisterer
}

// state is one applied ruleset, immutable once published.
type state struct {
	version        int64
	rules          *rules.Ruleset
	classifier     *shed.Classifier
	priorityHeader string
	userHeader     string
	routes         []*route
	byName         map[string]*route
	match          matcher
}

// New returns a Governor enforcing opts.Defaults (or DefaultRuleset) as
// version 0. It registers its metrics on opts.Registerer; a series it cannot
// register there (already registered by another Governor for the same
// service, or a metric of the same name with other labels) makes it fail
// with an error naming the series and wrapping the Registerer's error, with
// none of its metrics left registered.
func New(opts Options) (*Governor, error) {
	if opts.Service == "" {
		return nil, fmt.Errorf("%w: Service is required", ErrInvalidOptions)
	}
	if opts.Shards < 0 {
		return nil, fmt.Errorf("%w: Shards must not be negative, got %d", ErrInvalidOptions, opts.Shards)
	}
	g := &Governor{opts: opts, clk: opts.Clock, newLim: opts.NewLimiter}
	if g.clk == nil {
		g.ownClock = clock.NewCoarse(0)
		g.clk = g.ownClock
	}
	if g.newLim == nil {
		g.newLim = NewLimiter
	}
	n := opts.Shards
	if n == 0 {
		n = 4 * runtime.GOMAXPROCS(0)
	}
	g.shards = 1
	for g.shards*2 <= min(n, maxShards) {
		g.shards *= 2
	}
	g.start = g.clk.Nanotime()
	g.wallBase = g.clk.Now().UnixNano() - g.start
	th, err := newThrottle(opts.Overload, opts.Clock != nil, g.start)
	if err != nil {
		g.Close()
		return nil, err
	}
	g.throttle = th

	defaults := opts.Defaults
	if defaults == nil {
		defaults = DefaultRuleset(opts.Service)
	}
	err = defaults.Validate()
	if err == nil && defaults.Service != opts.Service {
		err = fmt.Errorf("ruleset is for service %q, not %q", defaults.Service, opts.Service)
	}
	var st *state
	if err == nil {
		st, err = g.build(defaults.Clone(), 0, &state{})
	}
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("%w: Defaults: %w", ErrInvalidOptions, err)
	}
	g.publish(st)
	// A New that fails after registering metrics takes them back, so that
	// the service can call it again on the same Registerer.
	var reg prometheus.Registerer
	rec := &recordingRegisterer{Registerer: opts.Registerer}
	fail := func(err error) (*Governor, error) {
		g.Close()
		return nil, err
	}
	if opts.Registerer != nil {
		reg = rec
		g.registered = rec
		m, err := newMetrics(g, reg)
		if err != nil {
			return fail(fmt.Errorf("%w: Registerer: %w", ErrInvalidOptions, err))
		}
		g.metrics = m
		m.version.Set(0)
	}
	g.outbound = opts.Outbound
	if g.outbound == nil {
		g.outbound, err = outbound.New(outbound.Options{Service: opts.Service, Clock: g.clk, Registerer: reg})
		if err != nil {
			return fail(fmt.Errorf("%w: %w", ErrInvalidOptions, err))
		}
	}
	if err := g.outbound.Apply(st.rules.Downstreams); err != nil {
		return fail(fmt.Errorf("%w: Defaults: %w", ErrInvalidOptions, err))
	}
	return g, nil
}

// recordingRegisterer remembers the collectors registered through it, for
// New to unregister them when it fails after registering some.
type recordingRegisterer struct {
	prometheus.Registerer
	done []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.done = append(r.done, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recordingRegisterer) unregister() {
	for _, c := range r.done {
		r.Registerer.Unregister(c)
	}
	r.done = nil
}

// Outbound returns the outbound protection set (breakers, retry budgets,
// bulkheads, balancers per downstream) that Apply keeps in step with the
// ruleset's downstreams.
func (g *Governor) Outbound() *outbound.Set { return g.outbound }

// nanotime reads the Governor's clock; its own coarse clock is called
// directly (an inlined atomic load) rather than through the interface.
func (g *Governor) nanotime() int64 {
	if c := g.ownClock; c != nil {
		return c.Nanotime()
	}
	return g.clk.Nanotime()
}

// maxShards bounds Options.Shards.
const maxShards = 64

// Close stops the clock the Governor started (if it started one) and
// unregisters the metrics New registered (those of an Options.Outbound set
// given to it are the caller's), so that a Governor for the same service
// can be made again on the same Registerer, and a closed one reports no
// stale series. Admission keeps working on the last clock reading; Close is
// for shutdown, hot reloads and tests.
func (g *Governor) Close() {
	g.closeOnce.Do(func() {
		if g.ownClock != nil {
			g.ownClock.Close()
		}
		if g.registered != nil {
			g.registered.unregister()
		}
	})
}

// Version returns the version of the ruleset in force (0 for the defaults).
func (g *Governor) Version() int64 { return g.state.Load().version }

// Rules returns a copy of the ruleset in force.
func (g *Governor) Rules() *rules.Ruleset { return g.state.Load().rules.Clone() }

// Service returns the service name the Governor enforces rules for.
func (g *Governor) Service() string { return g.opts.Service }

// PriorityHeader returns the header that carries request priorities under the
// rules in force.
func (g *Governor) PriorityHeader() string { return g.state.Load().priorityHeader }

// UserHeader returns the header that carries the user key for consistent
// shedding under the rules in force ("" when none is configured).
func (g *Governor) UserHeader() string { return g.state.Load().userHeader }

// Limit returns the current effective concurrency limit of a route (after
// the warm-up ramp) and whether the route exists and has one.
func (g *Governor) Limit(route string) (int, bool) {
	rt := g.state.Load().byName[route]
	if rt == nil || rt.conc == nil {
		return 0, false
	}
	return rt.effectiveLimit(g.clk.Nanotime()), true
}

// LimiterState returns the state of a route's concurrency limiter after its
// last decided window (limit.Snapshot: the learned limit, the no-load
// latency it judges by, whether it is probing), and whether the route exists
// and its limiter reports one (the limiters of package limit do; a fixed
// limit or a custom Options.NewLimiter may not). It is what the limiter
// based its limit on, for a person or a test to read.
func (g *Governor) LimiterState(route string) (limit.Snapshot, bool) {
	rt := g.state.Load().byName[route]
	if rt == nil || rt.conc == nil || rt.conc.snap == nil {
		return limit.Snapshot{}, false
	}
	return rt.conc.snap.Snapshot(), true
}

// InFlight returns the number of admitted, unreleased requests of a route.
func (g *Governor) InFlight(route string) int64 {
	if rt := g.state.Load().byName[route]; rt != nil {
		return rt.cell.inflight()
	}
	return 0
}
