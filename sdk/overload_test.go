package governor_test

import (
	"container/heap"
	"context"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/shed"
)

// pending is an admitted request finishing at a virtual time.
type pending struct {
	at      time.Duration
	latency time.Duration
	p       governor.Permit
}

type pendingHeap []pending

func (h pendingHeap) Len() int           { return len(h) }
func (h pendingHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h pendingHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)        { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TestOverloadShedsLowClassesFirst drives the admission core with the real
// adaptive limiter (sdk/limit, gradient) in virtual time: a backend that
// serves 20 requests at once in 10 ms and slows down in proportion beyond
// that, offered 1.5 times its capacity in an even mix of the four classes. The
// limit must settle near the capacity, and the overload must fall on the
// lowest classes: critical and core are served, batch is mostly shed.
func TestOverloadShedsLowClassesFirst(t *testing.T) {
	clk := clock.NewFake(fakeStart)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Shards = 4
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := route("api", "/")
	r.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmGradient, Initial: 10, Max: 200}
	if err := g.Apply(ruleset(r), 1); err != nil {
		t.Fatal(err)
	}
	const (
		capacity = 20
		service  = 10 * time.Millisecond
		perMs    = 3 // 3000 req/s offered; capacity is 2000 req/s
	)
	var inflight pendingHeap
	var offered, served [4]int
	var now time.Duration
	ctx := context.Background()
	for step := 0; step < 20000; step++ { // 20 s of virtual time
		now += time.Millisecond
		clk.Advance(time.Millisecond)
		for len(inflight) > 0 && inflight[0].at <= now {
			x := heap.Pop(&inflight).(pending)
			x.p.Release(x.latency, governor.Success)
		}
		for i := range perMs {
			c := (step*perMs + i + step/3) % 4
			p, err := g.Admit(ctx, governor.Request{Path: "/", Priority: classPrio[c]})
			if step >= 5000 { // judge after a 5 s settling period
				offered[c]++
			}
			if err != nil {
				continue
			}
			if step >= 5000 {
				served[c]++
			}
			lat := service
			if n := len(inflight) + 1; n > capacity {
				lat = service * time.Duration(n) / capacity
			}
			heap.Push(&inflight, pending{at: now + lat, latency: lat, p: p})
		}
	}
	share := func(c int) float64 { return float64(served[c]) / float64(offered[c]) }
	t.Logf("served share by class: critical %.2f core %.2f browse %.2f batch %.2f", share(0), share(1), share(2), share(3))
	limit, _ := g.Limit("api")
	t.Logf("limit %d", limit)
	if limit < capacity/2 || limit > 4*capacity {
		t.Errorf("limit settled at %d, want near the capacity of %d", limit, capacity)
	}
	if share(0) < 0.99 || share(1) < 0.97 {
		t.Errorf("critical %.2f and core %.2f served; want them (half the load, within capacity) served", share(0), share(1))
	}
	if share(3) > 0.1 {
		t.Errorf("batch served %.2f; the overload should fall on it first", share(3))
	}
	for c := 1; c < 4; c++ {
		if share(c) > share(c-1)+0.01 {
			t.Errorf("class %s served %.2f, more than %s %.2f", classPrio[c], share(c), classPrio[c-1], share(c-1))
		}
	}
}

// TestCriticalFloodStaysBounded: critical requests may go beyond the limit
// by their measured concurrency (shed.Plan), at most (1+shed.Overshoot) x
// the limit. A flood of critical traffic alone, three times what the
// backend serves, must not overload it: the limiter sees the latency the
// extra requests cause and shrinks the limit, and with it the bound, so the
// in-flight count settles near the backend's capacity, not at a multiple of
// it, and the backend keeps serving at its capacity.
func TestCriticalFloodStaysBounded(t *testing.T) {
	clk := clock.NewFake(fakeStart)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Shards = 1 // one shard: the ceiling is exact (shards split it, and a lowered ceiling can leave one over its share)
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := route("api", "/")
	r.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmGradient, Initial: 10, Max: 200}
	if err := g.Apply(ruleset(r), 1); err != nil {
		t.Fatal(err)
	}
	const (
		capacity = 20
		service  = 10 * time.Millisecond
		perMs    = 6 // 6000 critical req/s offered; capacity is 2000 req/s
	)
	var inflight pendingHeap
	var served, maxIn, overBound int
	var latency time.Duration
	var now time.Duration
	ctx := context.Background()
	for step := 0; step < 20000; step++ { // 20 s of virtual time
		now += time.Millisecond
		clk.Advance(time.Millisecond)
		for len(inflight) > 0 && inflight[0].at <= now {
			x := heap.Pop(&inflight).(pending)
			x.p.Release(x.latency, governor.Success)
		}
		for range perMs {
			limit, _ := g.Limit("api")
			p, err := g.Admit(ctx, governor.Request{Path: "/", Priority: "critical"})
			if err != nil {
				continue
			}
			n := len(inflight) + 1
			if n > (1+shed.Overshoot)*limit {
				overBound++
			}
			lat := service
			if n > capacity {
				lat = service * time.Duration(n) / capacity
			}
			heap.Push(&inflight, pending{at: now + lat, latency: lat, p: p})
			if step >= 5000 { // judge after a 5 s settling period
				served++
				latency += lat
				maxIn = max(maxIn, n)
			}
		}
	}
	limit, _ := g.Limit("api")
	mean := latency / time.Duration(max(served, 1))
	t.Logf("critical flood at 3x: limit %d, max in flight %d, mean latency %v, served %.0f/s", limit, maxIn, mean, float64(served)/15)
	if overBound > 0 {
		t.Errorf("%d admissions beyond (1+Overshoot) x the limit", overBound)
	}
	if maxIn > 4*capacity {
		t.Errorf("in flight reached %d, want the flood held near the capacity %d", maxIn, capacity)
	}
	if mean > 3*service {
		t.Errorf("mean latency %v under a critical flood, want at most 3x the %v service time", mean, service)
	}
	if rate := float64(served) / 15; rate < 0.9*capacity/service.Seconds() {
		t.Errorf("served %.0f/s, want at least 90%% of the capacity %.0f/s", rate, capacity/service.Seconds())
	}
}
