package rules

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every validation and decoding error.
var ErrInvalid = errors.New("rules: invalid ruleset")

// FieldError is one problem with one field, named by its JSON path
// (e.g. "routes[2].rate_limit.rate").
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Problem }

// ValidationError lists every problem found in a ruleset.
type ValidationError struct {
	Errors []FieldError `json:"errors"`
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Error()
	}
	return ErrInvalid.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Limits on the size of a ruleset.
const (
	// DefaultMaxPayload is a NATS server's default max_payload: the largest
	// message it accepts, headers included.
	DefaultMaxPayload = 1 << 20
	// MaxBytes bounds an encoded ruleset: Decode's input and the canonical
	// encoding a rules store accepts. It stays 16 KiB under
	// DefaultMaxPayload, so the version's Envelope, a canary selector and
	// the headers of a JetStream KV write still fit a default server.
	MaxBytes = DefaultMaxPayload - 16<<10
	// MaxEnvelopeOverhead bounds what an Envelope adds around its encoded
	// ruleset (service name of at most MaxNameLen characters, version,
	// checksum); the encoding needs under 300 bytes.
	MaxEnvelopeOverhead = 1 << 10
	// MaxEnvelopeBytes bounds an encoded Envelope, DecodeEnvelope's input:
	// the envelope of any ruleset within MaxBytes fits.
	MaxEnvelopeBytes = MaxBytes + MaxEnvelopeOverhead
	MaxRoutes        = 1000
	MaxDownstreams   = 1000
	MaxNameLen       = 128
	// MaxTrustedPeers bounds priority.trust.peers.
	MaxTrustedPeers = 1000
	// MaxPeerLen bounds a peer identity: a SPIFFE ID is at most 2048 bytes.
	MaxPeerLen = 2048
)

var (
	methodList = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}
	anyMethod  = []string{"*"}
)

// validName reports whether v matches ^[a-zA-Z0-9][a-zA-Z0-9._:/-]*$.
func validName(v string) bool {
	for i := 0; i < len(v); i++ {
		switch ch := v[i]; {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		case i > 0 && (ch == '.' || ch == '_' || ch == ':' || ch == '/' || ch == '-'):
		default:
			return false
		}
	}
	return v != ""
}

// validHeader reports whether v is an HTTP token (RFC 9110), a valid header
// name.
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		switch ch := v[i]; {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		case strings.IndexByte("!#$%&'*+.^_`|~-", ch) >= 0:
		default:
			return false
		}
	}
	return v != ""
}

// matchKey is a method (or "*") and a path prefix that two routes must not
// share.
type matchKey struct{ method, prefix string }

type checker struct{ errs []FieldError }

func (c *checker) add(field, format string, args ...any) {
	c.errs = append(c.errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (c *checker) name(f, sub, v string) {
	switch {
	case v == "":
		c.add(f+sub, "is required")
	case len(v) > MaxNameLen:
		c.add(f+sub, "is longer than %d characters", MaxNameLen)
	case !validName(v):
		c.add(f+sub, "%q may contain only letters, digits and . _ : / - and must start with a letter or digit", v)
	}
}

func (c *checker) header(f, sub, v string) {
	if v != "" && !validHeader(v) {
		c.add(f+sub, "%q is not a valid header name", v)
	}
}

func (c *checker) ratio(f, sub string, v float64, allowOne bool) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		c.add(f+sub, "must be a finite number")
	case v < 0:
		c.add(f+sub, "must not be negative, got %v", v)
	case v > 1 || (!allowOne && v == 1):
		c.add(f+sub, "must be below %s, got %v", map[bool]string{true: "or equal to 1", false: "1"}[allowOne], v)
	}
}

func (c *checker) positive(f, sub string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		c.add(f+sub, "must be a finite number above 0, got %v", v)
	}
}

func (c *checker) nonNegInt(f, sub string, v, max int) {
	if v < 0 {
		c.add(f+sub, "must not be negative, got %d", v)
	} else if v > max {
		c.add(f+sub, "must be at most %d, got %d", max, v)
	}
}

func (c *checker) duration(f, sub string, d Duration, max time.Duration) {
	if d < 0 {
		c.add(f+sub, "must not be negative, got %s", d.D())
	} else if d.D() > max {
		c.add(f+sub, "must be at most %s, got %s", max, d.D())
	}
}

func (c *checker) mode(f, sub string, m Mode) {
	if m != "" && m != ModeEnforce && m != ModeShadow {
		c.add(f+sub, "must be %q or %q, got %q", ModeEnforce, ModeShadow, m)
	}
}

