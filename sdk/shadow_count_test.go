package governor

import (
	"context"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// schedSource is a cumulative scheduling latency histogram the test moves.
type schedSource struct {
	counts  []uint64
	buckets []float64
}

func (s *schedSource) ReadSchedLatency() ([]uint64, []float64) {
	return append([]uint64(nil), s.counts...), s.buckets
}

// TestShadowWouldShedCountsARequestOnce: on a shadow route, a request that
// both the overload throttle and the full concurrency limit would refuse is
// one request that would have been shed: shadow_would_shed counts it once,
// so the dry run's figure is what enforcing would shed.
func TestShadowWouldShedCountsARequestOnce(t *testing.T) {
	src := &schedSource{buckets: []float64{0, 0.001, 0.01, 0.1, 0.5, 1}, counts: make([]uint64, 5)}
	clk := clock.NewFake(time.Now().Add(24 * time.Hour).Truncate(time.Hour))
	opts := DefaultOptions("svc")
	opts.Clock = clk
	opts.Shards = 1
	opts.Overload = OverloadOptions{Source: src}
	opts.Defaults = &rules.Ruleset{Service: "svc", Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/"}, Mode: rules.ModeShadow,
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 1},
	}}}
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	for range 20 { // 100 wake-ups a window that waited 100-500ms: batch is shed
		src.counts[3] += 100
		clk.Advance(100 * time.Millisecond)
		p, err := g.Admit(ctx, Request{Path: "/", Priority: "critical"})
		if err != nil {
			t.Fatal(err)
		}
		p.Release(time.Millisecond, Success)
	}
	if l, _ := g.OverloadLevel(); l < 1 {
		t.Fatalf("overload level %v, want batch fully shed", l)
	}
	held, err := g.Admit(ctx, Request{Path: "/", Priority: "critical"}) // the limit of 1 is full
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(time.Millisecond, Success)
	counts := &g.state.Load().byName["api"].shards[0].counts
	shed, admitted := counts[outShadowShed][3].Load(), counts[outAdmitted][3].Load()
	p, err := g.Admit(ctx, Request{Path: "/", Priority: "batch"})
	if err != nil {
		t.Fatalf("shadow route refused: %v", err)
	}
	p.Release(time.Millisecond, Success)
	if d := counts[outShadowShed][3].Load() - shed; d != 1 {
		t.Fatalf("one batch request counted %d times as shadow_would_shed, want 1", d)
	}
	if d := counts[outAdmitted][3].Load() - admitted; d != 1 {
		t.Fatalf("one batch request counted %d times as admitted, want 1", d)
	}
}
