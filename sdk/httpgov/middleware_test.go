package httpgov_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

type fixedLimiter int

func (f fixedLimiter) Limit() int                    { return int(f) }
func (fixedLimiter) Observe(int64, int64, int, bool) {}

func newGovernor(t testing.TB, clk clock.Clock, reg prometheus.Registerer, routes ...rules.Route) *governor.Governor {
	t.Helper()
	opts := governor.DefaultOptions("web")
	opts.Clock = clk
	opts.Registerer = reg
	opts.Shards = 1
	opts.NewLimiter = func(cfg rules.Concurrency, _ clock.Clock) (governor.Limiter, error) {
		return fixedLimiter(cfg.Max), nil
	}
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Apply(&rules.Ruleset{Service: "web", Routes: routes}, 1); err != nil {
		t.Fatal(err)
	}
	return g
}

type body struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func TestRefusalsAnswerWithStatusRetryAfterAndJSON(t *testing.T) {
	clk := clock.NewFake(time.Now())
	rl := rules.Route{Name: "limited", Match: rules.Match{PathPrefix: "/limited"}, RateLimit: &rules.RateLimit{Rate: 0.2, Burst: 1}}
	full := rules.Route{Name: "full", Match: rules.Match{PathPrefix: "/full"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 1}}
	g := newGovernor(t, clk, nil, rl, full)
	block := make(chan struct{})
	entered := make(chan struct{})
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/full/slow" {
			close(entered)
			<-block
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	serve := func(path string, hdr map[string]string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := serve("/limited", nil); rec.Code != http.StatusNoContent {
		t.Fatalf("first request: %d", rec.Code)
	}
	done := make(chan struct{})
	go func() { serve("/full/slow", nil); close(done) }()
	<-entered

	tests := []struct {
		name, path string
		hdr        map[string]string
		status     int
		retry      string
		code       string
	}{
		{"rate limited", "/limited", nil, 429, "5", "rate_limited"},
		{"shed", "/full/x", map[string]string{"X-Traffic-Priority": "9"}, 429, "1", "shed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(tt.path, tt.hdr)
			if rec.Code != tt.status || rec.Header().Get("Retry-After") != tt.retry || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("got %d Retry-After %q Content-Type %q, want %d and %q JSON", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("Content-Type"), tt.status, tt.retry)
			}
			var b body
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Code != tt.code || b.Message == "" {
				t.Fatalf("body %q (%v), want code %s and a message", rec.Body.String(), err, tt.code)
			}
		})
	}
	close(block)
	<-done
	if rec := serve("/full/x", nil); rec.Code != http.StatusNoContent {
		t.Fatalf("after the slow request finished: %d, want 204", rec.Code)
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"queue timeout", &governor.Rejection{Reason: governor.ReasonQueueTimeout, RetryAfter: 2500 * time.Millisecond}, 429, "queue_timeout"},
		{"breaker rejection", &governor.Rejection{Reason: governor.ReasonBreakerOpen}, 503, "breaker_open"},
		{"breaker sentinel", fmt.Errorf("call db: %w", governor.ErrBreakerOpen), 503, "breaker_open"},
		{"outbound breaker", fmt.Errorf("call: %w", &outbound.RejectedError{Downstream: "db", Reason: breaker.ErrOpen}), 503, "breaker_open"},
		{"overload", &governor.Rejection{Reason: governor.ReasonOverload}, 429, "overload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if !httpgov.WriteError(rec, tt.err) {
				t.Fatal("WriteError did not recognise the refusal")
			}
			var b body
			if rec.Code != tt.status || json.Unmarshal(rec.Body.Bytes(), &b) != nil || b.Code != tt.code || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("got %d %q Retry-After %q, want %d code %s", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"), tt.status, tt.code)
			}
		})
	}
	rec := httptest.NewRecorder()
	if httpgov.WriteError(rec, errors.New("disk full")) || rec.Body.Len() != 0 {
		t.Fatal("WriteError answered an error that is not a refusal")
	}
	rec = httptest.NewRecorder()
	httpgov.WriteError(rec, &governor.Rejection{Reason: governor.ReasonRateLimited, RetryAfter: 2500 * time.Millisecond})
	if rec.Header().Get("Retry-After") != "3" {
		t.Fatalf("Retry-After %q for 2.5s, want 3", rec.Header().Get("Retry-After"))
	}
}