func (c *checker) class(f, sub string, v Class) {
	if v.Rank() < 0 {
		c.add(f+sub, "must be one of critical, core, browse, batch, got %q", v)
	}
}

// Validate checks the whole ruleset and reports every problem at once as a
// *ValidationError, or returns nil.
func (r *Ruleset) Validate() error {
	if r == nil {
		return &ValidationError{Errors: []FieldError{{Field: "", Problem: "ruleset is empty"}}}
	}
	c := &checker{}
	c.name("service", "", r.Service)
	if p := r.Priority; p != nil {
		c.header("priority.header", "", p.Header)
		c.header("priority.user_header", "", p.UserHeader)
		for k, v := range p.Levels {
			if len(k) != 1 || k[0] < '0' || k[0] > '9' {
				c.add("priority.levels."+k, "key must be a digit 0-9")
			}
			c.class("priority.levels.", k, v)
		}
		for k, v := range p.Aliases {
			if k == "" || len(k) > MaxNameLen {
				c.add("priority.aliases."+k, "alias must be 1 to %d characters", MaxNameLen)
			}
			if d := strings.TrimSpace(k); len(d) == 1 && d[0] >= '0' && d[0] <= '9' {
				// A digit is read as a level before any alias.
				c.add("priority.aliases."+k, "%q is a priority level, never looked up as an alias: map it in priority.levels", k)
			}
			c.class("priority.aliases.", k, v)
		}
		if p.Default != "" {
			c.class("priority.default", "", p.Default)
		}
		if t := p.Trust; t != nil {
			if t.Max == "" {
				c.add("priority.trust.max", "is required: the highest class of a caller not listed in peers")
			} else {
				c.class("priority.trust.max", "", t.Max)
			}
			if len(t.Peers) > MaxTrustedPeers {
				c.add("priority.trust.peers", "has %d entries, at most %d allowed", len(t.Peers), MaxTrustedPeers)
			}
			for k, v := range t.Peers {
				if k == "" || len(k) > MaxPeerLen || strings.TrimSpace(k) != k {
					c.add("priority.trust.peers."+k, "peer identity must be 1 to %d characters without surrounding spaces", MaxPeerLen)
				}
				c.class("priority.trust.peers.", k, v)
			}
		}
	}
	if len(r.Routes) > MaxRoutes {
		c.add("routes", "has %d entries, at most %d allowed", len(r.Routes), MaxRoutes)
	}
	names := make(map[string]int, len(r.Routes))
	matches := make(map[matchKey]int, len(r.Routes))
	for i := range r.Routes {
		rt := &r.Routes[i]
		f := "routes[" + strconv.Itoa(i) + "]"
		c.name(f, ".name", rt.Name)
		if j, dup := names[rt.Name]; dup && rt.Name != "" {
			c.add(f+".name", "%q is already used by routes[%d]", rt.Name, j)
		}
		names[rt.Name] = i
		c.route(f, rt)
		methods := rt.Match.Methods
		if len(methods) == 0 {
			methods = anyMethod
		}
		for _, m := range methods {
			key := matchKey{m, rt.Match.PathPrefix}
			if j, dup := matches[key]; dup && j != i {
				// A method listed twice on one route is reported by route.
				c.add(f+".match", "matches the same requests (%s %s) as routes[%d]", m, rt.Match.PathPrefix, j)
			}
			matches[key] = i
		}
	}
	if len(r.Downstreams) > MaxDownstreams {
		c.add("downstreams", "has %d entries, at most %d allowed", len(r.Downstreams), MaxDownstreams)
	}
	dnames := make(map[string]int, len(r.Downstreams))
	for i := range r.Downstreams {
		d := &r.Downstreams[i]
		f := "downstreams[" + strconv.Itoa(i) + "]"
		c.name(f, ".name", d.Name)
		if j, dup := dnames[d.Name]; dup && d.Name != "" {
			c.add(f+".name", "%q is already used by downstreams[%d]", d.Name, j)
		}
		dnames[d.Name] = i
		c.downstream(f, d)
	}
	if len(c.errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: c.errs}
}

const maxPeriod = 7 * 24 * time.Hour

