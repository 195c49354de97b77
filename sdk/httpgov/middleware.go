// Package httpgov is the net/http server middleware of the Governor SDK.
//
// Middleware admits every request through a governor.Governor before the
// handler runs. A refused request gets a fast answer without reaching the
// handler: 429 Too Many Requests (shed, rate limited, queue timeout) or 503
// Service Unavailable (an open circuit breaker), with a Retry-After header in
// whole seconds and a JSON body {"code": ..., "message": ...}. An admitted
// request releases its permit when the handler returns, with the latency
// measured on a precise clock and an outcome taken from the status code, so
// the adaptive limit learns from every request. A request whose client went
// away before the handler returned (its context canceled) counts as a
// success whatever status followed, as codes.Canceled does in gRPC: a
// proxy's 502 or an http.ErrAbortHandler panic then is no failure of the
// server. A stream (a hijacked connection such as a WebSocket, or a flushed
// text/event-stream response) holds its slot while open but is released
// unmeasured (governor.Permit.ReleaseUnmeasured): how long it stayed open is
// no service time. Give long-lived streams a route of their own, so they do
// not hold the slots of the short requests' limit. The writer the handler gets keeps http.Flusher, http.Hijacker,
// io.ReaderFrom, CloseNotify and Unwrap (for http.ResponseController).
//
// A request that states its deadline (HeaderDeadline, HeaderEnvoyTimeout or
// HeaderGRPCTimeout; see ParseDeadline) is refused at once with 504 Gateway
// Timeout and code "deadline" when the deadline has passed or, for a class
// below critical on a route with requests in flight, leaves less than the
// route's recent average latency (rules.Concurrency.DeadlineFactor times
// it; see Governor.Admit), and counted under the outcome "deadline"; an
// admitted one runs
// with the deadline on its context, so the handler's own calls give up in
// time; the context's timer is made only when something waits on it (Done),
// so a handler that does not costs one allocation. Requests without such a
// header cost nothing extra.
//
// A request that is itself a retry (transport.HeaderAttempt or Envoy's
// transport.HeaderEnvoyAttempt above 1) runs with that recorded on its
// context (Retried): the handler's calls through sdk/transport then make one
// attempt each, so retries do not multiply across hops. First attempts carry
// no such header and cost nothing extra. Options.IgnoreAttempts turns this
// off.
//
// Handlers that call downstreams can answer their own refusals the same way
// with WriteError.
package httpgov

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/internal/attempt"
	"governor.dev/governor/sdk/transport"
)

// Options configure the middleware. The zero value is usable.
type Options struct {
	// Clock measures latency; default clock.Real (two precise reads per
	// request).
	Clock clock.Clock
	// ClientIP returns the client address that keys "ip" rate limits;
	// default: the host part of RemoteAddr. Services behind a proxy supply
	// their own (for example from X-Forwarded-For, if they trust it).
	ClientIP func(*http.Request) string
	// Outcome maps a response status to an outcome; default: 503 and 504
	// are Dropped (overload), other 5xx Failure, anything else Success.
	// It is overridden to Success when the client went away first.
	Outcome func(status int) governor.Outcome
	// Peer returns the caller's transport-authenticated identity
	// (governor.Request.Peer), which the rules' priority trust
	// (rules.Trust) caps classes by; it is called only while the rules
	// set a trust. Default: governor.PeerIdentity of the request's verified
	// client certificate (r.TLS). Behind a sidecar that terminates mTLS,
	// supply one that reads what the sidecar, and only it, sets (for
	// example Envoy's X-Forwarded-Client-Cert, if every request passes
	// through the sidecar).
	Peer func(*http.Request) string
	// IgnoreDeadlines leaves the deadline headers unread: no request is
	// refused for its deadline and none gets one on its context.
	IgnoreDeadlines bool
	// IgnoreAttempts leaves the attempt headers (transport.HeaderAttempt,
	// transport.HeaderEnvoyAttempt) unread: no request is recorded as a
	// retry, and the handler's calls through sdk/transport retry as if
	// every request were a first attempt.
	IgnoreAttempts bool
}

