// Package transport protects a service's outbound HTTP calls: an
// http.RoundTripper that puts every request through its downstream's
// outbound protection (sdk/outbound): bulkhead, circuit breaker, balancer
// across the downstream's endpoints, and retries with back-off, Retry-After
// and the retry budget.
//
// A request whose call is refused (breaker open, bulkhead full, every
// endpoint ejected) fails with an *outbound.RejectedError, which the
// http.Client wraps in a *url.Error: errors.Is(err, breaker.ErrOpen) and
// errors.As(err, &rejected) see through it, and rejected.StatusCode() is 503
// for a server that passes the refusal on. An Options.Fallback can answer
// such requests instead.
//
// Retries only happen for requests that are safe to repeat: idempotent
// methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or requests carrying an
// Idempotency-Key header, unless Options.AllowNonIdempotent says otherwise,
// and only when the body can be replayed (http.Request.GetBody). By default
// transport errors and the statuses 502, 503 and 504 are retried, and a 429
// only when it says when to come back (Retry-After), honouring the response's
// Retry-After; Options.Retryable decides this on its own, apart from
// Options.Failed (a 429 is retried but is no failure of the downstream),
// within the limits on nested retries and overloaded responses below.
//
// A caller that cancels its request (context.Canceled) says nothing about the
// downstream: the attempt it abandons counts as neither a success nor a
// failure for the downstream's breaker, the endpoint's breaker and the
// adaptive bulkhead, and feeds no latency sample to the endpoint's estimate.
// It gives back what it took: the bulkhead slot, the endpoint's in-flight
// count and any half-open probe slot, which the next call can take at once.
// So does an attempt cut short by a panic (in Base, in Options.Failed or in a
// state-change hook) before the panic goes on up.
//
// The bulkhead slot and the endpoint's in-flight count are released when the
// response headers arrive; the latency recorded is the time to headers.
//
// With endpoints, an overload drop (a timeout, a 429 or a 503) counts as a
// failure of the endpoint that answered it, whatever Options.Failed says: an
// instance that sheds answers fast, and counted as a success it would look
// the fastest to the balancer and draw the very traffic it sheds. So a 429
// feeds the endpoint's estimate as a failure and, under breaker rules, its
// breaker (it may be ejected while it sheds), but not the downstream's
// breaker.
//
// Retries do not multiply across hops. Each retry is sent with
// HeaderAttempt ("2", "3", ...), and the first attempt without it; attempt
// headers on the caller's request (HeaderAttempt or HeaderEnvoyAttempt,
// under the canonical or the lower-case key, from a handler forwarding its
// inbound headers) are not passed on. A request made while serving a
// request that was itself a retry (sdk/httpgov records it on the request
// context; see InboundAttempt) gets one attempt and no retries, unless
// Options.AllowNestedRetries. And a response that says "overloaded; don't
// retry" (HeaderOverloaded, which sdk/httpgov sets when it sheds, or Envoy's
// HeaderEnvoyOverloaded) is never retried, whatever the budget. A 429 from a
// rate limit carries no such header and is retried after its Retry-After as
// before. The retries not made are counted in governor_sdk_retries_total
// (suppressed_overloaded, suppressed_inbound_retry) and reported to
// Options.RetrySuppressed.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/retry"
)

// ErrInvalidOptions wraps errors from New.
var ErrInvalidOptions = errors.New("transport: invalid options")

// Options configure a RoundTripper.
type Options struct {
	// Set holds the downstreams' protection; required.
	Set *outbound.Set
	// Base makes the actual requests; default http.DefaultTransport.
	Base http.RoundTripper
	// Downstream names the downstream of a request; default its URL host
	// (host:port as written). Requests to a downstream without rules pass
	// through unprotected.
	Downstream func(*http.Request) string
	// Failed says whether an outcome counts as a failure for the breaker;
	// default DefaultFailed: a transport error other than context.Canceled,
	// or a 5xx status.
	Failed func(*http.Response, error) bool
	// Retryable says whether an attempt may be retried, whatever Failed
	// says of it; default DefaultRetryable: a transport error (unless the
	// request was canceled), a 502, 503 or 504 status, or a 429 with a
	// Retry-After.
	Retryable func(*http.Response, error) bool
	// AllowNonIdempotent lets requests with other methods be retried too.
	AllowNonIdempotent bool
	// Fallback answers a request whose call was refused; nil returns the
	// refusal as the error.
	Fallback func(req *http.Request, err error) (*http.Response, error)
	// AllowNestedRetries lets a request made while serving a request that
	// is itself a retry (InboundAttempt(ctx) > 1, recorded by sdk/httpgov
	// from HeaderAttempt) be retried too. By default such a request gets
	// one attempt, so retries do not multiply across hops.
	AllowNestedRetries bool
	// RetrySuppressed, if set, is called with the downstream's name and
	// the reason (ReasonInboundRetry or ReasonOverloaded) each time a
	// retry that Retryable allowed is not made. It runs on the request's
	// goroutine and must not block.
	RetrySuppressed func(downstream, reason string)
}