func (c *checker) route(f string, rt *Route) {
	c.mode(f, ".mode", rt.Mode)
	p := rt.Match.PathPrefix
	if p == "" || p[0] != '/' {
		c.add(f+".match.path_prefix", "must start with \"/\", got %q", p)
	} else if len(p) > 1024 {
		c.add(f+".match.path_prefix", "is longer than 1024 characters")
	}
	var seen uint16 // bit k: methodList[k] already listed
	for j, m := range rt.Match.Methods {
		k := slices.Index(methodList[:], m)
		if k < 0 {
			c.add(fmt.Sprintf("%s.match.methods[%d]", f, j), "%q is not an upper-case HTTP method", m)
		}
		if (k >= 0 && seen&(1<<k) != 0) || (k < 0 && slices.Contains(rt.Match.Methods[:j], m)) {
			c.add(fmt.Sprintf("%s.match.methods[%d]", f, j), "%q is listed twice", m)
		}
		if k >= 0 {
			seen |= 1 << k
		}
	}
	if rl := rt.RateLimit; rl != nil {
		c.positive(f, ".rate_limit.rate", rl.Rate)
		c.nonNegInt(f, ".rate_limit.burst", rl.Burst, 1<<30)
	}
	for j, k := range rt.KeyRateLimits {
		kf := fmt.Sprintf("%s.key_rate_limits[%d]", f, j)
		if k.Key != "ip" && !(strings.HasPrefix(k.Key, "header:") && validHeader(strings.TrimPrefix(k.Key, "header:"))) {
			c.add(kf+".key", "must be \"ip\" or \"header:<Name>\", got %q", k.Key)
		}
		c.positive(kf, ".rate", k.Rate)
		c.nonNegInt(kf, ".burst", k.Burst, 1<<30)
		c.nonNegInt(kf, ".max_keys", k.MaxKeys, 1<<20)
	}
	if cc := rt.Concurrency; cc != nil {
		switch cc.Algorithm {
		case "", AlgorithmGradient, AlgorithmLittle, AlgorithmFixed:
		default:
			c.add(f+".concurrency.algorithm", "must be gradient, little or fixed, got %q", cc.Algorithm)
		}
		c.nonNegInt(f, ".concurrency.initial", cc.Initial, 1<<20)
		c.nonNegInt(f, ".concurrency.min", cc.Min, 1<<20)
		c.nonNegInt(f, ".concurrency.max", cc.Max, 1<<20)
		if cc.Min > 0 && cc.Max > 0 && cc.Min > cc.Max {
			c.add(f+".concurrency.min", "(%d) must not exceed max (%d)", cc.Min, cc.Max)
		}
		if cc.Initial > 0 && cc.Max > 0 && cc.Initial > cc.Max {
			c.add(f+".concurrency.initial", "(%d) must not exceed max (%d)", cc.Initial, cc.Max)
		}
		if cc.Initial > 0 && cc.Min > 0 && cc.Initial < cc.Min {
			c.add(f+".concurrency.initial", "(%d) must not be below min (%d)", cc.Initial, cc.Min)
		}
		if cc.Algorithm == AlgorithmFixed && cc.Max == 0 {
			c.add(f+".concurrency.max", "is required for the fixed algorithm")
		}
		if cc.Tolerance != 0 {
			if math.IsNaN(cc.Tolerance) || cc.Tolerance < 0 || cc.Tolerance > 10 {
				c.add(f+".concurrency.tolerance", "must be between 0 and 10, got %v", cc.Tolerance)
			}
		}
		if cc.DeadlineFactor != 0 {
			if math.IsNaN(cc.DeadlineFactor) || cc.DeadlineFactor < 0 || cc.DeadlineFactor > 10 {
				c.add(f+".concurrency.deadline_factor", "must be between 0 and 10, got %v", cc.DeadlineFactor)
			}
		}
		c.duration(f, ".concurrency.probe_interval", cc.ProbeInterval, 24*time.Hour)
		if cc.ProbeInterval > 0 && cc.ProbeInterval.D() < time.Second {
			c.add(f+".concurrency.probe_interval", "must be at least 1s, got %s", cc.ProbeInterval.D())
		}
		if cc.Algorithm == AlgorithmFixed {
			// The fixed limit is Max from the start: the adaptive knobs do nothing.
			if cc.Tolerance != 0 {
				c.add(f+".concurrency.tolerance", "has no effect with the fixed algorithm")
			}
			if cc.ProbeInterval != 0 {
				c.add(f+".concurrency.probe_interval", "has no effect with the fixed algorithm")
			}
		}
	}
	if s := rt.Shedding; s != nil {
		if rt.Concurrency == nil {
			c.add(f+".shedding", "needs concurrency: shedding divides the route's concurrency limit between the classes")
		}
		c.ratio(f, ".shedding.reserved", s.Reserved, false)
		c.duration(f, ".shedding.rotate_every", s.RotateEvery, maxPeriod)
		if s.RotateEvery != 0 && !s.ConsistentUsers {
			c.add(f+".shedding.rotate_every", "needs consistent_users: it rotates which users are shed first")
		}
	}
	if q := rt.Queue; q != nil {
		if rt.Concurrency == nil {
			c.add(f+".queue", "needs concurrency: requests wait in the queue for a slot under the route's concurrency limit")
		}
		c.duration(f, ".queue.target", q.Target, time.Minute)
		c.duration(f, ".queue.interval", q.Interval, time.Minute)
		c.nonNegInt(f, ".queue.max_length", q.MaxLength, 1<<16)
	}
	if w := rt.WarmUp; w != nil {
		if rt.RateLimit == nil && len(rt.KeyRateLimits) == 0 && rt.Concurrency == nil {
			c.add(f+".warm_up", "needs rate_limit, key_rate_limits or concurrency: it ramps those limits and the route has none")
		}
		if w.InitialFraction != 0 {
			c.ratio(f, ".warm_up.initial_fraction", w.InitialFraction, false)
		}
		if w.Period <= 0 {
			c.add(f+".warm_up.period", "is required and must be above 0")
		}
		c.duration(f, ".warm_up.period", w.Period, 24*time.Hour)
	}
	if e := rt.Exempt; e != nil {
		c.header(f, ".exempt.caller_header", e.CallerHeader)
		if e.CallerHeader != "" && len(e.Callers) == 0 {
			c.add(f+".exempt.caller_header", "needs exempt.callers: the header is read only to match them")
		}
		for j, p := range e.Paths {
			if p == "" || p[0] != '/' {
				c.add(fmt.Sprintf("%s.exempt.paths[%d]", f, j), "must start with \"/\", got %q", p)
			}
		}
		for j, v := range e.Callers {
			if v == "" {
				c.add(fmt.Sprintf("%s.exempt.callers[%d]", f, j), "must not be empty")
			}
		}
	}
}

