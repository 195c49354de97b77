// Package rules is Governor's rule schema, shared by the SDK (which enforces
// rules) and the control plane (which versions, approves and distributes them).
//
// A Ruleset holds everything one service enforces: how requests are classified
// by priority, per-route inbound protection (rate limits, adaptive concurrency,
// shedding, queueing, warm-up) and per-downstream outbound protection (circuit
// breaker, retries with a budget, bulkhead, balancing).
//
// Validate refuses settings that the enforcers would silently ignore, naming
// the field: shedding or a queue on a route without concurrency, a warm-up on
// a route with no limit to ramp, shedding.rotate_every without
// consistent_users, exempt.caller_header without exempt.callers, tolerance or
// probe_interval with the fixed algorithm, and breaker fields of the other
// kind (k on a breaker; min_calls, error_ratio, slow_call_ratio, slow_call,
// open_base, open_max or half_open_probes on a throttle). Two combinations
// are accepted with a documented meaning: a queue on a shadow route is kept
// but unused while the route is in shadow mode (nothing waits in a dry run),
// and slow_call is counted only while slow_call_ratio is below 1.
//
// Size limits fit the NATS default max_payload (DefaultMaxPayload, 1 MiB): an
// encoded ruleset is at most MaxBytes, its Envelope at most MaxEnvelopeBytes,
// which leaves room under the default max_payload for a canary selector and
// the headers of a JetStream KV write.
//
// Decode parses and validates untrusted bytes with field-level errors.
// Canonical gives the byte-stable encoding that Checksum hashes, so the store,
// the distribution layer and every SDK instance agree on what a version is.
// Defaults are not written into a ruleset: the enforcers apply them, so a
// ruleset's checksum does not change when a default does.
package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Class is a traffic priority class. From most to least important:
// critical, core, browse, batch.
type Class string

// The traffic classes, most important first.
const (
	ClassCritical Class = "critical"
	ClassCore     Class = "core"
	ClassBrowse   Class = "browse"
	ClassBatch    Class = "batch"
)

// Classes lists the classes from most to least important.
var Classes = [...]Class{ClassCritical, ClassCore, ClassBrowse, ClassBatch}

// Rank returns 0 for critical up to 3 for batch, or -1 for an unknown class.
func (c Class) Rank() int {
	for i, k := range Classes {
		if c == k {
			return i
		}
	}
	return -1
}

// Mode says whether a rule rejects traffic or only counts what it would reject.
type Mode string

// Rule modes.
const (
	ModeEnforce Mode = "enforce" // the default
	ModeShadow  Mode = "shadow"  // dry run: evaluate and count, reject nothing
)

// Concurrency limiter algorithms.
const (
	AlgorithmGradient = "gradient" // min-RTT / sample-RTT gradient with sqrt headroom
	AlgorithmLittle   = "little"   // Little's law: max throughput x min latency
	AlgorithmFixed    = "fixed"    // a static limit (Max)
)

// Breaker kinds.
const (
	BreakerKindBreaker  = "breaker"  // closed / open / half-open state machine
	BreakerKindThrottle = "throttle" // client-side adaptive throttling (SRE formula)
)

// DefaultPriorityHeader carries a request's priority: a digit 0 (most
// important) to 9 (least), or a class name.
const DefaultPriorityHeader = "X-Traffic-Priority"

// Ruleset is everything one service enforces.
type Ruleset struct {
	// Service names the service the rules belong to.
	Service string `json:"service"`
	// Priority says how requests are classified. Nil means the defaults.
	Priority *Priority `json:"priority,omitempty"`
	// Routes protect inbound traffic. A request matches the route with the
	// longest path prefix; a route listing methods wins over one that does not.
	Routes []Route `json:"routes,omitempty"`
	// Downstreams protect outbound calls, one entry per dependency.
	Downstreams []Downstream `json:"downstreams,omitempty"`
}

// Priority configures request classification.
type Priority struct {
	// Header carries the priority; default X-Traffic-Priority.
	Header string `json:"header,omitempty"`
	// Levels maps the digits "0".."9" to classes. Missing digits keep their
	// default: 0-1 critical, 2-4 core, 5-7 browse, 8-9 batch.
	Levels map[string]Class `json:"levels,omitempty"`
	// Aliases maps further header values (e.g. "checkout") to classes.
	Aliases map[string]Class `json:"aliases,omitempty"`
	// Default is the class of requests without a valid priority; default core.
	Default Class `json:"default,omitempty"`
	// UserHeader names the header with a user key for consistent shedding.
	UserHeader string `json:"user_header,omitempty"`
	// Trust limits the class a request may claim by who sent it. Nil: any
	// caller may claim any class, as the priority header is read.
	Trust *Trust `json:"trust,omitempty"`
}

