package httpgov_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/transport"
)

func TestRetriedIsRecordedFromTheAttemptHeaders(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		ignore bool
		want   bool
	}{
		{"first attempt", nil, false, false},
		{"attempt 1 stated", map[string]string{transport.HeaderAttempt: "1"}, false, false},
		{"our retry", map[string]string{transport.HeaderAttempt: "2"}, false, true},
		{"Envoy's retry", map[string]string{transport.HeaderEnvoyAttempt: "3"}, false, true},
		{"malformed is no retry", map[string]string{transport.HeaderAttempt: "x"}, false, false},
		{"with a deadline too", map[string]string{transport.HeaderAttempt: "2", httpgov.HeaderEnvoyTimeout: "5000"}, false, true},
		{"ignored", map[string]string{transport.HeaderAttempt: "2"}, true, false},
	}
	clk := clock.NewFake(time.Now())
	g := newGovernor(t, clk, nil, rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/api"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 10}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/api", "/unmatched"} {
				var got bool
				var deadline bool
				h := httpgov.Middleware(g, httpgov.Options{Clock: clk, IgnoreAttempts: tt.ignore})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					got = httpgov.Retried(r.Context())
					_, deadline = r.Context().Deadline()
				}))
				req := httptest.NewRequest("GET", path, nil)
				for k, v := range tt.header {
					req.Header.Set(k, v)
				}
				h.ServeHTTP(httptest.NewRecorder(), req)
				if got != tt.want {
					t.Fatalf("%s: Retried = %v, want %v", path, got, tt.want)
				}
				if _, ok := tt.header[httpgov.HeaderEnvoyTimeout]; ok && !deadline {
					t.Fatalf("%s: the deadline was lost", path)
				}
			}
		})
	}
}

func TestOverloadRefusalsSayDoNotRetry(t *testing.T) {
	for reason, want := range map[governor.Reason]bool{
		governor.ReasonShed:         true,
		governor.ReasonOverload:     true,
		governor.ReasonQueueTimeout: true,
		governor.ReasonRateLimited:  false,
		governor.ReasonBreakerOpen:  false,
		governor.ReasonDeadline:     false,
	} {
		rec := httptest.NewRecorder()
		httpgov.WriteError(rec, &governor.Rejection{Reason: reason, RetryAfter: time.Second})
		if got := rec.Header().Get(transport.HeaderOverloaded) == "true"; got != want {
			t.Errorf("%s: %s present %v, want %v", reason, transport.HeaderOverloaded, got, want)
		}
		if rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", reason)
		}
	}
}

// TestRetriesDoNotMultiplyAcrossHops runs A -> B -> C over loopback, every
// hop retrying up to 3 attempts, with C failing every request.
func TestRetriesDoNotMultiplyAcrossHops(t *testing.T) {
	tests := []struct {
		name        string
		shed        bool // C sheds (WriteError) instead of a plain 503
		allowNested bool
		want        int64 // requests C sees for one of A's
	}{
		{"nested retries allowed multiply", false, true, 9},
		{"B makes one attempt for A's retries", false, false, 3 + 1 + 1},
		{"C's shedding is retried by nobody", true, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var atC atomic.Int64
			c := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				atC.Add(1)
				if tt.shed {
					httpgov.WriteError(w, &governor.Rejection{Reason: governor.ReasonShed, RetryAfter: time.Second})
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer c.Close()
			clk := clock.NewFake(time.Now())
			toC := chainClient(t, clk, c.URL, func(o *transport.Options) { o.AllowNestedRetries = tt.allowNested })
			g := newGovernor(t, clk, nil)
			b := httptest.NewServer(httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, c.URL, nil)
				resp, err := toC.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				w.WriteHeader(http.StatusServiceUnavailable) // the dependency failed
			})))
			defer b.Close()
			toB := chainClient(t, clk, b.URL, nil)
			resp, err := toB.Get(b.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := atC.Load(); got != tt.want {
				t.Fatalf("C saw %d requests for one of A's, want %d", got, tt.want)
			}
		})
	}
}

// chainClient returns a client retrying up to 3 attempts to the server at
// url, with zero back-off on clk.
func chainClient(t *testing.T, clk clock.Clock, url string, mod func(*transport.Options)) *http.Client {
	t.Helper()
	set, err := outbound.New(outbound.Options{Clock: clk, Float64: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(url, "http://")
	if err := set.Apply([]rules.Downstream{{Name: host, Retry: &rules.Retry{MaxAttempts: 3, MinPerSecond: 100}}}); err != nil {
		t.Fatal(err)
	}
	opts := transport.Options{Set: set}
	if mod != nil {
		mod(&opts)
	}
	rt, err := transport.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: rt}
}

// BenchmarkMiddlewareAttempt is BenchmarkMiddleware for requests carrying
// attempt headers: none, Envoy's first attempt ("1", sent on every request
// of a route with include_attempt_count_in_request), a retry (recorded on
// the context: one allocation) and a malformed count.
func BenchmarkMiddlewareAttempt(b *testing.B) {
	for _, bc := range []struct {
		name   string
		header map[string]string
	}{
		{"none", nil},
		{"envoy-first", map[string]string{transport.HeaderEnvoyAttempt: "1"}},
		{"retry", map[string]string{transport.HeaderAttempt: "2"}},
		{"malformed", map[string]string{transport.HeaderAttempt: "two"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			clk := clock.NewCoarse(0)
			defer clk.Close()
			g := newGovernor(b, clk, nil, rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/api"},
				RateLimit:   &rules.RateLimit{Rate: 1e12, Burst: 1 << 30},
				Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 1 << 20}})
			h := httpgov.Middleware(g, httpgov.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
			}))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest("GET", "/api/orders", nil)
				for k, v := range bc.header {
					req.Header.Set(k, v)
				}
				w := &discard{h: http.Header{}}
				for pb.Next() {
					h.ServeHTTP(w, req)
				}
			})
		})
	}
}
