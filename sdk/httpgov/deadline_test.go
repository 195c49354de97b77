package httpgov_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/rules"
)

// rttLimiter is a fixed limit whose last window's latency the test sets.
type rttLimiter struct {
	limit int
	rtt   time.Duration
}

func (l rttLimiter) Limit() int                    { return l.limit }
func (rttLimiter) Observe(int64, int64, int, bool) {}
func (l rttLimiter) Snapshot() limit.Snapshot {
	return limit.Snapshot{Limit: l.limit, SampleRTT: l.rtt}
}

// deadlineServer serves a route whose recent latency is 50ms on a fake clock
// and records the context deadline each admitted request ran with.
func deadlineServer(t *testing.T, opts httpgov.Options) (*clock.Fake, func(hdr map[string]string) (*httptest.ResponseRecorder, time.Time, bool)) {
	t.Helper()
	clk := clock.NewFake(time.Now().Add(time.Hour).Truncate(time.Millisecond))
	gopts := governor.DefaultOptions("web")
	gopts.Clock = clk
	gopts.Shards = 1
	gopts.NewLimiter = func(cfg rules.Concurrency, _ clock.Clock) (governor.Limiter, error) {
		return rttLimiter{limit: 10, rtt: 50 * time.Millisecond}, nil
	}
	g, err := governor.New(gopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	rs := &rules.Ruleset{Service: "web", Routes: []rules.Route{{Name: "api", Match: rules.Match{PathPrefix: "/"},
		Concurrency: &rules.Concurrency{}}}}
	if err := g.Apply(rs, 1); err != nil {
		t.Fatal(err)
	}
	// One request in flight: an idle route would admit any request to
	// re-measure its latency.
	hold, err := g.Admit(context.Background(), governor.Request{Path: "/hold"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Release(time.Millisecond, governor.Success) })
	opts.Clock = clk
	var seen time.Time
	var had bool
	h := httpgov.Middleware(g, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, had = r.Context().Deadline()
		w.WriteHeader(http.StatusNoContent)
	}))
	return clk, func(hdr map[string]string) (*httptest.ResponseRecorder, time.Time, bool) {
		seen, had = time.Time{}, false
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/x", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		h.ServeHTTP(rec, req)
		return rec, seen, had
	}
}

func TestMiddlewareDeadlines(t *testing.T) {
	clk, serve := deadlineServer(t, httpgov.Options{})
	now := clk.Now()
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	cases := []struct {
		name   string
		hdr    map[string]string
		status int
		want   time.Time // the admitted request's context deadline (zero: none)
	}{
		{"no header", nil, http.StatusNoContent, time.Time{}},
		{"absolute, passed", map[string]string{httpgov.HeaderDeadline: ms(now.Add(-time.Second))}, http.StatusGatewayTimeout, time.Time{}},
		{"absolute, below the recent latency", map[string]string{httpgov.HeaderDeadline: ms(now.Add(40 * time.Millisecond))}, http.StatusGatewayTimeout, time.Time{}},
		{"absolute, enough", map[string]string{httpgov.HeaderDeadline: ms(now.Add(time.Second))}, http.StatusNoContent, now.Add(time.Second)},
		{"envoy, below the recent latency", map[string]string{httpgov.HeaderEnvoyTimeout: "49"}, http.StatusGatewayTimeout, time.Time{}},
		{"envoy, enough", map[string]string{httpgov.HeaderEnvoyTimeout: "250"}, http.StatusNoContent, now.Add(250 * time.Millisecond)},
		{"envoy 0 means no timeout", map[string]string{httpgov.HeaderEnvoyTimeout: "0"}, http.StatusNoContent, time.Time{}},
		{"grpc, enough", map[string]string{httpgov.HeaderGRPCTimeout: "2S"}, http.StatusNoContent, now.Add(2 * time.Second)},
		{"grpc, too short", map[string]string{httpgov.HeaderGRPCTimeout: "10m"}, http.StatusGatewayTimeout, time.Time{}},
		{"earliest wins", map[string]string{httpgov.HeaderGRPCTimeout: "2S", httpgov.HeaderEnvoyTimeout: "300"}, http.StatusNoContent, now.Add(300 * time.Millisecond)},
		{"malformed is ignored", map[string]string{httpgov.HeaderDeadline: "soon", httpgov.HeaderEnvoyTimeout: "-5"}, http.StatusNoContent, time.Time{}},
		{"malformed skipped, valid one used", map[string]string{httpgov.HeaderDeadline: "soon", httpgov.HeaderEnvoyTimeout: "10"}, http.StatusGatewayTimeout, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, dl, had := serve(c.hdr)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d", rec.Code, c.status)
			}
			if c.status == http.StatusGatewayTimeout {
				var b body
				if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Code != "deadline" || rec.Header().Get("Retry-After") != "1" {
					t.Fatalf("refusal body %q (%v), Retry-After %q", rec.Body, err, rec.Header().Get("Retry-After"))
				}
				return
			}
			if had != !c.want.IsZero() || !dl.Equal(c.want) {
				t.Fatalf("handler's context deadline %v (%v), want %v", dl, had, c.want)
			}
		})
	}
}