// Middleware returns net/http middleware that admits requests through g.
func Middleware(g *governor.Governor, opts Options) func(http.Handler) http.Handler {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.ClientIP == nil {
		opts.ClientIP = RemoteHost
	}
	if opts.Outcome == nil {
		opts.Outcome = DefaultOutcome
	}
	if opts.Peer == nil {
		opts.Peer = TLSPeer
	}
	return func(next http.Handler) http.Handler {
		return &handler{g: g, next: next, opts: opts}
	}
}

type handler struct {
	g    *governor.Governor
	next http.Handler
	opts Options
}

var writers = sync.Pool{New: func() any { return new(statusWriter) }}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	client := r.Context() // before a deadline of the caller's wraps it
	var deadline time.Time
	if !h.opts.IgnoreDeadlines && hasDeadline(r.Header) {
		deadline, _, _ = ParseDeadline(r.Header, h.opts.Clock.Now())
	}
	var peer string
	if h.g.TrustsPeers() {
		peer = h.opts.Peer(r)
	}
	permit, err := h.g.Admit(r.Context(), governor.Request{
		Path:     r.URL.Path,
		Method:   r.Method,
		ClientIP: h.opts.ClientIP(r),
		Peer:     peer,
		Header:   r.Header,
		Deadline: deadline,
	})
	if err != nil {
		WriteError(w, err)
		return
	}
	if !deadline.IsZero() && !hasEarlierDeadline(r.Context(), deadline) {
		var ctx *deadlineCtx
		r, ctx = withDeadline(r, deadline)
		defer ctx.cancel()
	}
	if !h.opts.IgnoreAttempts {
		if n := inboundAttempt(r.Header); n > 1 {
			r = r.WithContext(transport.WithInboundAttempt(r.Context(), n))
		}
	}
	if !permit.Admitted() {
		h.next.ServeHTTP(w, r)
		return
	}
	sw := writers.Get().(*statusWriter)
	sw.ResponseWriter, sw.status, sw.ctx, sw.hijacked, sw.flushed = w, 0, client, false, false
	start := h.opts.Clock.Nanotime()
	defer func() {
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		if p := recover(); p != nil {
			// http.ErrAbortHandler is how a handler (httputil.ReverseProxy
			// among them) gives up on a response it can no longer send:
			// no failure of the server when its client has gone.
			o := governor.Failure
			if p == http.ErrAbortHandler && clientGone(client) {
				o = governor.Success
			}
			sw.release(permit, time.Duration(h.opts.Clock.Nanotime()-start), o)
			panic(p)
		}
		o := h.opts.Outcome(status)
		if o != governor.Success && clientGone(client) {
			// The client went away: the status that followed (a proxy's
			// 502, a handler's 500 for "context canceled") says nothing of
			// the server, as in gRPC (DefaultOutcome there).
			o = governor.Success
		}
		sw.release(permit, time.Duration(h.opts.Clock.Nanotime()-start), o)
	}()
	h.next.ServeHTTP(sw, r)
}

// inboundAttempt returns the attempt number h states in
// transport.HeaderAttempt or transport.HeaderEnvoyAttempt (attempt.Inbound:
// the larger, 1 when none or only malformed ones). It reads each header
// once and allocates nothing, malformed values included.
func inboundAttempt(h http.Header) int {
	return attempt.Inbound(h[transport.HeaderAttempt], h[transport.HeaderEnvoyAttempt])
}

// Retried reports whether the server request ctx belongs to is itself a
// retry: its caller stated an attempt above 1 in transport.HeaderAttempt or
// transport.HeaderEnvoyAttempt (transport.InboundAttempt returns the number). The
// handler's calls through sdk/transport then make one attempt each, unless
// its transport.Options.AllowNestedRetries.
func Retried(ctx context.Context) bool { return transport.InboundAttempt(ctx) > 1 }

