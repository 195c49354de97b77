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
// while serving a retry (one attempt, no retries of its own).
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
		name string
		rt   http.RoundTripper
		url  string
		ctx  context.Context
	}{
		{"base", static{}, "http://api/", context.Background()},
		{"protected", rt, "http://api/", context.Background()},
		{"balanced", rt, "http://lb/", context.Background()},
		{"inbound-retry", rt, "http://api/", WithInboundAttempt(context.Background(), 2)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, _ := http.NewRequestWithContext(bc.ctx, http.MethodGet, bc.url, nil)
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
