package balancer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Errors returned by this package.
var (
	// ErrNoEndpoint is returned by Pick when there is no endpoint, or when
	// no endpoint's breaker admits the call and panic mode is off (then it
	// also wraps breaker.ErrOpen).
	ErrNoEndpoint = errors.New("balancer: no endpoint available")
	// ErrInvalidConfig wraps configuration errors from New.
	ErrInvalidConfig = errors.New("balancer: invalid config")
)

// Defaults for the fields of rules.Balancer left at zero.
const (
	DefaultDecay     = 10 * time.Second
	DefaultSlowStart = 30 * time.Second
	// DefaultPanicThreshold is the panic threshold when
	// rules.Balancer.PanicThreshold is unset, as Envoy's
	// healthy_panic_threshold.
	DefaultPanicThreshold = 0.5
	// minSlowStartShare is the smallest chance a just-added endpoint keeps a
	// pick, so it gets samples from the start.
	minSlowStartShare = 0.05
)

// Options are the dependencies of a Balancer. The zero value is usable.
type Options struct {
	// Clock stamps endpoints when they are added; default clock.Real.
	Clock clock.Clock
	// IntN returns a uniform random int in [0, n); default math/rand/v2.IntN.
	IntN func(n int) int
	// Float64 returns a uniform random number in [0, 1); default
	// math/rand/v2.Float64.
	Float64 func() float64
	// Breaker gives every endpoint its own breaker with these rules, so
	// failing endpoints are ejected while their breaker is open (within
	// Ejection.MaxShare); nil means no breakers.
	Breaker *rules.Breaker
	// Ejection ejects endpoints after consecutive failures and caps the
	// share of endpoints ejected at once; see Ejection.
	Ejection Ejection
	// OnStateChange runs when an endpoint's breaker changes state, outside
	// every lock.
	OnStateChange func(addr string, from, to breaker.State)
	// Inherit carries the endpoints of a balancer this one replaces (after
	// a rule change) over to it. With equal Breaker rules they are the same
	// endpoints: their latency estimates, slow-start ages, calls in flight
	// and breakers (an ejected endpoint stays ejected). Otherwise each gets
	// a fresh breaker but keeps its estimate and slow-start age. The old
	// balancer is not changed.
	Inherit *Balancer
}

// Balancer picks endpoints of one downstream. It is safe for concurrent use.
type Balancer struct {
	eps       atomic.Pointer[list]
	decay     float64
	slowStart int64
	// panicAt is the panic threshold; 0 when panic mode is off, also
	// without a breaker of kind breaker (nothing is ever ejected).
	panicAt float64
	// changes counts the state changes of the endpoints' breakers; the
	// hooks of every endpoint built for this balancer add to it, and a
	// balancer inheriting the very same endpoints shares it.
	changes *atomic.Uint64
	opts    Options
	ej      Ejection // with defaults filled in
	// ejMu serialises ejection decisions, so the cap holds; shared like
	// changes by a balancer inheriting the very same endpoints.
	ejMu *sync.Mutex

	mu sync.Mutex // serialises changes to the endpoint list

	// The counters are written by concurrent picks: they get cache lines
	// of their own, so those writes do not slow down every Pick's reads
	// of the fields above.
	_       [64]byte
	panics  atomic.Uint64 // picks that went around a refusing breaker
	skipped atomic.Uint64 // ejections the cap refused
	_       [48]byte
}

// list is an endpoint list with its count of healthy endpoints.
type list struct {
	eps []*Endpoint
	// healthy caches how many endpoints have a closed breaker: the low 32
	// bits of Balancer.changes when it was counted, above the count. It is
	// counted again only once a breaker has changed state since, so Pick
	// does not scan the list while the breakers are steady.
	healthy atomic.Uint64
	// until is when the first consecutive-failure ejection counted in
	// healthy ends: the count is taken again then.
	until atomic.Int64
}

