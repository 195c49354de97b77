package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"governor.dev/governor/sdk/internal/attempt"
)

// Retry amplification across hops.
//
// With A -> B -> C and every layer retrying up to three attempts, an
// overloaded C would see up to nine requests for each of A's. The transport
// therefore marks every retry it sends with HeaderAttempt (2, 3, ...; a first
// attempt carries none, as gRPC's grpc-previous-rpc-attempts is absent on a
// first attempt), the server middleware (sdk/httpgov) records on the request
// context that the request is itself a retry (WithInboundAttempt), and a
// request made under such a context gets one attempt here, no retries of its
// own: only the layer that saw the failure retries, as the SRE book's
// "Handling Overload" recommends. In the example, C sees at most
// 3 + 1 + 1 = 5 requests for each of A's instead of 9, and 3 when C's own
// refusals say it is overloaded (HeaderOverloaded). Options.AllowNestedRetries
// turns this off; Options.RetrySuppressed counts it.

// HeaderAttempt numbers the attempts of one request at one hop, as Envoy's
// x-envoy-attempt-count does: the transport sends "2" on the first retry,
// "3" on the second, and nothing on the first attempt (an absent header is
// attempt 1). A header of that name on the caller's request (a proxy
// forwarding its inbound headers), under its canonical or its lower-case
// key, is replaced, each hop stating its own count.
const HeaderAttempt = "X-Request-Attempt"

// HeaderEnvoyAttempt is Envoy's attempt count, set on upstream requests when
// the route asks for it (include_attempt_count_in_request). Servers read it
// like HeaderAttempt, so a retry made by the caller's Envoy counts as a
// retry. The transport never sends it: one on the caller's request (a
// handler forwarding its inbound headers), under its canonical or its
// lower-case key, is removed, as it states the attempt of the inbound
// request, not of this one, and would make the downstream take a first
// attempt for a retry. An Envoy in between sets its own.
const HeaderEnvoyAttempt = "X-Envoy-Attempt-Count"

// ParseAttempt parses an attempt count as HeaderAttempt and
// HeaderEnvoyAttempt carry it: 1 to 6 ASCII digits, at least 1. It
// allocates only for its error.
func ParseAttempt(v string) (int, error) {
	n, ok := attempt.Parse(v)
	if ok {
		return n, nil
	}
	if len(v) > 0 && len(v) <= attempt.MaxDigits && strings.Trim(v, "0123456789") == "" {
		return 0, fmt.Errorf("%q: attempts count from 1", v)
	}
	return 0, fmt.Errorf("%q: want 1 to %d digits", v, attempt.MaxDigits)
}

// InboundAttemptOf returns the attempt number a request states in
// HeaderAttempt or HeaderEnvoyAttempt, the larger if both, and 1 when it
// states none, as sdk/httpgov reads them (attempt.Inbound); a malformed
// value is skipped (the other still counts) and reported in err, which names
// the header (both, when both are malformed). Each value is parsed once, and
// only the error allocates.
func InboundAttemptOf(h http.Header) (n int, err error) {
	ours, envoys := h[HeaderAttempt], h[HeaderEnvoyAttempt]
	n, badOurs, badEnvoys := attempt.InboundChecked(ours, envoys)
	if badOurs {
		_, e := ParseAttempt(ours[0])
		err = fmt.Errorf("transport: header %s: %w", HeaderAttempt, e)
	}
	if badEnvoys {
		_, e := ParseAttempt(envoys[0])
		err = errors.Join(err, fmt.Errorf("transport: header %s: %w", HeaderEnvoyAttempt, e))
	}
	return n, err
}

type inboundAttemptKey struct{}

// WithInboundAttempt returns ctx recording that the server request it serves
// is attempt n of its caller (n > 1: the request is itself a retry). The
// transport makes one attempt for requests under such a context, unless
// Options.AllowNestedRetries. sdk/httpgov's middleware calls it; other
// servers (a gRPC interceptor reading grpc-previous-rpc-attempts, a message
// consumer seeing a redelivery) can too. An n below 2 returns ctx as it is.
func WithInboundAttempt(ctx context.Context, n int) context.Context {
	if n < 2 {
		return ctx
	}
	return context.WithValue(ctx, inboundAttemptKey{}, n)
}