func (c *checker) downstream(f string, d *Downstream) {
	c.mode(f, ".mode", d.Mode)
	c.duration(f, ".timeout", d.Timeout, time.Hour)
	if b := d.Breaker; b != nil {
		if b.Kind != "" && b.Kind != BreakerKindBreaker && b.Kind != BreakerKindThrottle {
			c.add(f+".breaker.kind", "must be breaker or throttle, got %q", b.Kind)
		}
		c.duration(f, ".breaker.window", b.Window, time.Hour)
		if b.Window > 0 && b.Window.D() < 100*time.Millisecond {
			c.add(f+".breaker.window", "must be at least 100ms, got %s", b.Window.D())
		}
		c.nonNegInt(f, ".breaker.min_calls", b.MinCalls, 1<<20)
		if b.ErrorRatio != 0 {
			c.ratio(f, ".breaker.error_ratio", b.ErrorRatio, true)
		}
		if b.SlowCallRatio != 0 {
			c.ratio(f, ".breaker.slow_call_ratio", b.SlowCallRatio, true)
		}
		c.duration(f, ".breaker.slow_call", b.SlowCall, time.Hour)
		c.duration(f, ".breaker.open_base", b.OpenBase, time.Hour)
		c.duration(f, ".breaker.open_max", b.OpenMax, 24*time.Hour)
		if b.OpenBase > 0 && b.OpenMax > 0 && b.OpenBase > b.OpenMax {
			c.add(f+".breaker.open_base", "(%s) must not exceed open_max (%s)", b.OpenBase.D(), b.OpenMax.D())
		}
		c.nonNegInt(f, ".breaker.half_open_probes", b.HalfOpenProbes, 1000)
		if b.K != 0 && (math.IsNaN(b.K) || b.K < 1 || b.K > 100) {
			c.add(f+".breaker.k", "must be between 1 and 100, got %v", b.K)
		}
		if b.Kind == BreakerKindThrottle {
			// The throttle counts requests and accepts over Window and
			// scales by K; the state machine's fields do nothing.
			for _, x := range []struct {
				name string
				set  bool
			}{{"min_calls", b.MinCalls != 0}, {"error_ratio", b.ErrorRatio != 0}, {"slow_call_ratio", b.SlowCallRatio != 0},
				{"slow_call", b.SlowCall != 0}, {"open_base", b.OpenBase != 0}, {"open_max", b.OpenMax != 0},
				{"half_open_probes", b.HalfOpenProbes != 0}} {
				if x.set {
					c.add(f+".breaker."+x.name, "has no effect with kind throttle (it uses window and k)")
				}
			}
		} else if b.K != 0 && (b.Kind == "" || b.Kind == BreakerKindBreaker) {
			c.add(f+".breaker.k", "has effect only with kind throttle")
		}
	}
	if r := d.Retry; r != nil {
		c.nonNegInt(f, ".retry.max_attempts", r.MaxAttempts, 100)
		c.duration(f, ".retry.base_backoff", r.BaseBackoff, time.Minute)
		c.duration(f, ".retry.max_backoff", r.MaxBackoff, time.Hour)
		if r.BaseBackoff > 0 && r.MaxBackoff > 0 && r.BaseBackoff > r.MaxBackoff {
			c.add(f+".retry.base_backoff", "(%s) must not exceed max_backoff (%s)", r.BaseBackoff.D(), r.MaxBackoff.D())
		}
		if r.Budget != 0 {
			c.ratio(f, ".retry.budget", r.Budget, true)
		}
		if r.MinPerSecond != 0 && (math.IsNaN(r.MinPerSecond) || r.MinPerSecond < 0 || r.MinPerSecond > 1e6) {
			c.add(f+".retry.min_per_second", "must be between 0 and 1000000, got %v", r.MinPerSecond)
		}
	}
	if b := d.Bulkhead; b != nil {
		if b.MaxConcurrent < 1 || b.MaxConcurrent > 1<<20 {
			c.add(f+".bulkhead.max_concurrent", "must be between 1 and %d, got %d", 1<<20, b.MaxConcurrent)
		}
	}
	if b := d.Balancer; b != nil {
		c.duration(f, ".balancer.decay", b.Decay, time.Hour)
		c.duration(f, ".balancer.slow_start", b.SlowStart, time.Hour)
		// Only a breaker of kind breaker and consecutive failures eject
		// endpoints; without either, panic mode and the ejection cap have
		// nothing to act on.
		ejects := b.ConsecutiveFailures > 0 || (d.Breaker != nil && d.Breaker.Kind != BreakerKindThrottle)
		if p := b.PanicThreshold; p != nil {
			c.ratio(f, ".balancer.panic_threshold", *p, true)
			if !ejects {
				c.add(f+".balancer.panic_threshold", "has effect only with a breaker of kind breaker or balancer.consecutive_failures")
			}
		}
		c.ejection(f, b, ejects)
	}
}

