package transport_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/httpgov"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/transport"
)

// TestOpenBreakerBecomes503 wires the pieces as a service does: a Governor
// whose ruleset protects a downstream, a handler calling it through the
// transport, and the middleware answering the handler's refusal. Once the
// downstream's breaker opens the service answers 503 with a JSON body
// without calling the downstream.
func TestOpenBreakerBecomes503(t *testing.T) {
	downstreamCalls := 0
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		downstreamCalls++
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer down.Close()

	g, err := governor.New(governor.Options{Service: "shop", Clock: clock.NewFake(clock.Real{}.Now())})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rs := governor.DefaultRuleset("shop")
	rs.Downstreams = []rules.Downstream{{Name: "inventory", Breaker: &rules.Breaker{MinCalls: 2}}}
	if err := g.Apply(rs, 1); err != nil {
		t.Fatal(err)
	}
	rt, err := transport.New(transport.Options{Set: g.Outbound(), Downstream: func(*http.Request) string { return "inventory" }})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: rt}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := client.Get(down.URL)
		if httpgov.WriteError(w, err) {
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})
	srv := httptest.NewServer(httpgov.Middleware(g, httpgov.Options{})(handler))
	defer srv.Close()

	var codes []int
	var body struct{ Code, Message string }
	for range 3 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusServiceUnavailable {
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
		}
		resp.Body.Close()
	}
	if codes[0] != 500 || codes[1] != 500 || codes[2] != 503 || body.Code != "breaker_open" || downstreamCalls != 2 {
		t.Fatalf("codes %v, body %+v, downstream calls %d; want 500 500 503 breaker_open after 2 calls",
			codes, body, downstreamCalls)
	}
	if !strings.Contains(body.Message, "unavailable") {
		t.Fatalf("message %q", body.Message)
	}
}