// InboundAttempt returns the attempt number WithInboundAttempt recorded on
// ctx, 1 when none was: above 1, the server request ctx belongs to is itself
// a retry.
func InboundAttempt(ctx context.Context) int {
	if n, ok := ctx.Value(inboundAttemptKey{}).(int); ok {
		return n
	}
	return 1
}

// withAttempt returns the request to send as attempt n: for a retry a clone
// carrying HeaderAttempt n, for a first attempt req itself, or a clone
// without the attempt headers when the caller's request carries one (a
// handler forwarding its inbound headers: they state the inbound request's
// attempt, not this one's). HeaderEnvoyAttempt is never sent. The first
// attempt of a request without them, the common case, allocates nothing.
//
// net/http sends a header key as the map holds it and the server
// canonicalises it, so a count forwarded under a non-canonical key
// (req.Header["x-envoy-attempt-count"] = v, a map literal, keys copied from
// gRPC metadata) reaches the downstream all the same. A clone therefore
// loses the attempt headers under every spelling of their names
// (attemptKey), and a first attempt is cloned when the request carries one
// under its canonical or its lower-case spelling, the two in use. Other
// spellings (all capitals, mixed case) on a first attempt are sent as they
// are: finding them would take a pass over every key of every request,
// several times the cost of the four lookups for a dozen headers.
func withAttempt(req *http.Request, n int) *http.Request {
	if n <= 1 && !carriesAttempt(req.Header) {
		return req
	}
	c := req.Clone(req.Context())
	for k := range c.Header {
		if attemptKey(k) {
			delete(c.Header, k)
		}
	}
	if n <= 1 {
		return c
	}
	if c.Header == nil {
		c.Header = make(http.Header, 1)
	}
	c.Header[HeaderAttempt] = []string{attempt.Format(n)}
	return c
}

// The lower-case spellings of the attempt headers, as HTTP/2, gRPC
// metadata and Envoy's documentation write them.
const (
	lowerAttempt      = "x-request-attempt"
	lowerEnvoyAttempt = "x-envoy-attempt-count"
)

// carriesAttempt reports whether h holds HeaderAttempt or
// HeaderEnvoyAttempt under its canonical or its lower-case spelling. It
// allocates nothing.
func carriesAttempt(h http.Header) bool {
	if len(h) == 0 {
		return false
	}
	return has(h, HeaderAttempt) || has(h, HeaderEnvoyAttempt) || has(h, lowerAttempt) || has(h, lowerEnvoyAttempt)
}

func has(h http.Header, k string) bool {
	_, ok := h[k]
	return ok
}

// attemptKey reports whether the header key k is HeaderAttempt or
// HeaderEnvoyAttempt in any spelling a server reads as one of them (it
// canonicalises ASCII letters only). Called on clones only, whose keys are
// canonical but for forwarded ones: canonicalising a canonical key
// allocates nothing.
func attemptKey(k string) bool {
	c := http.CanonicalHeaderKey(k)
	return c == HeaderAttempt || c == HeaderEnvoyAttempt
}

// HeaderOverloaded on a response says "overloaded; don't retry": the server
// shed the request to protect itself (sdk/httpgov sets it, with the value
// "true", on its shed, overload and queue-timeout refusals, not on rate
// limits). The transport never retries a response that carries it, nor one
// carrying Envoy's HeaderEnvoyOverloaded, whatever Options.Retryable and the
// retry budget say.
const HeaderOverloaded = "X-Governor-Overloaded"

// HeaderEnvoyOverloaded is Envoy's "overloaded" response header (a request
// dropped by its circuit breaking or overload manager), which Envoy's own
// retries do not retry either.
const HeaderEnvoyOverloaded = "X-Envoy-Overloaded"

// overloaded reports whether resp says not to retry it.
func overloaded(resp *http.Response) bool {
	return resp != nil && (len(resp.Header[HeaderOverloaded]) > 0 || len(resp.Header[HeaderEnvoyOverloaded]) > 0)
}
