package governor

import (
	"context"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// TestLowerClassCeilingBoundsTheWholeRoute: a class below critical is
// admitted only while the route as a whole, summed over its shards, is
// below the class's ceiling, wherever the requests in flight sit. Here
// critical requests fill a limit of 100 over 8 shards and those on half the
// shards finish: 52 stay in flight, all on shards 0-3. Checked against its
// per-shard shares only, batch (ceiling 72) would fill shards 4-7 up to
// their share (9 each: 36) and leave critical 12 of the 28 slots reserved
// above batch; it must get 20.
func TestLowerClassCeilingBoundsTheWholeRoute(t *testing.T) {
	opts := DefaultOptions("svc")
	opts.Clock = clock.NewFake(time.Now().Add(24 * time.Hour).Truncate(time.Hour))
	opts.Shards = 8
	opts.Overload.Disabled = true
	opts.Defaults = &rules.Ruleset{Service: "svc", Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 100},
		Shedding:    &rules.Shedding{Reserved: 0.1},
	}}}
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	var crit []Permit
	for {
		p, err := g.Admit(ctx, Request{Path: "/", Priority: "critical"})
		if err != nil {
			break
		}
		crit = append(crit, p)
	}
	if len(crit) != 100 {
		t.Fatalf("critical filled %d slots, want 100", len(crit))
	}
	for _, p := range crit {
		if p.shard >= 4 {
			p.Release(time.Millisecond, Success)
		}
	}
	before := g.InFlight("api")
	ceil := g.state.Load().byName["api"].ceilings(0).ceil
	if before != 52 || ceil[3] != 72 {
		t.Fatalf("set-up: %d in flight, batch ceiling %d; want 52 and 72", before, ceil[3])
	}
	batch := 0
	for {
		if _, err := g.Admit(ctx, Request{Path: "/", Priority: "batch"}); err != nil {
			break
		}
		batch++
	}
	if want := ceil[3] - int(before); batch != want {
		t.Fatalf("batch admitted %d beside %d critical, want %d (its ceiling %d less those in flight)", batch, before, want, ceil[3])
	}
	for range 100 - ceil[3] { // critical keeps its reserved room
		if _, err := g.Admit(ctx, Request{Path: "/", Priority: "critical"}); err != nil {
			t.Fatalf("critical refused at %d in flight of a limit of 100: %v", g.InFlight("api"), err)
		}
	}
}

// skewOf returns the skew state of the ceilings in force on route name.
func skewOf(g *Governor, name string) uint32 {
	return g.state.Load().byName[name].cell.snap.Load().skew.Load()
}