func TestAdmittedRequestsAreMeasured(t *testing.T) {
	clk := clock.NewFake(time.Now())
	reg := prometheus.NewRegistry()
	rt := rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/"}, Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 5}}
	g := newGovernor(t, clk, reg, rt)
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clk.Advance(40 * time.Millisecond)
		if g.InFlight("api") != 1 {
			t.Errorf("in flight %d inside the handler, want 1", g.InFlight("api"))
		}
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(500)
		case "/panic":
			panic(http.ErrAbortHandler)
		default:
			fmt.Fprint(w, "ok")
		}
	}))
	for _, p := range []string{"/ok", "/fail"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
	}
	func() {
		defer func() { _ = recover() }()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/panic", nil))
	}()
	if g.InFlight("api") != 0 {
		t.Fatalf("in flight %d after the requests, want 0 (a panic must release too)", g.InFlight("api"))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "governor_sdk_request_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			got[labels] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"class=critical route=api service=web ": 0,
		"class=core route=api service=web ":     2,
		"class=browse route=api service=web ":   0,
		"class=batch route=api service=web ":    0,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("request_errors_total = %v, want %v", got, want)
	}
}

// The outcome comes from the response's final status: an informational 1xx
// sent first (103 Early Hints) must not stand for it, or a 500 that follows
// counts as a success, hidden from the adaptive limit and the error metrics.
func TestOutcomeComesFromTheFinalStatus(t *testing.T) {
	tests := []struct {
		name  string
		write func(http.ResponseWriter)
		want  int
	}{
		{"early hints then 500", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusInternalServerError)
		}, http.StatusInternalServerError},
		{"early hints then a body", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = w.Write([]byte("ok"))
		}, http.StatusOK},
		{"continue then 503", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusContinue)
			w.WriteHeader(http.StatusServiceUnavailable)
		}, http.StatusServiceUnavailable},
		{"switching protocols", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusSwitchingProtocols)
		}, http.StatusSwitchingProtocols},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Now())
			rt := rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/"}, Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 5}}
			g := newGovernor(t, clk, nil, rt)
			var seen []int
			h := httpgov.Middleware(g, httpgov.Options{Clock: clk, Outcome: func(status int) governor.Outcome {
				seen = append(seen, status)
				return httpgov.DefaultOutcome(status)
			}})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Link", "</app.css>; rel=preload")
				tt.write(w)
			}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			if len(seen) != 1 || seen[0] != tt.want {
				t.Fatalf("outcome computed from statuses %v, want [%d]", seen, tt.want)
			}
		})
	}
}

func TestUngovernedAndCanceledRequests(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := newGovernor(t, clk, nil, rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/api"}})
	called := 0
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called++ }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/other", nil))
	if called != 1 {
		t.Fatal("a request outside every route did not reach the handler")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api", nil).WithContext(ctx))
	if called != 1 || rec.Code != 429 {
		t.Fatalf("a request whose client has gone was started (called %d, status %d)", called, rec.Code)
	}
}

func TestRemoteHost(t *testing.T) {
	for addr, want := range map[string]string{"10.1.2.3:5555": "10.1.2.3", "[::1]:80": "::1", "[fe80::1%eth0]:1": "fe80::1%eth0", "": ""} {
		r := &http.Request{RemoteAddr: addr}
		if got := httpgov.RemoteHost(r); got != want {
			t.Errorf("RemoteHost(%q) = %q, want %q", addr, got, want)
		}
	}
}

// BenchmarkMiddleware is the whole net/http path: admission on the coarse
// clock, two precise clock reads for the latency, the status recorder and the
// sharded metrics, around a handler that writes a status.
func BenchmarkMiddleware(b *testing.B) {
	reg := prometheus.NewRegistry()
	opts := governor.DefaultOptions("bench")
	opts.Registerer = reg
	g, err := governor.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	rs := &rules.Ruleset{Service: "bench", Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/api"},
		RateLimit:   &rules.RateLimit{Rate: 1e12, Burst: 1 << 30},
		Concurrency: &rules.Concurrency{Initial: 100},
	}}}
	if err := g.Apply(rs, 1); err != nil {
		b.Fatal(err)
	}
	h := httpgov.Middleware(g, httpgov.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/api/orders", nil)
		req.Header.Set("X-Traffic-Priority", "core")
		w := &discard{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// FuzzRemoteHost: the client address parser never panics and returns a part
// of RemoteAddr.
func FuzzRemoteHost(f *testing.F) {
	for _, s := range []string{"10.1.2.3:5555", "[::1]:80", "", ":", "[", "]:", "[]:1", "host"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		got := httpgov.RemoteHost(&http.Request{RemoteAddr: addr})
		if !strings.Contains(addr, got) {
			t.Fatalf("RemoteHost(%q) = %q, not part of the address", addr, got)
		}
	})
}

func TestDefaultOutcome(t *testing.T) {
	for status, want := range map[int]governor.Outcome{
		200: governor.Success, 404: governor.Success, 429: governor.Success,
		500: governor.Failure, 502: governor.Failure, 503: governor.Dropped, 504: governor.Dropped,
	} {
		if got := httpgov.DefaultOutcome(status); got != want {
			t.Errorf("DefaultOutcome(%d) = %d, want %d", status, got, want)
		}
	}
}

func TestWriterPassesThroughHijackAndReadFrom(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := newGovernor(t, clk, nil, rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/"}})
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("Hijack: %v", err)
				return
			}
			buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\nhello")
			buf.Flush()
			conn.Close()
			return
		}
		n, err := io.Copy(w, strings.NewReader("copied body"))
		if err != nil || n != 11 {
			t.Errorf("io.Copy: %d, %v", n, err)
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/copy")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "copied body" {
		t.Fatalf("body %q", b)
	}
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
	got, _ := io.ReadAll(conn)
	if !strings.Contains(string(got), "101 Switching Protocols") || !strings.HasSuffix(string(got), "hello") {
		t.Fatalf("hijacked connection answered %q", got)
	}
	until(t, func() bool { return g.InFlight("api") == 0 })
}