// Trust caps the class of a request by its transport-authenticated peer
// (Request.Peer: the identity in the caller's mTLS certificate, never a
// header). A request claiming a class above its cap, or defaulting to one,
// is classified at the cap instead: a client that sends "critical" without
// being trusted for it competes as, say, core and is shed with core.
type Trust struct {
	// Max is the highest class of a request whose peer is not listed in
	// Peers, including requests without a peer (plain HTTP); required.
	Max Class `json:"max"`
	// Peers maps peer identities (a URI SAN such as
	// spiffe://prod/ns/shop/sa/checkout, else the first DNS SAN, else the
	// subject's common name; see governor.PeerIdentity) to the highest
	// class each may claim.
	Peers map[string]Class `json:"peers,omitempty"`
}

// Route is the inbound protection of one route.
type Route struct {
	Name  string `json:"name"`
	Match Match  `json:"match"`
	// Mode is enforce (default) or shadow.
	Mode          Mode           `json:"mode,omitempty"`
	RateLimit     *RateLimit     `json:"rate_limit,omitempty"`
	KeyRateLimits []KeyRateLimit `json:"key_rate_limits,omitempty"`
	Concurrency   *Concurrency   `json:"concurrency,omitempty"`
	Shedding      *Shedding      `json:"shedding,omitempty"`
	Queue         *Queue         `json:"queue,omitempty"`
	WarmUp        *WarmUp        `json:"warm_up,omitempty"`
	Exempt        *Exempt        `json:"exempt,omitempty"`
}

// Match selects the requests of a route.
type Match struct {
	// PathPrefix must start with "/"; "/" matches everything.
	PathPrefix string `json:"path_prefix"`
	// Methods restricts the route to these HTTP methods (upper case); empty
	// means any method.
	Methods []string `json:"methods,omitempty"`
}

// RateLimit is a token bucket.
type RateLimit struct {
	// Rate is the sustained rate in requests per second.
	Rate float64 `json:"rate"`
	// Burst is the bucket size; default max(1, Rate/10).
	Burst int `json:"burst,omitempty"`
}

// KeyRateLimit is a token bucket per key (caller, client IP, user), with
// bounded memory: the least recently seen keys are forgotten beyond MaxKeys.
type KeyRateLimit struct {
	// Key is "ip" or "header:<Name>".
	Key   string  `json:"key"`
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst,omitempty"`
	// MaxKeys bounds memory; default 10000.
	MaxKeys int `json:"max_keys,omitempty"`
}

// Concurrency is an adaptive (or fixed) concurrency limit.
type Concurrency struct {
	// Algorithm is gradient, little or fixed; default gradient.
	Algorithm string `json:"algorithm,omitempty"`
	// Initial is the starting limit; default 20. The fixed algorithm's limit
	// is Max from the start: Initial and Min need only be consistent with it.
	Initial int `json:"initial,omitempty"`
	// Min and Max bound the limit; defaults 4 and 1000, the default giving
	// way to an explicit bound or Initial on the other side (Initial 2 makes
	// the default Min 2). Max is required for the fixed algorithm.
	Min int `json:"min,omitempty"`
	Max int `json:"max,omitempty"`
	// Tolerance is how much latency above the no-load latency is accepted
	// before the limit shrinks (0.5 = 50%); default 0.5. Refused with the
	// fixed algorithm.
	Tolerance float64 `json:"tolerance,omitempty"`
	// ProbeInterval is how often the no-load latency is re-measured; default
	// 60s. Refused with the fixed algorithm.
	ProbeInterval Duration `json:"probe_interval,omitempty"`
	// DeadlineFactor refuses at once a request whose caller stated a
	// deadline (Request.Deadline; sdk/httpgov and sdk/grpc read it from the
	// request) with less time left than this multiple of the route's recent
	// average latency (the limiter's last window) while the route has
	// requests in flight; default 1, at most 10. Critical requests, and any
	// request whose deadline has passed, are judged only on the deadline
	// itself; a small value such as 0.01 refuses only expired requests. A
	// route in shadow mode refuses nothing for deadlines.
	// Changing it keeps the learned limit.
	DeadlineFactor float64 `json:"deadline_factor,omitempty"`
}