// TestShardSkewFollowsTheShards: a lower class sums the shards only while
// some shard may hold more than its share of the lowest ceiling. The first
// lower-class admission under new ceilings checks the shards and finds
// them level; a critical admission that takes a shard over its share of the
// lowest ceiling (batch's 72 over 8 shards: 9) makes them skewed, and the
// next lower-class admission after that slot is released finds them level
// again.
func TestShardSkewFollowsTheShards(t *testing.T) {
	g := fixedRoute(t, 100, 8)
	ctx := context.Background()
	b, err := g.Admit(ctx, Request{Path: "/", Priority: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	if got := skewOf(g, "api"); got != shardsLevel {
		t.Fatalf("after one batch admission the shards are %d, want level (%d)", got, shardsLevel)
	}
	b.Release(time.Millisecond, Success)
	var crit []Permit
	for skewOf(g, "api") == shardsLevel {
		if len(crit) == 100 {
			t.Fatal("100 critical admissions left the shards level")
		}
		p, err := g.Admit(ctx, Request{Path: "/", Priority: "critical"})
		if err != nil {
			t.Fatal(err)
		}
		crit = append(crit, p)
	}
	top := crit[len(crit)-1]
	if n := shardCount(top); n != 10 {
		t.Fatalf("the shards turned skewed with %d on the last critical's shard, want 10 (batch's share 9, plus one)", n)
	}
	top.Release(time.Millisecond, Success)
	b, err = g.Admit(ctx, Request{Path: "/", Priority: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	b.Release(time.Millisecond, Success)
	if got := skewOf(g, "api"); got != shardsLevel {
		t.Fatalf("after the skewing slot was released a batch admission left the shards %d, want level", got)
	}
}

// TestLowerClassCeilingAfterTheLimitFalls: when the limit falls, the shards
// hold counts taken under the old, larger shares. Core fills a fixed limit
// of 100 to its ceiling (90, 11-12 on each of 8 shards); the limit then
// falls to 56 (batch ceiling 40: 5 a shard) and core keeps 7 requests on
// each of shards 0-3, over batch's new share. Batch must get 40-28 = 12, not
// the 20 that shards 4-7's shares would let it take.
func TestLowerClassCeilingAfterTheLimitFalls(t *testing.T) {
	g := fixedRoute(t, 100, 8)
	ctx := context.Background()
	var core []Permit
	for {
		p, err := g.Admit(ctx, Request{Path: "/", Priority: "core"})
		if err != nil {
			break
		}
		core = append(core, p)
	}
	if err := g.Apply(fixedRules(56), 2); err != nil {
		t.Fatal(err)
	}
	ceil := g.state.Load().byName["api"].ceilings(0).ceil
	kept := map[uint16]int{}
	for _, p := range core {
		if p.shard < 4 && kept[p.shard] < 7 {
			kept[p.shard]++
			continue
		}
		p.Release(time.Millisecond, Success)
	}
	if n := g.InFlight("api"); n != 28 || ceil[3] != 40 {
		t.Fatalf("set-up: %d core in flight, batch ceiling %d; want 28 and 40", n, ceil[3])
	}
	batch := 0
	for {
		if _, err := g.Admit(ctx, Request{Path: "/", Priority: "batch"}); err != nil {
			break
		}
		batch++
	}
	if batch != 12 {
		t.Fatalf("batch admitted %d beside 28 core under its ceiling of 40, want 12", batch)
	}
}

// TestReplacedRouteSkewsTheCeilingsInForce: an admission through a route
// that Apply has just replaced (it read the state before the change) shares
// the cell's shards, so it must skew the new route's ceilings when it takes
// a shard over their share; otherwise the new route's lower classes would
// skip the sum while it holds that shard.
func TestReplacedRouteSkewsTheCeilingsInForce(t *testing.T) {
	g := fixedRoute(t, 100, 8)
	old := g.state.Load().byName["api"]
	if err := g.Apply(fixedRules(56), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Admit(context.Background(), Request{Path: "/", Priority: "batch"}); err != nil {
		t.Fatal(err)
	}
	if got := skewOf(g, "api"); got != shardsLevel {
		t.Fatalf("new route's shards %d after a batch admission, want level", got)
	}
	for range 6 { // the new batch share is 40/8: 5; old critical's 12 or 13
		if _, _, ok := old.acquire(0, 0, 0, 1, 0); !ok {
			t.Fatal("the replaced route refused critical")
		}
	}
	if got := skewOf(g, "api"); got != shardsSkewed {
		t.Fatalf("6 critical slots on shard 0 through the replaced route left the new route's shards %d, want skewed", got)
	}
}

func fixedRules(max int) *rules.Ruleset {
	return &rules.Ruleset{Service: "svc", Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: max},
		Shedding:    &rules.Shedding{Reserved: 0.1},
	}}}
}

// fixedRoute returns a governor with one route "api" under a fixed limit
// over the given number of shards, on a fake clock, without the overload
// throttle.
func fixedRoute(t *testing.T, max, shards int) *Governor {
	t.Helper()
	opts := DefaultOptions("svc")
	opts.Clock = clock.NewFake(time.Now().Add(24 * time.Hour).Truncate(time.Hour))
	opts.Shards = shards
	opts.Overload.Disabled = true
	opts.Defaults = fixedRules(max)
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// shards returns the in-flight count of p's shard.
func shardCount(p Permit) int64 { return p.rt.shards[p.shard].inflight.Load() }
