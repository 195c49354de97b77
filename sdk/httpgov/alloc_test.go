//go:build !race

// The allocation tests: the race detector allocates, so they are built
// without it only (make test runs them in its own step, -run DoesNotAllocate).

package httpgov_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/transport"
)

// TestAttemptHeaderParsingDoesNotAllocate: reading the attempt headers, well
// formed or not, adds no allocation to a request: a malformed count is
// skipped, not turned into an error nobody reads.
func TestAttemptHeaderParsingDoesNotAllocate(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := newGovernor(t, clk, nil, rules.Route{Name: "api", Match: rules.Match{PathPrefix: "/api"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 10}})
	h := httpgov.Middleware(g, httpgov.Options{Clock: clk})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	allocs := func(header map[string]string) float64 {
		req := httptest.NewRequest("GET", "/api", nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		w := &discard{h: http.Header{}}
		return testing.AllocsPerRun(100, func() { h.ServeHTTP(w, req) })
	}
	base := allocs(nil)
	for _, header := range []map[string]string{
		{transport.HeaderEnvoyAttempt: "1"},
		{transport.HeaderAttempt: "x"},
		{transport.HeaderEnvoyAttempt: "1234567"},
		{transport.HeaderAttempt: "0", transport.HeaderEnvoyAttempt: "-1"},
	} {
		if a := allocs(header); a != base {
			t.Errorf("%v: %v allocations per request, want %v as without attempt headers", header, a, base)
		}
	}
}

// TestMiddlewareDeadlineDoesNotAllocate: a request with a caller deadline whose
// handler does not wait on its context costs one allocation (the request
// copy and its context, together); with an earlier server deadline, or
// without a deadline, none.
func TestMiddlewareDeadlineDoesNotAllocate(t *testing.T) {
	h := deadlineHandler(t, false)
	server, cancel := context.WithTimeout(context.Background(), time.Hour) // before the 2h Envoy timeout
	defer cancel()
	for _, tt := range []struct {
		name   string
		ctx    context.Context
		header string
		want   float64
	}{
		{"caller deadline", context.Background(), "7200000", 1},
		{"earlier server deadline", server, "7200000", 0},
		{"no deadline", context.Background(), "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api/orders", nil).WithContext(tt.ctx)
			if tt.header != "" {
				req.Header.Set(httpgov.HeaderEnvoyTimeout, tt.header)
			}
			w := &discard{h: http.Header{}}
			if got := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, req) }); got > tt.want {
				t.Fatalf("%v allocations per request, want at most %v", got, tt.want)
			}
		})
	}
}