// TLSPeer is the default Options.Peer: governor.PeerIdentity of the
// request's verified client certificate, "" without one.
func TLSPeer(r *http.Request) string { return governor.PeerIdentity(r.TLS) }

// clientGone reports whether the request's own context (before any deadline
// of the caller's) was canceled: net/http cancels it when the client closes
// the connection or resets the stream. A server-side timeout ends it with
// context.DeadlineExceeded instead, and keeps its outcome.
func clientGone(ctx context.Context) bool { return ctx.Err() == context.Canceled }

// hasEarlierDeadline reports whether ctx already ends no later than
// deadline (a server timeout shorter than the caller's): the request then
// keeps its context, which saves the timer, the derived context and the
// request copy.
func hasEarlierDeadline(ctx context.Context, deadline time.Time) bool {
	d, ok := ctx.Deadline()
	return ok && !d.After(deadline)
}

// DefaultOutcome maps 503 and 504 to Dropped, other 5xx to Failure and
// everything else to Success.
func DefaultOutcome(status int) governor.Outcome {
	switch {
	case status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		return governor.Dropped
	case status >= 500:
		return governor.Failure
	}
	return governor.Success
}

// RemoteHost returns the host part of r.RemoteAddr without allocating.
func RemoteHost(r *http.Request) string {
	a := r.RemoteAddr
	if i := strings.LastIndexByte(a, ':'); i > 0 && !strings.HasSuffix(a, "]") {
		a = a[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
}

// statusWriter records the status code the handler writes: the final one,
// not an informational 1xx sent before it.
type statusWriter struct {
	http.ResponseWriter
	status   int
	ctx      context.Context // the request's, for CloseNotify
	hijacked bool            // a successful Hijack (a WebSocket)
	flushed  bool            // a successful Flush
}

// release releases permit and puts w back in the pool. A stream (a
// hijacked connection, or a flushed text/event-stream response) is released
// unmeasured: how long it stayed open is no service time, and as a latency
// sample it would cut the limit of every request sharing its route.
func (w *statusWriter) release(permit governor.Permit, latency time.Duration, o governor.Outcome) {
	if w.hijacked || w.flushed && isEventStream(w.ResponseWriter.Header()) {
		permit.ReleaseUnmeasured(latency, o)
	} else {
		permit.Release(latency, o)
	}
	w.ResponseWriter, w.ctx = nil, nil
	writers.Put(w)
}

// isEventStream reports whether h declares a server-sent event stream.
func isEventStream(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}

func (w *statusWriter) WriteHeader(code int) {
	// A 1xx such as 103 Early Hints precedes the real status; 101 Switching
	// Protocols is the last status of its connection.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes through to the underlying writer when it can flush.
func (w *statusWriter) Flush() { _ = w.FlushError() }

// FlushError flushes the underlying writer, reached as
// http.ResponseController reaches it (through writers that only Unwrap);
// it fails with http.ErrNotSupported where that cannot flush.
func (w *statusWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if err == nil {
		w.flushed = true
		if w.status == 0 {
			w.status = http.StatusOK
		}
	}
	return err
}

// Hijack passes through to the underlying writer (for WebSockets and other
// protocol switches); it fails with http.ErrNotSupported where that cannot.
// Only a successful hijack stands for the status (101): a handler whose
// hijack failed answers with its own.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, buf, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
		if w.status == 0 {
			w.status = http.StatusSwitchingProtocols
		}
	}
	return conn, buf, err
}

// ReadFrom keeps the underlying writer's io.ReaderFrom fast path (sendfile).
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{w.ResponseWriter}, r)
}

// writerOnly hides everything but Write, so io.Copy does not loop back into
// ReadFrom.
type writerOnly struct{ io.Writer }

// closeNotifier is http.CloseNotifier, deprecated but still called by
// frameworks (gin's Context.Stream type-asserts it on the writer it wraps).
type closeNotifier interface{ CloseNotify() <-chan bool }