// Shedding configures priority-aware load shedding under the concurrency
// limit. It needs Concurrency on the same route (Validate refuses it
// otherwise); a route with Concurrency and no Shedding sheds with these
// defaults.
type Shedding struct {
	// Reserved is the share of the limit only the critical class may use;
	// default 0.1.
	Reserved float64 `json:"reserved,omitempty"`
	// ConsistentUsers sheds the same users for a while (keyed by the priority
	// user header, or the user the application passes with the request) so
	// sessions are not half-served.
	ConsistentUsers bool `json:"consistent_users,omitempty"`
	// RotateEvery changes which users are shed first; default 1h. It needs
	// ConsistentUsers.
	RotateEvery Duration `json:"rotate_every,omitempty"`
}

// Queue is a short CoDel queue in front of the concurrency limit. It needs
// Concurrency on the same route (Validate refuses it otherwise). On a route
// in shadow mode the queue is kept but unused, since a dry run makes nothing
// wait; it works again when the route returns to enforce.
type Queue struct {
	// Target queueing delay; default 5ms.
	Target Duration `json:"target,omitempty"`
	// Interval over which the delay must exceed Target; default 100ms.
	Interval Duration `json:"interval,omitempty"`
	// MaxLength bounds the queue; default 128.
	MaxLength int `json:"max_length,omitempty"`
	// LIFO serves newest first while the queue is overloaded; default true.
	LIFO *bool `json:"lifo,omitempty"`
}

// WarmUp ramps a fresh instance's limits (the rate limits and the
// concurrency limit) up over Period, counted from the instance's start, so a
// warm-up added to a long-running instance has no effect. It needs at least
// one of RateLimit, KeyRateLimits or Concurrency on the same route.
type WarmUp struct {
	// InitialFraction of the limits at start; default 0.1.
	InitialFraction float64 `json:"initial_fraction,omitempty"`
	// Period of the ramp; required.
	Period Duration `json:"period"`
}

// Exempt lists traffic that bypasses a route's protection.
type Exempt struct {
	// Paths are exact paths (e.g. /healthz).
	Paths []string `json:"paths,omitempty"`
	// Callers are values of CallerHeader.
	Callers []string `json:"callers,omitempty"`
	// CallerHeader names the caller; default X-Caller. It needs Callers.
	CallerHeader string `json:"caller_header,omitempty"`
}

// Downstream is the outbound protection of one dependency.
type Downstream struct {
	Name string `json:"name"`
	// Mode is enforce (default) or shadow.
	Mode     Mode      `json:"mode,omitempty"`
	Timeout  Duration  `json:"timeout,omitempty"`
	Breaker  *Breaker  `json:"breaker,omitempty"`
	Retry    *Retry    `json:"retry,omitempty"`
	Bulkhead *Bulkhead `json:"bulkhead,omitempty"`
	Balancer *Balancer `json:"balancer,omitempty"`
}

// Breaker is a circuit breaker or, with Kind throttle, client-side adaptive
// throttling. A throttle uses only Window and K; a breaker uses every field
// but K. Validate refuses a field the kind does not use.
type Breaker struct {
	// Kind is breaker (default) or throttle.
	Kind string `json:"kind,omitempty"`
	// Window is the sliding window; default 10s.
	Window Duration `json:"window,omitempty"`
	// MinCalls in the window before the breaker may open; default 20.
	MinCalls int `json:"min_calls,omitempty"`
	// ErrorRatio that opens the breaker; default 0.5.
	ErrorRatio float64 `json:"error_ratio,omitempty"`
	// SlowCallRatio that opens the breaker; default 1 (off).
	SlowCallRatio float64 `json:"slow_call_ratio,omitempty"`
	// SlowCall is the duration above which a call counts as slow; default 1s.
	// Slow calls count only while SlowCallRatio is below 1.
	SlowCall Duration `json:"slow_call,omitempty"`
	// OpenBase is the first open period, doubled on every reopen up to OpenMax
	// (a breaker that closes and soon opens again keeps its longer period; each
	// OpenMax spent closed halves it); defaults 5s and 60s.
	OpenBase Duration `json:"open_base,omitempty"`
	OpenMax  Duration `json:"open_max,omitempty"`
	// HalfOpenProbes is how many trial calls decide half-open; default 3.
	HalfOpenProbes int `json:"half_open_probes,omitempty"`
	// K is the throttle multiplier (accepts x K); default 2.
	K float64 `json:"k,omitempty"`
}

// Retry configures retries with exponential back-off, full jitter and a budget.
type Retry struct {
	// MaxAttempts including the first; default 3.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// BaseBackoff and MaxBackoff; defaults 25ms and 1s.
	BaseBackoff Duration `json:"base_backoff,omitempty"`
	MaxBackoff  Duration `json:"max_backoff,omitempty"`
	// Budget is the largest share of requests that may be retries; default 0.2.
	Budget float64 `json:"budget,omitempty"`
	// MinPerSecond retries are always allowed; default 10.
	MinPerSecond float64 `json:"min_per_second,omitempty"`
}