func TestMiddlewareIgnoreDeadlines(t *testing.T) {
	clk, serve := deadlineServer(t, httpgov.Options{IgnoreDeadlines: true})
	rec, _, had := serve(map[string]string{httpgov.HeaderDeadline: strconv.FormatInt(clk.Now().Add(-time.Second).UnixMilli(), 10)})
	if rec.Code != http.StatusNoContent || had {
		t.Fatalf("status %d, context deadline %v; want the header ignored", rec.Code, had)
	}
}

func TestParseDeadline(t *testing.T) {
	now := time.Unix(1767225600, 0)
	h := http.Header{}
	if _, ok, err := httpgov.ParseDeadline(h, now); ok || err != nil {
		t.Fatalf("no headers: ok %v, err %v", ok, err)
	}
	h.Set(httpgov.HeaderDeadline, "1767225600123")
	h.Set(httpgov.HeaderGRPCTimeout, "1x")
	dl, ok, err := httpgov.ParseDeadline(h, now)
	if !ok || !dl.Equal(now.Add(123*time.Millisecond)) {
		t.Fatalf("deadline %v ok %v", dl, ok)
	}
	if err == nil || !strings.Contains(err.Error(), httpgov.HeaderGRPCTimeout) {
		t.Fatalf("err %v; want one naming %s", err, httpgov.HeaderGRPCTimeout)
	}
	for in, want := range map[string]time.Duration{"1H": time.Hour, "3M": 3 * time.Minute, "2S": 2 * time.Second,
		"250m": 250 * time.Millisecond, "7u": 7 * time.Microsecond, "99999999n": 99999999, "0m": 0} {
		if got, err := httpgov.GRPCTimeout(in); err != nil || got != want {
			t.Errorf("GRPCTimeout(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "123456789m", "1.5S", "-1S", "1 S", "10"} {
		if _, err := httpgov.GRPCTimeout(in); err == nil {
			t.Errorf("GRPCTimeout(%q) accepted", in)
		}
	}
}

// FuzzParseDeadline: the header parser never panics; a deadline it returns
// is one the headers state (absolute, or now plus a non-negative timeout),
// and a grpc-timeout it accepts prints back to the same digits and unit.
func FuzzParseDeadline(f *testing.F) {
	for _, s := range [][3]string{{"1767225600123", "250", "1S"}, {"", "0", "99999999n"}, {"x", "-1", "m"}, {"999999999999999", "999999999999", "99999999H"}} {
		f.Add(s[0], s[1], s[2])
	}
	now := time.Unix(1767225600, 0)
	f.Fuzz(func(t *testing.T, abs, envoy, grpc string) {
		h := http.Header{}
		for k, v := range map[string]string{httpgov.HeaderDeadline: abs, httpgov.HeaderEnvoyTimeout: envoy, httpgov.HeaderGRPCTimeout: grpc} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		dl, ok, err := httpgov.ParseDeadline(h, now)
		if !ok {
			if !dl.IsZero() {
				t.Fatalf("no deadline but %v", dl)
			}
			return
		}
		if ms, e := strconv.ParseInt(abs, 10, 64); !(e == nil && dl.Equal(time.UnixMilli(ms))) && dl.Before(now) {
			t.Fatalf("deadline %v before now without an absolute header (%q, %q, %q)", dl, abs, envoy, grpc)
		}
		if d, e := httpgov.GRPCTimeout(grpc); e == nil {
			unit := grpc[len(grpc)-1:]
			n := grpc[:len(grpc)-1]
			v, _ := strconv.ParseInt(n, 10, 64)
			if back, _ := httpgov.GRPCTimeout(strconv.FormatInt(v, 10) + unit); back != d {
				t.Fatalf("GRPCTimeout(%q) = %v, reprinted %v", grpc, d, back)
			}
		}
		if err != nil && !strings.Contains(err.Error(), "header ") {
			t.Fatalf("error %v does not name the header", err)
		}
	})
}

// BenchmarkMiddlewareDeadline is BenchmarkMiddleware with an Envoy timeout
// header: the parse, one clock read and the context carrying the deadline.
func BenchmarkMiddlewareDeadline(b *testing.B) { benchmarkDeadline(b, nil) }

// BenchmarkMiddlewareDeadlineWaited is BenchmarkMiddlewareDeadline with a
// handler that waits on its context (Done), as one calling a downstream
// with it does: the deadline's timer is made.
func BenchmarkMiddlewareDeadlineWaited(b *testing.B) { benchmarkDeadlineHandler(b, nil, true) }

// BenchmarkMiddlewareServerDeadline is BenchmarkMiddlewareDeadline on a
// request whose context already ends sooner (a server timeout): the
// request keeps it, so no context, timer or request copy is made.
func BenchmarkMiddlewareServerDeadline(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second) // before the 5s Envoy timeout, after the run
	defer cancel()
	benchmarkDeadline(b, ctx)
}

func benchmarkDeadline(b *testing.B, ctx context.Context) { benchmarkDeadlineHandler(b, ctx, false) }

// deadlineHandler is the middleware over a handler that answers 200,
// after reading its context's Done when wait is set.
func deadlineHandler(tb testing.TB, wait bool) http.Handler {
	opts := governor.DefaultOptions("bench")
	opts.Registerer = prometheus.NewRegistry()
	g, err := governor.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(g.Close)
	rs := &rules.Ruleset{Service: "bench", Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/api"},
		Concurrency: &rules.Concurrency{Initial: 100},
	}}}
	if err := g.Apply(rs, 1); err != nil {
		tb.Fatal(err)
	}
	return httpgov.Middleware(g, httpgov.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wait {
			select {
			case <-r.Context().Done():
				w.WriteHeader(http.StatusGatewayTimeout)
				return
			default:
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
}

func benchmarkDeadlineHandler(b *testing.B, ctx context.Context, wait bool) {
	h := deadlineHandler(b, wait)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/api/orders", nil)
		if ctx != nil {
			req = req.WithContext(ctx)
		}
		req.Header.Set(httpgov.HeaderEnvoyTimeout, "5000")
		w := &discard{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
}

// A request whose context already ends before the caller's deadline (a
// shorter server timeout) keeps its context; a later one gets the
// caller's deadline.
func TestMiddlewareKeepsAnEarlierServerDeadline(t *testing.T) {
	clk := clock.NewFake(time.Now().Add(time.Hour).Truncate(time.Millisecond))
	gopts := governor.DefaultOptions("web")
	gopts.Clock = clk
	g, err := governor.New(gopts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var got context.Context
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Context()
		w.WriteHeader(http.StatusNoContent)
	}))
	stated := clk.Now().Add(time.Second)
	for _, c := range []struct {
		name   string
		server time.Time
		want   time.Time
	}{
		{"server earlier", stated.Add(-time.Millisecond), stated.Add(-time.Millisecond)},
		{"server same", stated, stated},
		{"server later", stated.Add(time.Minute), stated},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithDeadline(context.Background(), c.server)
			defer cancel()
			req := httptest.NewRequest("GET", "/x", nil).WithContext(ctx)
			req.Header.Set(httpgov.HeaderDeadline, strconv.FormatInt(stated.UnixMilli(), 10))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				t.Fatalf("status %d", rec.Code)
			}
			if dl, ok := got.Deadline(); !ok || !dl.Equal(c.want) {
				t.Fatalf("handler's deadline %v (%v), want %v", dl, ok, c.want)
			}
			if kept := got == ctx; kept != !c.server.After(stated) {
				t.Fatalf("context kept: %v, want it kept only when the server's deadline is not later", kept)
			}
		})
	}
}
