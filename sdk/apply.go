package governor

import (
	"errors"
	"fmt"
	"math/bits"
	"net/textproto"
	"reflect"
	"strings"
	"sync"
	"time"

	"governor.dev/governor/sdk/queue"
	"governor.dev/governor/sdk/ratelimit"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/shed"
)

// Defaults the enforcers apply to rule fields left at zero (the schema does
// not write defaults into rulesets, so checksums do not depend on them).
const (
	DefaultReserved     = 0.1
	DefaultRotateEvery  = time.Hour
	DefaultWarmFraction = 0.1
	DefaultMaxKeys      = 10000
	DefaultCallerHeader = "X-Caller"
	// DefaultDeadlineFactor: a request with a stated deadline needs at
	// least the route's recent average latency left.
	DefaultDeadlineFactor = 1.0
)

// Apply validates rs and, if it is valid, makes it the ruleset in force as
// version, atomically. An invalid ruleset or one for another service is
// refused with an error and the rules in force stay as they were; nothing is
// half-applied. A version below the one in force is applied like any other:
// the caller orders versions (package watch applies one when an instance
// leaves a canary for the stable version, and ignores older ones
// otherwise). Routes whose rules did not change keep all their learned
// state; a changed route keeps the parts whose rules are equal (its limiter,
// its buckets) and always its in-flight counts, counters and queue (with the
// requests waiting in it, under the new queue settings). A changed rate limit
// or per-key limit keeps the tokens its buckets have left (up to the new
// burst), so a change never refills them. Downstream rules go
// to the outbound set (Outbound) before the inbound swap; if it refuses
// them, nothing changes. Applies are serialized; Hooks.OnApply is called
// once Apply has released its lock (see Hooks).
func (g *Governor) Apply(rs *rules.Ruleset, version int64) error {
	err := g.applyLocked(rs, version)
	if h := g.opts.Hooks.OnApply; h != nil {
		g.hooks.run(h)
	}
	return err
}

// applyLocked applies under applyMu, counts the outcome and queues it for
// OnApply, so that the queue holds outcomes in the order of the applies.
func (g *Governor) applyLocked(rs *rules.Ruleset, version int64) error {
	g.applyMu.Lock()
	defer g.applyMu.Unlock()
	err := g.apply(rs, version)
	if g.metrics != nil {
		if err != nil {
			g.metrics.rejected.Inc()
		} else {
			g.metrics.applied.Inc()
			g.metrics.version.Set(float64(version))
		}
	}
	if g.opts.Hooks.OnApply != nil {
		g.hooks.push(applyOutcome{version: version, err: err})
	}
	return err
}

// applyOutcome is one Apply's result, waiting for Hooks.OnApply.
type applyOutcome struct {
	version int64
	err     error
}

// hookQueue runs OnApply outside applyMu, in the order of the applies: Apply
// queues its outcome while it holds applyMu and, once it has released it,
// runs the queued calls unless another goroutine is running them already
// (that one then runs this call too, after the earlier ones). A hook that
// calls Apply queues that Apply's call, which runs after the hook returns.
type hookQueue struct {
	mu      sync.Mutex
	pending []applyOutcome
	running bool
}

func (q *hookQueue) push(o applyOutcome) {
	q.mu.Lock()
	q.pending = append(q.pending, o)
	q.mu.Unlock()
}

// run calls h with every queued outcome, oldest first, unless a call to run
// is under way. A hook that panics leaves the outcomes behind it queued for
// the next Apply.
func (q *hookQueue) run(h func(version int64, err error)) {
	q.mu.Lock()
	if q.running {
		q.mu.Unlock()
		return
	}
	q.running = true
	locked := true
	defer func() {
		if !locked {
			q.mu.Lock()
		}
		q.running = false
		q.mu.Unlock()
	}()
	for len(q.pending) > 0 {
		o := q.pending[0]
		q.pending[0] = applyOutcome{}
		q.pending = q.pending[1:]
		if len(q.pending) == 0 {
			q.pending = nil
		}
		locked = false
		q.mu.Unlock()
		h(o.version, o.err)
		q.mu.Lock()
		locked = true
	}
}