func until(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 1_000_000; i++ {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("condition never held")
}

// statusError is a downstream client's error that carries the status the
// downstream answered.
type statusError int

func (e statusError) Error() string   { return "downstream answered " + http.StatusText(int(e)) }
func (e statusError) StatusCode() int { return int(e) }

// WriteError answers only refusals: an error whose StatusCode is not a
// refusal's (429, 503) is the handler's to answer. It once answered a
// downstream's 404 or 500 as "a dependency is saturated; retry later", and
// panicked (invalid WriteHeader code) on a status of 0.
func TestWriteErrorLeavesOtherStatusesToTheHandler(t *testing.T) {
	for _, code := range []int{0, 200, 404, 500, 504} {
		rec := httptest.NewRecorder()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("status %d: WriteError panicked: %v", code, p)
				}
			}()
			if httpgov.WriteError(rec, fmt.Errorf("get user: %w", statusError(code))) || rec.Body.Len() != 0 {
				t.Errorf("status %d: WriteError answered %d %q", code, rec.Code, rec.Body.String())
			}
		}()
	}
	for code, want := range map[int]string{503: "unavailable", 429: "rate_limited"} {
		rec := httptest.NewRecorder()
		var b body
		if !httpgov.WriteError(rec, statusError(code)) || rec.Code != code || json.Unmarshal(rec.Body.Bytes(), &b) != nil || b.Code != want {
			t.Errorf("status %d: answered %d %q, want %d code %s", code, rec.Code, rec.Body.String(), code, want)
		}
	}
}

// outcomeStatuses serves one request through the middleware to w and
// returns the statuses the outcome was computed from.
func outcomeStatuses(t *testing.T, w http.ResponseWriter, handle func(http.ResponseWriter)) []int {
	t.Helper()
	clk := clock.NewFake(time.Now())
	rt := rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/"}, Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 5}}
	g := newGovernor(t, clk, nil, rt)
	var seen []int
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk, Outcome: func(status int) governor.Outcome {
		seen = append(seen, status)
		return httpgov.DefaultOutcome(status)
	}})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(w) }))
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	return seen
}

// A hijack that fails (HTTP/2, a writer that cannot) switches nothing: the
// error the handler then answers is the outcome, not a 101 success.
func TestFailedHijackIsNotASwitchOfProtocols(t *testing.T) {
	seen := outcomeStatuses(t, httptest.NewRecorder(), func(w http.ResponseWriter) {
		if _, _, err := http.NewResponseController(w).Hijack(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("Hijack on a recorder: %v, want ErrNotSupported", err)
		}
		http.Error(w, "cannot upgrade", http.StatusInternalServerError)
	})
	if len(seen) != 1 || seen[0] != http.StatusInternalServerError {
		t.Fatalf("outcome computed from %v, want [500]", seen)
	}
}

// unwrapOnly is another middleware's writer that offers the one underneath
// only through Unwrap.
type unwrapOnly struct{ http.ResponseWriter }