// Reasons a retry is suppressed (Options.RetrySuppressed).
const (
	// ReasonInboundRetry: the request was made while serving a request
	// that is itself a retry, and Options.AllowNestedRetries is off.
	ReasonInboundRetry = "inbound_retry"
	// ReasonOverloaded: the response carries HeaderOverloaded or
	// HeaderEnvoyOverloaded ("overloaded; don't retry").
	ReasonOverloaded = "overloaded"
)

// RoundTripper is a protected http.RoundTripper. It is safe for concurrent
// use.
type RoundTripper struct {
	opts Options
}

var _ http.RoundTripper = (*RoundTripper)(nil)

// New returns a RoundTripper over opts.Base.
func New(opts Options) (*RoundTripper, error) {
	if opts.Set == nil {
		return nil, fmt.Errorf("%w: Set is required", ErrInvalidOptions)
	}
	if opts.Base == nil {
		opts.Base = http.DefaultTransport
	}
	if opts.Downstream == nil {
		opts.Downstream = func(r *http.Request) string { return r.URL.Host }
	}
	if opts.Failed == nil {
		opts.Failed = DefaultFailed
	}
	if opts.Retryable == nil {
		opts.Retryable = DefaultRetryable
	}
	return &RoundTripper{opts: opts}, nil
}

// DefaultFailed counts transport errors and 5xx statuses as failures, but
// not context.Canceled: the caller went away, the downstream did not fail.
func DefaultFailed(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled)
	}
	return resp.StatusCode >= 500
}

// DefaultRetryable retries transport errors and the statuses 502, 503 and
// 504, and a 429 that carries a valid Retry-After. A 429 without one is not
// retried: a rate limiter or quota that does not say when to come back is
// not asked again a few milliseconds of back-off later, which would only
// spend its quota and the retry budget. (A Governor server sends a
// Retry-After with every 429 it answers.)
func DefaultRetryable(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled)
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusTooManyRequests:
		// Only validity matters here: the wait is read in RoundTrip.
		_, ok := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Time{})
		return ok
	}
	return false
}

// Idempotent reports whether req may be sent twice: an idempotent method or
// an Idempotency-Key header.
func Idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

// dropped reports whether an outcome is an overload drop (it cuts an
// adaptive bulkhead): a timeout, 429 or 503.
func dropped(resp *http.Response, err error) bool {
	if err != nil {
		return errors.Is(err, context.DeadlineExceeded)
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
}

// RoundTrip sends req under its downstream's protection.
func (t *RoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	d := t.opts.Set.Get(t.opts.Downstream(req))
	if d == nil {
		return t.opts.Base.RoundTrip(req)
	}
	ctx := req.Context()
	clk := d.Clock()
	d.Request(clk.Nanotime())
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	canRetry := d.Retrier() != nil && replayable && (t.opts.AllowNonIdempotent || Idempotent(req))
	nested := canRetry && !t.opts.AllowNestedRetries && InboundAttempt(ctx) > 1

	for attempt := 1; ; attempt++ {
		var body io.ReadCloser
		if attempt > 1 && req.GetBody != nil {
			var err error
			if body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("transport: replaying the body of %s: %w", d.Name(), err)
			}
		}
		areq := withAttempt(req, attempt)
		if body != nil {
			areq.Body = body
		}
		start := clk.Nanotime()
		resp, err := t.attempt(d, areq)
		if err != nil && refused(err) {
			if t.opts.Fallback != nil {
				return t.opts.Fallback(req, err)
			}
			return nil, err
		}
		// Retryable alone decides: a 429 is retried though it is no
		// failure of the downstream.
		if !canRetry || !t.opts.Retryable(resp, err) {
			return resp, err
		}
		if overloaded(resp) {
			t.suppressed(d, ReasonOverloaded)
			return resp, err
		}
		if nested {
			t.suppressed(d, ReasonInboundRetry)
			return resp, err
		}
		var after time.Duration
		if resp != nil {
			if v := resp.Header.Get("Retry-After"); v != "" {
				after, _ = retry.ParseRetryAfter(v, clk.Now())
			}
		}
		took := time.Duration(clk.Nanotime() - start)
		wait, nerr := d.NextRetry(ctx, retry.Failure{Attempts: attempt, RetryAfter: after, Took: took})
		if nerr != nil {
			return resp, err // the last attempt's outcome
		}
		if resp != nil {
			drain(resp.Body)
		}
		if werr := d.Wait(ctx, wait); werr != nil {
			return nil, werr
		}
	}
}