// Bulkhead caps concurrent calls to a downstream.
type Bulkhead struct {
	// MaxConcurrent is the cap (the upper bound when adaptive); required.
	MaxConcurrent int `json:"max_concurrent"`
	// Adaptive lets a concurrency limiter move the cap below MaxConcurrent.
	Adaptive bool `json:"adaptive,omitempty"`
}

// Balancer configures P2C + peak-EWMA balancing across endpoints.
type Balancer struct {
	// Decay is the EWMA decay time; default 10s.
	Decay Duration `json:"decay,omitempty"`
	// SlowStart ramps the share of a new endpoint, or of one returning from
	// an ejection, over this period; default 30s.
	SlowStart Duration `json:"slow_start,omitempty"`
	// PanicThreshold is the share of endpoints, in [0, 1], whose breakers
	// must be closed for ejection to apply (a throttle rejecting a share of
	// calls leaves its endpoint counted as healthy): below it the balancer picks
	// among all endpoints, ejected ones included (panic mode), rather than
	// pile every call onto the few that are left or refuse every call.
	// Default (unset) 0.5; 0 turns panic mode off, so a fully ejected
	// downstream refuses calls. It has effect only with something that
	// ejects: a breaker of kind breaker or ConsecutiveFailures.
	PanicThreshold *float64 `json:"panic_threshold,omitempty"`
	// ConsecutiveFailures ejects an endpoint once this many of its calls
	// in a row have failed, as Envoy's consecutive_5xx; a success starts
	// the count again. 0 (default) turns it off.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// BaseEjectionTime is how long an endpoint is ejected for consecutive
	// failures the first time; the n-th ejection in a row lasts n times
	// as long, up to MaxEjectionTime, and each BaseEjectionTime back in
	// rotation forgets one. Default 30s. It has effect only with
	// ConsecutiveFailures.
	BaseEjectionTime Duration `json:"base_ejection_time,omitempty"`
	// MaxEjectionTime caps one consecutive-failure ejection; default 300s,
	// and not below BaseEjectionTime (or its default). It has effect only
	// with ConsecutiveFailures.
	MaxEjectionTime Duration `json:"max_ejection_time,omitempty"`
	// MaxEjectionPercent is the largest share of the endpoints, a whole
	// percentage from 1 to 100, ejected at once, by consecutive failures
	// and open breakers alike, as Envoy's max_ejection_percent: an
	// ejection over it does not happen and the endpoint keeps its share of
	// calls. At least one endpoint may always be ejected. Absent means
	// 10; 0 is refused (leave the field out for the default, or write 1
	// for "one endpoint at a time" on fleets under 100); 100 turns the
	// cap off. It has effect only with something that ejects: a breaker
	// of kind breaker or ConsecutiveFailures.
	MaxEjectionPercent *int `json:"max_ejection_percent,omitempty"`
}

// Duration is a time.Duration that encodes as a Go duration string ("150ms").
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON encodes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	// The text is digits, letters, '.', '-' and 'µ': nothing to escape.
	s := time.Duration(d).String()
	b := make([]byte, 0, len(s)+2)
	return append(append(append(b, '"'), s...), '"'), nil
}

// UnmarshalJSON accepts a duration string such as "150ms" or "2s". Any
// other value is refused with a *json.UnmarshalTypeError, so that
// encoding/json adds the path of the field and Decode names it.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b[1:n-1], '\\') < 0 {
		// A JSON string without escapes (the decoder has checked the rest):
		// its bytes are the text, no need to decode it again.
		if err := d.UnmarshalText(b[1 : n-1]); err != nil {
			return durationError(string(b))
		}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil || len(b) == 0 || b[0] != '"' {
		return durationError(jsonValue(b))
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return durationError(strconv.Quote(s))
	}
	*d = Duration(v)
	return nil
}

var durationType = reflect.TypeFor[Duration]()

// durationError refuses value (a quoted string, or the kind of another JSON
// value) as a Duration.
func durationError(value string) error {
	return &json.UnmarshalTypeError{Value: value, Type: durationType}
}

// jsonValue describes a JSON value that is not a string as encoding/json
// does: "number 5", "bool", "object", "array", "null".
func jsonValue(b []byte) string {
	switch b = bytes.TrimSpace(b); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	case b[0] == 'n':
		return "null"
	case len(b) > 32:
		return "number " + string(b[:32]) + "..."
	}
	return "number " + string(b)
}

// MarshalText lets YAML and other text encoders use the duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses a duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("invalid duration %q", string(b))
	}
	*d = Duration(v)
	return nil
}