// Defaults of the consecutive-failure ejection times, as sdk/balancer's.
const (
	defaultBaseEjectionTime = 30 * time.Second
	defaultMaxEjectionTime  = 300 * time.Second
)

// ejection checks the outlier ejection fields of balancer b of downstream
// f; ejects tells whether anything can eject its endpoints.
func (c *checker) ejection(f string, b *Balancer, ejects bool) {
	c.nonNegInt(f, ".balancer.consecutive_failures", b.ConsecutiveFailures, 1<<20)
	c.duration(f, ".balancer.base_ejection_time", b.BaseEjectionTime, time.Hour)
	c.duration(f, ".balancer.max_ejection_time", b.MaxEjectionTime, 24*time.Hour)
	if b.ConsecutiveFailures <= 0 {
		if b.BaseEjectionTime != 0 {
			c.add(f+".balancer.base_ejection_time", "has effect only with consecutive_failures")
		}
		if b.MaxEjectionTime != 0 {
			c.add(f+".balancer.max_ejection_time", "has effect only with consecutive_failures")
		}
	} else if base, top := b.BaseEjectionTime.D(), b.MaxEjectionTime.D(); base >= 0 && top >= 0 {
		// The balancer would raise the cap to the base time in silence.
		switch {
		case base > 0 && top > 0 && base > top:
			c.add(f+".balancer.max_ejection_time", "(%s) must not be below base_ejection_time (%s)", top, base)
		case base == 0 && top > 0 && top < defaultBaseEjectionTime:
			c.add(f+".balancer.max_ejection_time", "(%s) must not be below base_ejection_time (default %s)", top, defaultBaseEjectionTime)
		case top == 0 && base > defaultMaxEjectionTime:
			c.add(f+".balancer.base_ejection_time", "(%s) must not exceed max_ejection_time (default %s)", base, defaultMaxEjectionTime)
		}
	}
	if p := b.MaxEjectionPercent; p != nil {
		if *p < 1 || *p > 100 {
			c.add(f+".balancer.max_ejection_percent", "must be between 1 and 100, got %d (leave it out for the default 10; at least one endpoint may always be ejected)", *p)
		} else if !ejects {
			c.add(f+".balancer.max_ejection_percent", "has effect only with consecutive_failures or a breaker of kind breaker")
		}
	}
}