// New builds a balancer with no endpoints.
func New(c rules.Balancer, opts Options) (*Balancer, error) {
	if c.Decay < 0 || c.SlowStart < 0 {
		return nil, fmt.Errorf("%w: decay and slow_start must not be negative", ErrInvalidConfig)
	}
	ej, err := opts.Ejection.check()
	if err != nil {
		return nil, err
	}
	panicAt := DefaultPanicThreshold
	if c.PanicThreshold != nil {
		panicAt = *c.PanicThreshold
	}
	if math.IsNaN(panicAt) || panicAt < 0 || panicAt > 1 {
		return nil, fmt.Errorf("%w: panic_threshold must be between 0 and 1, got %v", ErrInvalidConfig, panicAt)
	}
	if c.Decay == 0 {
		c.Decay = rules.Duration(DefaultDecay)
	}
	if c.SlowStart == 0 {
		c.SlowStart = rules.Duration(DefaultSlowStart)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.IntN == nil {
		opts.IntN = rand.IntN
	}
	if opts.Float64 == nil {
		opts.Float64 = rand.Float64
	}
	if opts.Breaker != nil {
		if _, err := breaker.New(*opts.Breaker, breaker.Options{}); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if ej.ConsecutiveFailures == 0 && (opts.Breaker == nil || breaker.WithDefaults(*opts.Breaker).Kind != rules.BreakerKindBreaker) {
		panicAt = 0 // nothing ejects: a throttle's refusals must stand
	}
	from := opts.Inherit
	opts.Inherit = nil // keep no chain of replaced balancers alive
	b := &Balancer{decay: float64(c.Decay), slowStart: int64(c.SlowStart), panicAt: panicAt, opts: opts, ej: ej}
	b.changes, b.ejMu = new(atomic.Uint64), new(sync.Mutex)
	eps := []*Endpoint{}
	if from != nil {
		same := sameBreaker(from.opts.Breaker, opts.Breaker)
		if same {
			b.changes = from.changes // their breakers' hooks count there
			b.ejMu = from.ejMu       // their ejection state is shared
		}
		for _, e := range from.eps.Load().eps {
			if !same {
				e = b.carryOver(from, e)
			}
			eps = append(eps, e)
		}
	}
	b.store(eps)
	return b, nil
}

// store makes eps the endpoint list, with its healthy count.
func (b *Balancer) store(eps []*Endpoint) {
	l := &list{eps: eps}
	if b.panicAt > 0 {
		b.count(l, b.opts.Clock.Nanotime())
	}
	b.eps.Store(l)
}

// count counts the endpoints of l without an open or half-open breaker (of
// kind breaker) that are not ejected for consecutive failures, and stores
// the count in l.healthy.
func (b *Balancer) count(l *list, now int64) uint64 {
	// Read the changes first: a state change during the scan leaves a
	// stale count marked with an older value, which the next Pick counts
	// again.
	v := b.changes.Load()
	var n uint64
	until := int64(math.MaxInt64)
	for _, e := range l.eps {
		if b.ej.ConsecutiveFailures > 0 {
			if u := e.outUntil.Load(); u > now {
				until = min(until, u)
				continue
			}
		}
		// Only a breaker of kind breaker ejects: a throttle rejecting a
		// share of calls leaves its endpoint healthy.
		if e.open == nil || e.open.State(now) == breaker.Closed {
			n++
		}
	}
	w := v<<32 | n
	l.until.Store(until) // before the count: a reader of this count sees this until or a later one
	l.healthy.Store(w)
	return w
}

// panicking reports whether fewer than the panic threshold's share of the
// endpoints in l have a closed breaker.
func (b *Balancer) panicking(l *list, now int64) bool {
	if b.panicAt == 0 {
		return false
	}
	w := l.healthy.Load()
	if uint32(w>>32) != uint32(b.changes.Load()) || now >= l.until.Load() {
		// A breaker changed state or an endpoint was ejected since the
		// count, or an ejection counted has ended: count again. Picks
		// that race here each count; the store of an older count is
		// corrected by the next Pick, as it is marked with an older value.
		w = b.count(l, now)
	}
	return float64(uint32(w)) < b.panicAt*float64(len(l.eps))
}

// Panicking reports whether the balancer is in panic mode at now: fewer
// than the panic threshold's share of its endpoints have a closed breaker
// and are not ejected for consecutive failures, so Pick ignores ejections.
func (b *Balancer) Panicking(now int64) bool {
	l := b.eps.Load()
	return len(l.eps) > 0 && b.panicking(l, now)
}

// PanicPicks returns how many picks panic mode has made: calls sent to an
// endpoint whose breaker did not admit them (Pick.Panic). It only grows.
func (b *Balancer) PanicPicks() uint64 { return b.panics.Load() }

// sameBreaker reports whether two endpoints' breaker rules are equal once
// defaults are filled in.
func sameBreaker(x, y *rules.Breaker) bool {
	if x == nil || y == nil {
		return x == y
	}
	return breaker.WithDefaults(*x) == breaker.WithDefaults(*y)
}

// carryOver returns a copy of e, an endpoint of from, with a breaker of
// b's rules: the latency estimate, the slow-start age and the
// consecutive-failure ejection stay, the calls in flight end on e.
func (b *Balancer) carryOver(from *Balancer, e *Endpoint) *Endpoint {
	n := b.newEndpoint(e.addr)
	n.added = e.added
	n.since.Store(e.since.Load())
	n.cost.Store(e.cost.Load())
	n.stamp.Store(e.stamp.Load())
	from.ejMu.Lock()
	n.fails.Store(e.fails.Load())
	n.outUntil.Store(e.outUntil.Load())
	n.times = e.times
	from.ejMu.Unlock()
	return n
}

// Update makes addrs the endpoint list. Endpoints already present keep their
// statistics and breakers; new ones start slowly.
func (b *Balancer) Update(addrs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update(addrs)
}

// update replaces the list; b.mu must be held.
func (b *Balancer) update(addrs []string) {
	old := b.eps.Load().eps
	next := make([]*Endpoint, 0, len(addrs))
	for _, a := range addrs {
		if slices.ContainsFunc(next, func(e *Endpoint) bool { return e.addr == a }) {
			continue
		}
		if i := slices.IndexFunc(old, func(e *Endpoint) bool { return e.addr == a }); i >= 0 {
			next = append(next, old[i])
			continue
		}
		next = append(next, b.newEndpoint(a))
	}
	b.store(next)
}

// Add adds an endpoint unless it is present.
func (b *Balancer) Add(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// The list is read under the lock: concurrent Adds and Removes each see
	// the others' changes instead of overwriting them.
	b.update(append(b.Endpoints(), addr))
}

// Remove removes an endpoint if it is present. Calls in flight to it finish
// normally.
func (b *Balancer) Remove(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update(slices.DeleteFunc(b.Endpoints(), func(a string) bool { return a == addr }))
}

// Endpoints returns the addresses in the list.
func (b *Balancer) Endpoints() []string {
	eps := b.eps.Load().eps
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.addr
	}
	return out
}

// Len returns the number of endpoints.
func (b *Balancer) Len() int { return len(b.eps.Load().eps) }

// Endpoint returns the endpoint with the address, or nil.
func (b *Balancer) Endpoint(addr string) *Endpoint {
	for _, e := range b.eps.Load().eps {
		if e.addr == addr {
			return e
		}
	}
	return nil
}

func (b *Balancer) newEndpoint(addr string) *Endpoint {
	e := &Endpoint{addr: addr, added: b.opts.Clock.Nanotime()}
	e.since.Store(e.added)
	if b.opts.Breaker != nil {
		changes, f, clk := b.changes, b.opts.OnStateChange, b.opts.Clock
		hook := func(from, to breaker.State) {
			changes.Add(1) // first: the healthy count must follow even if f panics
			if to == breaker.Closed && e.open != nil && e.seen.Load() == e.open.OpenUntil() {
				// Back from an ejection the cap admitted: start slowly.
				// One over the cap kept its calls and needs no ramp.
				e.since.Store(clk.Nanotime())
			}
			if f != nil {
				f(addr, from, to)
			}
		}
		e.brk, _ = breaker.New(*b.opts.Breaker, breaker.Options{OnStateChange: hook}) // checked in New
		e.open, _ = e.brk.(*breaker.Breaker)
	}
	e.stamp.Store(e.added)
	return e
}

// Pick is one call's choice of endpoint; give it back with Done, or with
// Cancel when the call ends without an outcome.
type Pick struct {
	ep     *Endpoint
	ticket breaker.Ticket
	start  int64
	panic  bool
}

// Addr returns the chosen endpoint's address.
func (p Pick) Addr() string { return p.ep.addr }

// Endpoint returns the chosen endpoint.
func (p Pick) Endpoint() *Endpoint { return p.ep }

// Panic reports whether the call goes around the endpoint's breaker, which
// did not admit it: panic mode made the pick, or the breaker is open but
// its ejection is over the cap (Ejection.MaxShare). Its outcome goes to the
// latency estimate and the consecutive-failure count only.
func (p Pick) Panic() bool { return p.panic }

// Pick chooses an endpoint for a call starting at now (monotonic
// nanoseconds) and counts the call in flight on it.
func (b *Balancer) Pick(now int64) (Pick, error) {
	l := b.eps.Load()
	eps := l.eps
	switch len(eps) {
	case 0:
		return Pick{}, ErrNoEndpoint
	case 1:
		if b.out(eps[0], now, l) {
			if !b.panicking(l, now) {
				return b.admit(nil, nil, now, l, panicNo)
			}
			return b.admit(eps[0], nil, now, l, panicYes)
		}
		return b.admit(eps[0], nil, now, l, panicUnknown)
	}
	i := b.opts.IntN(len(eps))
	j := b.opts.IntN(len(eps) - 1)
	if j >= i {
		j++
	}
	x, y := eps[i], eps[j]
	// Panic mode matters only when a candidate is ejected or refuses the
	// call, so the healthy count is not even looked at while both are
	// healthy; once looked at, admit is told.
	pan := panicUnknown
	if xo, yo := b.out(x, now, l), b.out(y, now, l); xo || yo {
		if !b.panicking(l, now) {
			switch {
			case xo && yo:
				return b.admit(nil, nil, now, l, panicNo)
			case xo:
				return b.admit(y, nil, now, l, panicNo)
			default:
				return b.admit(x, nil, now, l, panicNo)
			}
		}
		pan = panicYes
	}
	if y.load(now, b.decay) < x.load(now, b.decay) {
		x, y = y, x
	}
	if !b.warm(x, now) && b.warm(y, now) && !b.broken(y, now) {
		x, y = y, x // a slow-starting endpoint loses this pick, to a sound one only
	}
	return b.admit(x, y, now, l, pan)
}

// A verdict on panic mode already reached in a Pick, if any.
const (
	panicUnknown = iota
	panicNo
	panicYes
)

// warm reports whether e keeps a pick: always once its slow start is over,
// with probability age / SlowStart before. An endpoint still ejected
// (drawn in panic mode) has no ramp yet: panic mode treats every endpoint
// alike.
func (b *Balancer) warm(e *Endpoint, now int64) bool {
	age := now - e.since.Load()
	if age >= b.slowStart || age < 0 {
		return true
	}
	share := max(minSlowStartShare, float64(age)/float64(b.slowStart))
	return b.opts.Float64() < share
}

// broken reports whether e is ejected for consecutive failures or its
// breaker is open at now, within the ejection cap or over it.
func (b *Balancer) broken(e *Endpoint, now int64) bool {
	_, open := e.breakerOpen(now)
	return open || b.failedOut(e, now)
}

// admit asks the chosen endpoint's breaker (then the alternative's, then any
// endpoint's) and counts the call in flight. In panic mode the chosen
// endpoint takes the call even if its breaker refuses it; so does any
// endpoint whose breaker is open but over the ejection cap.
// pan is the verdict on panic mode Pick reached, if any.
func (b *Balancer) admit(first, second *Endpoint, now int64, l *list, pan int) (Pick, error) {
	all := l.eps
	if first != nil {
		if p, ok := b.try(first, now); ok {
			return p, nil
		}
		if first.open != nil && (pan == panicYes || pan == panicUnknown && b.panicking(l, now)) {
			b.panics.Add(1)
			return b.around(first, now), nil
		}
		if b.overCap(first, now, l) {
			return b.around(first, now), nil
		}
	}
	if second != nil {
		if p, ok := b.try(second, now); ok {
			return p, nil
		}
		if b.overCap(second, now, l) {
			return b.around(second, now), nil
		}
	}
	// Both candidates are ejected: scan from a random offset for any
	// endpoint that will take the call.
	off := b.opts.IntN(len(all))
	for k := range all {
		e := all[(off+k)%len(all)]
		if e == first || e == second || b.out(e, now, l) {
			continue
		}
		if p, ok := b.try(e, now); ok {
			return p, nil
		}
		if b.overCap(e, now, l) {
			return b.around(e, now), nil
		}
	}
	return Pick{}, fmt.Errorf("%w: %w", ErrNoEndpoint, breaker.ErrOpen)
}

// around sends a call to e without its breaker's ticket: the breaker
// neither counts the call nor gives up a probe slot for it, so its open
// period still ends only through its own half-open probes.
func (b *Balancer) around(e *Endpoint, now int64) Pick {
	e.inflight.Add(1)
	return Pick{ep: e, start: now, panic: true}
}

func (b *Balancer) try(e *Endpoint, now int64) (Pick, bool) {
	var t breaker.Ticket
	if e.brk != nil {
		var err error
		if t, err = e.brk.Allow(now); err != nil {
			return Pick{}, false
		}
	}
	e.inflight.Add(1)
	return Pick{ep: e, ticket: t, start: now}, true
}

// Done reports the end of a picked call at now: its latency feeds the
// endpoint's estimate, its outcome the endpoint's breaker and its count of
// consecutive failures (Ejection.ConsecutiveFailures). A zero Pick is
// ignored.
func (b *Balancer) Done(p Pick, now int64, failed bool) {
	e := p.ep
	if e == nil {
		return
	}
	e.inflight.Add(-1)
	rtt := now - p.start
	sample := float64(max(rtt, 1))
	if failed {
		// A fast failure must not make the endpoint look fast: count it as
		// twice the current estimate, but let failures push the estimate
		// no further than the decay time. Unbounded, every failure in a
		// row doubled it (a few dozen took it to centuries), and after an
		// outage the balancer stayed blind to latency for tens of decay
		// times while the estimates came back down.
		est := e.Latency(now, b.decay)
		sample = max(sample, est, min(2*est, b.decay))
	}
	e.observe(now, sample, b.decay)
	if b.ej.ConsecutiveFailures > 0 {
		switch {
		case failed:
			b.failed(e, now)
		case e.fails.Load() != 0: // no write while the count is zero
			e.fails.Store(0)
		}
	}
	if e.brk != nil {
		e.brk.Record(p.ticket, now, time.Duration(rtt), failed)
	}
}

// Cancel ends a picked call without an outcome: one that is not made after
// all or whose caller gave up before it ended. It gives back the endpoint's
// in-flight count and its breaker's admission (breaker.Guard.Release: a
// half-open probe's slot goes back to its round), and records nothing: no
// latency sample, no success, no failure, so a cancelled call can neither
// close an ejected endpoint's breaker nor move its estimate. End a pick with
// Done or Cancel, not both. A zero Pick is ignored.
func (b *Balancer) Cancel(p Pick) {
	e := p.ep
	if e == nil {
		return
	}
	e.inflight.Add(-1)
	if e.brk != nil {
		e.brk.Release(p.ticket)
	}
}

// Ejected returns the addresses ejected at now: for consecutive failures,
// or with an open breaker within the ejection cap. An endpoint whose
// breaker is open but over the cap is not listed: it gets calls.
func (b *Balancer) Ejected(now int64) []string {
	var out []string
	l := b.eps.Load()
	for _, e := range l.eps {
		if b.out(e, now, l) {
			out = append(out, e.addr)
		}
	}
	return out
}
