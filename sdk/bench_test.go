package governor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/rules"
)

// BenchmarkAdmit is the full admission path: overload throttle -> priority
// class -> route rate limit -> adaptive concurrency limit -> release with a
// latency sample, on the default coarse clock. It must not allocate. The
// throttle reads a source that reports no scheduling latency (idleSched), so
// a machine too busy to give the benchmark its CPUs cannot make it refuse;
// reading the runtime's instead costs one read per 100ms window.
func BenchmarkAdmit(b *testing.B) {
	opts := governor.DefaultOptions("bench")
	opts.Overload.Source = idleSched{}
	benchmarkAdmit(b, opts, "3", nil, "")
}

// BenchmarkAdmitCritical is BenchmarkAdmit for critical requests, whose
// admissions and releases the route's Reserve also counts.
func BenchmarkAdmitCritical(b *testing.B) {
	opts := governor.DefaultOptions("bench")
	opts.Overload.Source = idleSched{}
	benchmarkAdmit(b, opts, "critical", nil, "")
}

// idleSched is a scheduling latency histogram that never moves.
type idleSched struct{}

var idleCounts, idleBuckets = []uint64{0}, []float64{0, 1}

func (idleSched) ReadSchedLatency() ([]uint64, []float64) { return idleCounts, idleBuckets }

// BenchmarkAdmitNoThrottle is BenchmarkAdmit with the overload throttle
// off, for a side-by-side measure of what its check costs.
func BenchmarkAdmitNoThrottle(b *testing.B) {
	opts := governor.DefaultOptions("bench")
	opts.Overload.Disabled = true
	benchmarkAdmit(b, opts, "3", nil, "")
}

// BenchmarkAdmitTrustedPeer is BenchmarkAdmit under priority trust rules
// with 100 listed peers, for a request of an unlisted peer claiming
// critical, which is capped to core and counted.
func BenchmarkAdmitTrustedPeer(b *testing.B) {
	opts := governor.DefaultOptions("bench")
	opts.Overload.Source = idleSched{}
	trust := &rules.Trust{Max: rules.ClassCore, Peers: map[string]rules.Class{}}
	for i := range 100 {
		trust.Peers[fmt.Sprintf("spiffe://prod/ns/shop/sa/caller-%d", i)] = rules.ClassCritical
	}
	benchmarkAdmit(b, opts, "0", &rules.Priority{Trust: trust}, "spiffe://prod/ns/shop/sa/scraper")
}

func benchmarkAdmit(b *testing.B, opts governor.Options, priority string, prio *rules.Priority, peer string) {
	g, err := governor.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	rs := &rules.Ruleset{Service: "bench", Priority: prio, Routes: []rules.Route{{
		Name:        "api",
		Match:       rules.Match{PathPrefix: "/api"},
		RateLimit:   &rules.RateLimit{Rate: 1e12, Burst: 1 << 30},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmGradient, Initial: 100},
		Shedding:    &rules.Shedding{Reserved: 0.1},
	}}}
	if err := g.Apply(rs, 1); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const latency = 2 * time.Millisecond
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := governor.Request{Path: "/api/orders", Method: "GET", Priority: priority, Peer: peer}
		for pb.Next() {
			p, err := g.Admit(ctx, req)
			if err != nil {
				b.Error(err)
				return
			}
			p.Release(latency, governor.Success)
		}
	})
}

// BenchmarkAdmitShed is the refusal path under overload: the limit is full,
// every request is shed after trying each shard. Refusals must be cheap and
// must not allocate.
func BenchmarkAdmitShed(b *testing.B) {
	g, err := governor.New(governor.DefaultOptions("bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	rs := &rules.Ruleset{Service: "bench", Routes: []rules.Route{{
		Name:        "api",
		Match:       rules.Match{PathPrefix: "/api"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 64},
	}}}
	if err := g.Apply(rs, 1); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for {
		if _, err := g.Admit(ctx, governor.Request{Path: "/api", Priority: "critical"}); err != nil {
			break
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := governor.Request{Path: "/api/orders", Method: "GET", Priority: "batch"}
		for pb.Next() {
			if _, err := g.Admit(ctx, req); err == nil {
				b.Error("admitted beyond a full limit")
				return
			}
		}
	})
}

// BenchmarkAdmitKeyRateLimited is the refusal path of a per-key limit: one
// client far over its per-IP rate (one request a second), each of its
// other requests refused after the route's bucket and a shared per-key limit
// admitted it (and given those tokens back). Refusals must be cheap and must
// not allocate.
func BenchmarkAdmitKeyRateLimited(b *testing.B) {
	opts := governor.DefaultOptions("bench")
	opts.Overload.Source = idleSched{}
	g, err := governor.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	rs := &rules.Ruleset{Service: "bench", Routes: []rules.Route{{
		Name:          "api",
		Match:         rules.Match{PathPrefix: "/api"},
		RateLimit:     &rules.RateLimit{Rate: 1e12, Burst: 1 << 30},
		KeyRateLimits: []rules.KeyRateLimit{{Key: "header:X-Api-Key", Rate: 1e12, Burst: 1 << 30}, {Key: "ip", Rate: 1, Burst: 1}},
	}}}
	if err := g.Apply(rs, 1); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	h := mapHeader{"X-Api-Key": "shared"}
	if _, err := g.Admit(ctx, governor.Request{Path: "/api", ClientIP: "10.0.0.1", Header: h}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := governor.Request{Path: "/api/orders", Method: "GET", ClientIP: "10.0.0.1", Header: h}
		for pb.Next() {
			if p, err := g.Admit(ctx, req); err == nil {
				p.Release(time.Millisecond, governor.Success) // its one a second
			}
		}
	})
}