func (u unwrapOnly) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// A streaming handler's Flush reaches a flusher behind a writer that only
// unwraps, as http.ResponseController's would without the middleware.
func TestFlushReachesAWriterBehindUnwrap(t *testing.T) {
	rec := httptest.NewRecorder()
	seen := outcomeStatuses(t, unwrapOnly{rec}, func(w http.ResponseWriter) {
		_, _ = w.Write([]byte("data: 1\n\n"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
	})
	if !rec.Flushed || len(seen) != 1 || seen[0] != http.StatusOK {
		t.Fatalf("flushed %v, outcome from %v; want flushed, [200]", rec.Flushed, seen)
	}
}

// requestErrors sums governor_sdk_request_errors_total over every series.
func requestErrors(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "governor_sdk_request_errors_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// A client that goes away mid-request (closed connection, reset stream) is
// no failure of the server: the 502 a reverse proxy answers then, or its
// http.ErrAbortHandler panic, must not count as an error (which the engine's
// error-ratio guardrails read), as gRPC counts codes.Canceled. A server-side
// timeout, or the same status with the client still there, still counts.
func TestClientThatWentAwayIsNoFailureOfTheServer(t *testing.T) {
	tests := []struct {
		name       string
		clientGone bool
		serverEnd  bool // the request context ends by a server-side deadline
		write      func(http.ResponseWriter)
		wantErrors float64
	}{
		{"proxy answers 502 after the client left", true, false, func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }, 0},
		{"handler answers 500 after the client left", true, false, func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }, 0},
		{"proxy aborts after the client left", true, false, func(http.ResponseWriter) { panic(http.ErrAbortHandler) }, 0},
		{"handler panics after the client left", true, false, func(http.ResponseWriter) { panic("nil map") }, 1},
		{"502 with the client still there", false, false, func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }, 1},
		{"abort with the client still there", false, false, func(http.ResponseWriter) { panic(http.ErrAbortHandler) }, 1},
		{"500 after a server-side timeout", false, true, func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Now())
			reg := prometheus.NewRegistry()
			rt := rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/"}, Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 5}}
			g := newGovernor(t, clk, reg, rt)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			timer := &serverTimeout{Context: ctx}
			h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.clientGone {
					cancel()
				}
				if tt.serverEnd {
					timer.expired.Store(true)
				}
				tt.write(w)
			}))
			func() {
				defer func() { _ = recover() }()
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(timer))
			}()
			if g.InFlight("api") != 0 {
				t.Fatalf("in flight %d after the request, want 0", g.InFlight("api"))
			}
			if got := requestErrors(t, reg); got != tt.wantErrors {
				t.Fatalf("request_errors_total = %v, want %v", got, tt.wantErrors)
			}
		})
	}
}

// serverTimeout is a request context that a server-side timeout ends
// (context.DeadlineExceeded) once expired is set.
type serverTimeout struct {
	context.Context
	expired atomic.Bool
}

func (c *serverTimeout) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

type closeNotifying struct {
	http.ResponseWriter
	ch chan bool
}

func (c closeNotifying) CloseNotify() <-chan bool { return c.ch }

// Streaming frameworks still type-assert http.CloseNotifier on the writer
// (gin's Context.Stream does, and panics without it): the middleware's
// writer keeps it, passing through to the server's, or falling back to the
// request's context where the writer underneath has none.
func TestWriterKeepsCloseNotifyForStreamingFrameworks(t *testing.T) {
	clk := clock.NewFake(time.Now())
	rt := rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/"}, Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 5}}
	g := newGovernor(t, clk, nil, rt)
	var got <-chan bool
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn, ok := w.(interface{ CloseNotify() <-chan bool })
		if !ok {
			t.Fatal("the middleware's writer hides CloseNotify")
		}
		got = cn.CloseNotify()
	}))

	under := closeNotifying{httptest.NewRecorder(), make(chan bool, 1)}
	h.ServeHTTP(under, httptest.NewRequest("GET", "/", nil))
	under.ch <- true
	select {
	case <-got:
	default:
		t.Fatal("CloseNotify did not pass through to the server's writer")
	}

	ctx, cancel := context.WithCancel(context.Background())
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(ctx))
	select {
	case <-got:
		t.Fatal("CloseNotify fired while the client is still there")
	default:
	}
	cancel()
	select {
	case v := <-got:
		if !v {
			t.Fatal("CloseNotify sent false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CloseNotify did not fire when the client went away")
	}
}
