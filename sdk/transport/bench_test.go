package transport

import (
	"context"
	"io"
	"net/http"
	"testing"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

type static struct{}

func (static) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// BenchmarkRoundTripper measures what the protection adds to a round trip:
// "base" calls a base that answers at once, "protected" goes through breaker,
// bulkhead, retry budget and metrics on a coarse clock, "balanced" also picks
// one of three endpoints, "inbound-retry" is "protected" for a request made
// while serving a retry (one attempt, no retries of its own), "forwarded"
// is "protected" for a request carrying the dozen headers a handler
// forwarding its inbound headers passes on, none of them an attempt header
// under any spelling the transport looks up.
func BenchmarkRoundTripper(b *testing.B) {
	coarse := clock.NewCoarse(0)
	defer coarse.Close()
	ds := rules.Downstream{Name: "api", Breaker: &rules.Breaker{}, Retry: &rules.Retry{},
		Bulkhead: &rules.Bulkhead{MaxConcurrent: 1 << 20}}
	set, _ := outbound.New(outbound.Options{Clock: coarse})
	_ = set.Apply([]rules.Downstream{ds, func() rules.Downstream { d := ds; d.Name = "lb"; return d }()})
	set.SetEndpoints("lb", []string{"a:80", "b:80", "c:80"})
	rt, _ := New(Options{Set: set, Base: static{}})
	for _, bc := range []struct {
		name   string
		rt     http.RoundTripper
		url    string
		ctx    context.Context
		header http.Header
	}{
		{"base", static{}, "http://api/", context.Background(), nil},
		{"protected", rt, "http://api/", context.Background(), nil},
		{"balanced", rt, "http://lb/", context.Background(), nil},
		{"inbound-retry", rt, "http://api/", WithInboundAttempt(context.Background(), 2), nil},
		{"forwarded", rt, "http://api/", context.Background(), forwardedHeader()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, _ := http.NewRequestWithContext(bc.ctx, http.MethodGet, bc.url, nil)
			if bc.header != nil {
				req.Header = bc.header
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := bc.rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}

// forwardedHeader is what a handler forwarding its inbound headers sends
// on: a dozen canonical headers, no attempt header.
func forwardedHeader() http.Header {
	return http.Header{
		"Accept":            {"application/json"},
		"Accept-Encoding":   {"gzip"},
		"Authorization":     {"Bearer abcdefghijklmnopqrstuvwxyz"},
		"Baggage":           {"tenant=acme"},
		"Content-Type":      {"application/json"},
		"Traceparent":       {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Tracestate":        {"vendor=value"},
		"User-Agent":        {"shop/1.0"},
		"X-Forwarded-For":   {"203.0.113.7"},
		"X-Forwarded-Proto": {"https"},
		"X-Real-Ip":         {"203.0.113.7"},
		"X-Request-Id":      {"f81d4fae-7dec-11d0-a765-00a0c91e6bf6"},
	}
}

// BenchmarkInboundAttemptOf reads the attempt headers of a first attempt
// (none), of a retry (ours), of one stated in both, and of a malformed one
// (which allocates its error).
func BenchmarkInboundAttemptOf(b *testing.B) {
	for _, bc := range []struct {
		name string
		h    http.Header
	}{
		{"none", http.Header{}},
		{"ours", http.Header{HeaderAttempt: {"2"}}},
		{"both", http.Header{HeaderAttempt: {"2"}, HeaderEnvoyAttempt: {"3"}}},
		{"malformed", http.Header{HeaderAttempt: {"x"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if n, _ := InboundAttemptOf(bc.h); n < 1 {
						b.Fatal(n)
					}
				}
			})
		})
	}
}
