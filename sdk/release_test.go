package governor_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/rules"
)

// TestReleaseFeedsEveryLimiterKind checks that Release reaches the limiter
// whichever way it is called: the default gradient directly, Little's law
// through its shard-hinted Observe. Each limiter must have decided windows
// from the released latencies.
func TestReleaseFeedsEveryLimiterKind(t *testing.T) {
	for _, alg := range []string{rules.AlgorithmGradient, rules.AlgorithmLittle} {
		t.Run(alg, func(t *testing.T) {
			clk := clock.NewFake(fakeStart)
			var made limit.Limiter
			opts := governor.DefaultOptions("svc")
			opts.Clock = clk
			opts.Defaults = &rules.Ruleset{Service: "svc"}
			opts.NewLimiter = func(cfg rules.Concurrency, c clock.Clock) (governor.Limiter, error) {
				l, err := limit.New(cfg, c, limit.WithWindow(100*time.Millisecond), limit.WithMinSamples(5))
				made = l
				return l, err
			}
			g, err := governor.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			r := route("api", "/api")
			r.Concurrency = &rules.Concurrency{Algorithm: alg, Initial: 50}
			if err := g.Apply(ruleset(r), 1); err != nil {
				t.Fatal(err)
			}
			const latency = 3 * time.Millisecond
			for range 200 {
				p, err := g.Admit(context.Background(), governor.Request{Path: "/api/x"})
				if err != nil {
					t.Fatal(err)
				}
				clk.Advance(latency)
				p.Release(latency, governor.Success)
			}
			s := made.(limit.Inspector).Snapshot()
			if s.Windows == 0 || s.SampleRTT < latency-time.Microsecond || s.SampleRTT > latency+time.Microsecond {
				t.Fatalf("the limiter did not see the releases: %+v", s)
			}
		})
	}
}

// TestRefusalsReachTheLimiter: when the limit is full and the requests in
// flight stall (none finishes), the refusals tell the limiter, which halves
// its limit before any of them finishes.
func TestRefusalsReachTheLimiter(t *testing.T) {
	clk := clock.NewFake(fakeStart)
	var made limit.Limiter
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Defaults = &rules.Ruleset{Service: "svc"}
	opts.NewLimiter = func(cfg rules.Concurrency, c clock.Clock) (governor.Limiter, error) {
		l, err := limit.New(cfg, c)
		made = l
		return l, err
	}
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := route("api", "/api")
	r.Concurrency = &rules.Concurrency{Initial: 20}
	if err := g.Apply(ruleset(r), 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A second of normal traffic: 10 requests in flight at 5 ms.
	for range 200 {
		var ps []governor.Permit
		for range 10 {
			p, err := g.Admit(ctx, governor.Request{Path: "/api", Priority: "critical"})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		clk.Advance(5 * time.Millisecond)
		for _, p := range ps {
			p.Release(5*time.Millisecond, governor.Success)
		}
	}
	before, _ := g.Limit("api")
	// Then the route fills up and nothing finishes.
	var stuck []governor.Permit
	for range 500 {
		if p, err := g.Admit(ctx, governor.Request{Path: "/api", Priority: "critical"}); err == nil {
			stuck = append(stuck, p)
		}
		clk.Advance(time.Millisecond)
	}
	after, _ := g.Limit("api")
	if s := made.(limit.Inspector).Snapshot(); s.Stalls != 1 || after > (before+1)/2 {
		t.Fatalf("limit %d -> %d with %d stall cuts after 0.5 s without any request finishing; want halved once",
			before, after, s.Stalls)
	}
	for _, p := range stuck {
		p.Release(500*time.Millisecond, governor.Success)
	}
}

// TestReleaseUnmeasuredGivesNoLatencySample: a stream held open for ten
// minutes and released unmeasured gives its slot back and counts its
// failure, but is no latency sample: the limiter and the duration histogram
// see the unary request alone.
func TestReleaseUnmeasuredGivesNoLatencySample(t *testing.T) {
	reg := prometheus.NewRegistry()
	lims := &limiters{}
	clk := clock.NewFake(fakeStart)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Registerer = reg
	opts.NewLimiter = lims.factory
	opts.Shards = 1
	opts.Defaults = &rules.Ruleset{Service: "svc"}
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := route("api", "/api")
	r.Concurrency = &rules.Concurrency{Initial: 2}
	if err := g.Apply(ruleset(r), 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stream, err := g.Admit(ctx, governor.Request{Path: "/api/watch", Priority: "critical"})
	if err != nil {
		t.Fatal(err)
	}
	unary, err := g.Admit(ctx, governor.Request{Path: "/api/x", Priority: "critical"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Millisecond)
	unary.Release(3*time.Millisecond, governor.Success)
	clk.Advance(10 * time.Minute)
	stream.ReleaseUnmeasured(10*time.Minute+3*time.Millisecond, governor.Failure)
	governor.Permit{}.ReleaseUnmeasured(time.Second, governor.Failure) // the zero Permit releases nothing

	if n := lims.made[len(lims.made)-1].samples.Load(); n != 1 {
		t.Fatalf("limiter got %d samples, want 1 (the unary request's only)", n)
	}
	if got := g.InFlight("api"); got != 0 {
		t.Fatalf("in flight after both releases: %d, want 0", got)
	}
	m := gather(t, reg)
	if v := m.value("governor_sdk_request_errors_total", map[string]string{"route": "api", "class": "critical"}); v != 1 {
		t.Errorf("critical errors %v, want 1 (the stream's failure)", v)
	}
	h := m.metric("governor_sdk_request_duration_seconds", map[string]string{"route": "api"})
	if h == nil || h.GetHistogram().GetSampleCount() != 1 || h.GetHistogram().GetSampleSum() > 1 {
		t.Fatalf("duration histogram %v, want the unary request's 3 ms alone", h.GetHistogram())
	}
	for range 2 { // the limit of 2 is free again
		if _, err := g.Admit(ctx, governor.Request{Path: "/api/x", Priority: "critical"}); err != nil {
			t.Fatalf("slot not given back: %v", err)
		}
	}
}
