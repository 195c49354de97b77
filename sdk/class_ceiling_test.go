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