func (g *Governor) apply(rs *rules.Ruleset, version int64) error {
	if err := rs.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRules, err)
	}
	if rs.Service != g.opts.Service {
		return fmt.Errorf("%w: ruleset is for service %q, this governor enforces %q", ErrInvalidRules, rs.Service, g.opts.Service)
	}
	old := g.state.Load()
	st, err := g.build(rs.Clone(), version, old)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRules, err)
	}
	if err := g.outbound.Apply(st.rules.Downstreams); err != nil {
		return fmt.Errorf("%w: downstreams: %w", ErrInvalidRules, err)
	}
	g.publish(st)
	return nil
}

// publish puts st in force. The caller holds applyMu (or is New).
func (g *Governor) publish(st *state) {
	for _, rt := range st.routes {
		if rt.queue != nil {
			_ = rt.queue.Configure(*rt.cfg.Queue) // validated by build
		}
	}
	g.state.Store(st)
}

// build turns a validated ruleset into enforcement state, reusing what old
// learned. It changes nothing shared: the caller publishes the result.
func (g *Governor) build(rs *rules.Ruleset, version int64, old *state) (*state, error) {
	st := &state{version: version, rules: rs, classifier: shed.NewClassifier(rs.Priority),
		priorityHeader: rules.DefaultPriorityHeader, byName: map[string]*route{}}
	if p := rs.Priority; p != nil {
		if p.Header != "" {
			st.priorityHeader = textproto.CanonicalMIMEHeaderKey(p.Header)
		}
		if p.UserHeader != "" {
			st.userHeader = textproto.CanonicalMIMEHeaderKey(p.UserHeader)
		}
	}
	var errs []error
	for i := range rs.Routes {
		cfg := rs.Routes[i]
		prev := old.byName[cfg.Name]
		if prev != nil && reflect.DeepEqual(prev.cfg, cfg) {
			st.routes = append(st.routes, prev)
			st.byName[cfg.Name] = prev
			continue
		}
		rt, err := g.buildRoute(cfg, prev)
		if err != nil {
			errs = append(errs, fmt.Errorf("routes[%d] (%s): %w", i, cfg.Name, err))
			continue
		}
		st.routes = append(st.routes, rt)
		st.byName[cfg.Name] = rt
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	st.match = newMatcher(st.routes)
	return st, nil
}

// unusedKeyLimit returns the index of a per-key limit of prev that is not
// reused yet and matches kr: has the same rule, or, with sameKey, only the
// same key. It returns -1 if there is none.
func unusedKeyLimit(prev *route, reused []bool, kr rules.KeyRateLimit, sameKey bool) int {
	if prev == nil {
		return -1
	}
	for i := range prev.keyed {
		if c := prev.keyed[i].cfg; !reused[i] && (c == kr || sameKey && c.Key == kr.Key) {
			return i
		}
	}
	return -1
}

func (g *Governor) buildRoute(cfg rules.Route, prev *route) (*route, error) {
	rt := &route{cfg: cfg, name: cfg.Name, shadow: cfg.Mode == rules.ModeShadow}
	if prev != nil {
		rt.cell = prev.cell
	} else {
		rt.cell = g.newCell(cfg.Name)
	}
	rt.shards = rt.cell.shards
	rt.log2n = uint(bits.Len(uint(len(rt.shards))) - 1)
	if rl := cfg.RateLimit; rl != nil {
		if prev != nil && prev.bucket != nil && reflect.DeepEqual(prev.cfg.RateLimit, rl) {
			rt.bucket = prev.bucket
		} else {
			b, err := ratelimit.NewBucket(rl.Rate, burstOf(rl.Rate, rl.Burst), g.shards)
			if err != nil {
				return nil, fmt.Errorf("rate_limit: %w", err)
			}
			// A changed limit keeps the tokens the old bucket has left:
			// lowering a rate during an overload (by hand, or the engine's
			// recommender on every step) must not refill every bucket.
			if prev != nil && prev.bucket != nil {
				b.Inherit(prev.bucket, g.clk.Nanotime())
			}
			rt.bucket = b
		}
	}
	rt.callerHeader = DefaultCallerHeader
	if e := cfg.Exempt; e != nil && e.CallerHeader != "" {
		rt.callerHeader = textproto.CanonicalMIMEHeaderKey(e.CallerHeader)
	}
	// A per-key limit whose rule is unchanged keeps its buckets wherever it
	// moved in the list; each of prev's is reused once. A changed one (rate,
	// burst or max_keys) takes over the tokens its keys have left from an
	// unused limit of prev on the same key, so that no key gets a fresh
	// burst.
	var reused []bool
	from := make([]int, len(cfg.KeyRateLimits))
	if prev != nil {
		reused = make([]bool, len(prev.keyed))
	}
	for _, sameKey := range []bool{false, true} {
		for j, kr := range cfg.KeyRateLimits {
			if sameKey && from[j] != 0 {
				continue
			}
			if i := unusedKeyLimit(prev, reused, kr, sameKey); i >= 0 {
				reused[i] = true
				from[j] = i + 1
			}
		}
	}
	for j, kr := range cfg.KeyRateLimits {
		kl := keyLimit{cfg: kr, ip: kr.Key == "ip"}
		if !kl.ip {
			kl.header = textproto.CanonicalMIMEHeaderKey(strings.TrimPrefix(kr.Key, "header:"))
			kl.caller = kl.header == rt.callerHeader
		}
		if i := from[j] - 1; i >= 0 && prev.keyed[i].cfg == kr {
			kl.k = prev.keyed[i].k
		} else {
			maxKeys := kr.MaxKeys
			if maxKeys == 0 {
				maxKeys = DefaultMaxKeys
			}
			k, err := ratelimit.NewKeyed(kr.Rate, burstOf(kr.Rate, kr.Burst), maxKeys)
			if err != nil {
				return nil, fmt.Errorf("key_rate_limits[%d]: %w", j, err)
			}
			if i >= 0 {
				k.Inherit(prev.keyed[i].k, g.clk.Nanotime())
			}
			kl.k = k
		}
		rt.keyed = append(rt.keyed, kl)
	}
	if cc := cfg.Concurrency; cc != nil {
		same := *cc
		if prev != nil && prev.conc != nil {
			same.DeadlineFactor = prev.conc.cfg.DeadlineFactor // not the limiter's
		}
		rt.deadlineFactor = cc.DeadlineFactor
		if rt.deadlineFactor == 0 {
			rt.deadlineFactor = DefaultDeadlineFactor
		}
		if prev != nil && prev.conc != nil && prev.conc.cfg == same {
			rt.conc = prev.conc
		} else {
			lim, err := g.newLim(*cc, g.clk)
			if err != nil {
				return nil, fmt.Errorf("concurrency: %w", err)
			}
			rt.conc = newConcurrency(*cc, lim)
		}
		if prev != nil && prev.reserve != nil {
			rt.reserve = prev.reserve
		} else {
			rt.reserve = shed.NewReserve(0, rt.cell.admitted)
		}
		rt.reserved = DefaultReserved
		rt.rotate = int64(DefaultRotateEvery)
		if s := cfg.Shedding; s != nil {
			if s.Reserved > 0 {
				rt.reserved = s.Reserved
			}
			if s.RotateEvery > 0 {
				rt.rotate = int64(s.RotateEvery)
			}
			rt.consistent = s.ConsistentUsers
		}
		if q := cfg.Queue; q != nil && !rt.shadow {
			if err := queue.Validate(*q); err != nil {
				return nil, fmt.Errorf("queue: %w", err)
			}
			rt.queue = rt.cell.queue // configured by publish
		}
	}
	if w := cfg.WarmUp; w != nil {
		rt.warm = true
		rt.warmFrom = w.InitialFraction
		if rt.warmFrom == 0 {
			rt.warmFrom = DefaultWarmFraction
		}
		rt.warmStart = g.start
		rt.warmEnd = g.start + int64(w.Period)
	}
	if e := cfg.Exempt; e != nil {
		rt.exempts = len(e.Paths)+len(e.Callers) > 0
		rt.exemptPaths = e.Paths
		rt.callers = e.Callers
	}
	for reason := ReasonShed; reason <= ReasonOverload; reason++ {
		for c := range rt.rejections[reason] {
			rt.rejections[reason][c] = &Rejection{Reason: reason, Route: rt.name, Class: rules.Classes[c], RetryAfter: time.Second}
		}
	}
	return rt, nil
}

// burstOf applies the burst default max(1, rate/10).
func burstOf(rate float64, burst int) int {
	if burst > 0 {
		return burst
	}
	return max(1, int(rate/10))
}