// suppressed counts a retry not made (governor_sdk_retries_total) and
// reports it to Options.RetrySuppressed.
func (t *RoundTripper) suppressed(d *outbound.Downstream, reason string) {
	d.SuppressedRetry(reason == ReasonOverloaded)
	if t.opts.RetrySuppressed != nil {
		t.opts.RetrySuppressed(d.Name(), reason)
	}
}

// attempt makes one protected attempt. It never modifies req: a request sent
// to an endpoint or with a timeout is a shallow copy.
func (t *RoundTripper) attempt(d *outbound.Downstream, req *http.Request) (*http.Response, error) {
	caller := req.Context()
	clk := d.Clock()
	now := clk.Nanotime()
	call, err := d.Begin(now)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	bal := d.Balancer()
	var pick balancerPick
	if bal.Len() > 0 {
		p, perr := bal.Pick(now)
		if perr != nil {
			call.Cancel()
			closeBody(req)
			return nil, d.Refuse(perr)
		}
		pick = balancerPick{p: p, ok: true}
		c := &readdressed{r: *req, u: *req.URL} // one allocation for both copies
		c.u.Host = p.Addr()
		c.r.URL = &c.u
		req = &c.r
	}
	var cancel context.CancelFunc
	// Until the outcome is settled, a panic in Base or in Options.Failed
	// (which a server's recovery middleware survives) gives back what the
	// attempt took, as a cancelled call does, and goes on up: otherwise
	// each such panic kept a bulkhead slot and an endpoint's in-flight
	// count for good, until the bulkhead refused every call.
	settled := false
	defer func() {
		if settled {
			return
		}
		call.Cancel()
		if pick.ok {
			bal.Cancel(pick.p)
		}
		if cancel != nil {
			cancel()
		}
	}()
	if to := d.Timeout(); to > 0 {
		var ctx context.Context
		ctx, cancel = context.WithTimeout(req.Context(), to)
		req = req.WithContext(ctx)
	}
	resp, err := t.opts.Base.RoundTrip(req)
	end := clk.Nanotime()
	if err != nil && errors.Is(caller.Err(), context.Canceled) {
		// The caller went away: the outcome says nothing of the
		// downstream. Both cancels give back what the attempt took (the
		// bulkhead slot, the in-flight count, half-open probe slots)
		// without a success, a failure or a latency sample. A per-attempt
		// timeout ends the attempt's own context, not the caller's, and
		// is a failure below.
		settled = true
		call.Cancel()
		if pick.ok {
			bal.Cancel(pick.p)
		}
	} else {
		failed := t.opts.Failed(resp, err)
		drop := dropped(resp, err)
		settled = true
		if pick.ok {
			// An overload drop (a 429 too) is a failure of the
			// endpoint, though not of the downstream: an instance
			// shedding with fast 429s would otherwise look the
			// fastest and draw the traffic it sheds.
			//
			// Deferred: it still runs when a state-change hook panics
			// in End, and End still runs when one panics in Done.
			defer bal.Done(pick.p, end, failed || drop)
		}
		call.End(end, failed, drop)
	}
	if cancel != nil {
		if resp != nil && resp.Body != nil {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		} else {
			cancel()
		}
	}
	return resp, err
}

// refused reports whether err is a refusal by the protection.
func refused(err error) bool {
	var rej *outbound.RejectedError
	return errors.As(err, &rej)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// drain reads a little of a body it discards, so the connection can be
// reused, and closes it.
func drain(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	_ = body.Close()
}

// cancelBody ends an attempt's timeout context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
