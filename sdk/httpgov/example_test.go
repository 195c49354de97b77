package httpgov_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/transport"
)

// Wrap a service's handler: refused requests get 429 with Retry-After and a
// JSON body before the handler runs.
func ExampleMiddleware() {
	g, _ := governor.New(governor.DefaultOptions("shop"))
	defer g.Close()
	_ = g.Apply(&rules.Ruleset{Service: "shop", Routes: []rules.Route{{
		Name:      "api",
		Match:     rules.Match{PathPrefix: "/api/"},
		RateLimit: &rules.RateLimit{Rate: 0.5, Burst: 1},
	}}}, 1)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	h := httpgov.Middleware(g, httpgov.Options{})(api)

	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/cart", nil))
		fmt.Println(rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	// Output:
	// 200  ok
	// 429 2 {"code":"rate_limited","message":"too many requests; retry later"}
}

// A request its caller retried (X-Request-Attempt: 2, which sdk/transport
// sends on its first retry) is marked on its context: the handler's own
// calls through sdk/transport then make one attempt each, so retries do not
// multiply across hops.
func ExampleRetried() {
	g, _ := governor.New(governor.DefaultOptions("shop"))
	defer g.Close()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("retried:", httpgov.Retried(r.Context()))
	})
	h := httpgov.Middleware(g, httpgov.Options{})(api)

	first := httptest.NewRequest("GET", "/api/cart", nil)
	h.ServeHTTP(httptest.NewRecorder(), first)
	retry := httptest.NewRequest("GET", "/api/cart", nil)
	retry.Header.Set(transport.HeaderAttempt, "2")
	h.ServeHTTP(httptest.NewRecorder(), retry)
	// Output:
	// retried: false
	// retried: true
}