// CloseNotify passes through to the first writer down the Unwrap chain that
// has it; where none does, the channel receives true when the request's
// context ends (the client went away, or the handler returned).
func (w *statusWriter) CloseNotify() <-chan bool {
	for rw := w.ResponseWriter; rw != nil; {
		if cn, ok := rw.(closeNotifier); ok {
			return cn.CloseNotify()
		}
		u, ok := rw.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		rw = u.Unwrap()
	}
	ch := make(chan bool, 1)
	if w.ctx != nil {
		context.AfterFunc(w.ctx, func() { ch <- true })
	}
	return ch
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodies are the JSON bodies of refusals, by code.
var bodies = map[string][]byte{
	"shed":          []byte(`{"code":"shed","message":"the service is overloaded; retry later"}` + "\n"),
	"rate_limited":  []byte(`{"code":"rate_limited","message":"too many requests; retry later"}` + "\n"),
	"queue_timeout": []byte(`{"code":"queue_timeout","message":"the request waited too long for capacity; retry later"}` + "\n"),
	"breaker_open":  []byte(`{"code":"breaker_open","message":"a dependency is unavailable; retry later"}` + "\n"),
	"unavailable":   []byte(`{"code":"unavailable","message":"a dependency is saturated; retry later"}` + "\n"),
	"deadline":      []byte(`{"code":"deadline","message":"the request's deadline had passed or could not be met; it was not started"}` + "\n"),
	"overload":      []byte(`{"code":"overload","message":"the service's CPU is saturated and sheds lower-priority requests; retry later"}` + "\n"),
}

// statusCoder is implemented by errors that know their HTTP status, such as
// sdk/outbound's refusals (503).
type statusCoder interface{ StatusCode() int }

// WriteError answers a Governor refusal: 429 for shed, rate-limited and
// queue-timeout rejections, 503 for an open breaker (ErrBreakerOpen, or an
// error whose StatusCode method reports 503, such as an outbound refusal;
// one that reports 429 is answered 429 rate_limited), 504 for a deadline
// that had passed or could not be met, each with a Retry-After header and a
// JSON body {"code", "message"} where code is shed, rate_limited,
// queue_timeout, breaker_open, unavailable, deadline or overload. The codes
// shed, overload and queue_timeout, the server's own overload, also carry
// transport.HeaderOverloaded: true, which sdk/transport (and a caller that
// honours "overloaded; don't retry") does not retry; a rate limit's 429 is
// retried after its Retry-After. It reports
// false, writing nothing, for errors that are not refusals, among them an
// error whose StatusCode reports any other status (a downstream's 404 or
// 500 is the handler's to answer).
func WriteError(w http.ResponseWriter, err error) bool {
	var rej *governor.Rejection
	code, status, retry := "", 0, int64(1)
	var sc statusCoder
	switch {
	case errors.As(err, &rej):
		code, retry = rej.Reason.String(), rej.RetryAfterSeconds()
		status = http.StatusTooManyRequests
		switch rej.Reason {
		case governor.ReasonBreakerOpen:
			status = http.StatusServiceUnavailable
		case governor.ReasonDeadline:
			status = http.StatusGatewayTimeout
		}
	case errors.Is(err, governor.ErrBreakerOpen):
		code, status = "breaker_open", http.StatusServiceUnavailable
	case errors.As(err, &sc) && (sc.StatusCode() == http.StatusServiceUnavailable || sc.StatusCode() == http.StatusTooManyRequests):
		status = sc.StatusCode()
		switch {
		case errors.Is(err, breaker.ErrOpen):
			code = "breaker_open"
		case status == http.StatusTooManyRequests:
			code = "rate_limited"
		default:
			code = "unavailable"
		}
	default:
		return false
	}
	body := bodies[code]
	if body == nil {
		body = bodies["shed"]
	}
	hdr := w.Header()
	if rej != nil && rej.Reason.Overloaded() {
		hdr.Set(transport.HeaderOverloaded, "true")
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Retry-After", strconv.FormatInt(retry, 10))
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return true
}
