package governor_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/bulkhead"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/limit"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

func TestApplyKeepsLearnedStateForUnchangedRoutes(t *testing.T) {
	a, b := concRoute(10, 0.1), concRoute(10, 0.1)
	a.Name, b.Name = "a", "b"
	b.Match.PathPrefix = "/b"
	a.RateLimit = &rules.RateLimit{Rate: 1, Burst: 1}
	f := newFixture(t, 2, ruleset(a, b))
	ctx := context.Background()
	// Learn: a's limiter moved to 7, a's bucket is empty, one request in flight.
	f.lims.made[0].limit.Store(7)
	held, err := f.g.Admit(ctx, governor.Request{Path: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.g.Admit(ctx, governor.Request{Path: "/a"}); !errors.Is(err, governor.ErrRateLimited) {
		t.Fatalf("second request: %v, want rate limited", err)
	}

	b2 := b
	b2.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 30}
	a2 := a
	a2.Exempt = &rules.Exempt{Paths: []string{"/a/healthz"}} // a changes, its limiter and bucket rules do not
	c := route("c", "/c")
	if err := f.g.Apply(ruleset(a2, b2, c), 2); err != nil {
		t.Fatal(err)
	}
	if f.g.Version() != 2 {
		t.Fatalf("version %d, want 2", f.g.Version())
	}
	if l, _ := f.g.Limit("a"); l != 7 {
		t.Fatalf("route a's learned limit is %d after Apply, want 7 kept", l)
	}
	if l, _ := f.g.Limit("b"); l != 30 {
		t.Fatalf("route b's limit is %d, want the new rules' 30", l)
	}
	if len(f.lims.made) != 3 {
		t.Fatalf("%d limiters built, want 3 (a, b, then only the changed b)", len(f.lims.made))
	}
	if _, err := f.g.Admit(ctx, governor.Request{Path: "/a"}); !errors.Is(err, governor.ErrRateLimited) {
		t.Fatalf("a's bucket was refilled by an unrelated change: %v", err)
	}
	if got := f.g.InFlight("a"); got != 1 {
		t.Fatalf("in flight %d after Apply, want 1", got)
	}
	held.Release(time.Millisecond, governor.Success)
	if got := f.g.InFlight("a"); got != 0 {
		t.Fatalf("in flight %d after releasing a permit from before Apply, want 0", got)
	}
	// Re-applying the same rules keeps everything.
	if err := f.g.Apply(ruleset(a2, b2, c), 3); err != nil || len(f.lims.made) != 3 {
		t.Fatalf("re-apply: %v, %d limiters", err, len(f.lims.made))
	}
}

// TestApplyKeepsPerKeyLimitsMovedInTheList: a per-key limit whose rule did
// not change keeps its buckets when another limit is put before it in the
// route's list. Matched by position, the per-IP limit here got new, full
// buckets, and every client that had used up its burst got it again.
func TestApplyKeepsPerKeyLimitsMovedInTheList(t *testing.T) {
	byIP := rules.KeyRateLimit{Key: "ip", Rate: 1, Burst: 1}
	byKey := rules.KeyRateLimit{Key: "header:X-Api-Key", Rate: 100, Burst: 100}
	r := route("api", "/")
	r.KeyRateLimits = []rules.KeyRateLimit{byIP}
	f := newFixture(t, 1, ruleset(r))
	ctx := context.Background()
	req := governor.Request{Path: "/", ClientIP: "10.0.0.1"}
	p, err := f.g.Admit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(time.Millisecond, governor.Success)
	r2 := r
	r2.KeyRateLimits = []rules.KeyRateLimit{byKey, byIP}
	if err := f.g.Apply(ruleset(r2), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.g.Admit(ctx, req); !errors.Is(err, governor.ErrRateLimited) {
		t.Fatalf("10.0.0.1's empty bucket was refilled when a limit was put before its own: %v", err)
	}
}

// admitAll admits req until it is refused and returns how many were admitted.
func admitAll(t *testing.T, g *governor.Governor, req governor.Request) int {
	t.Helper()
	n := 0
	for ; n < 10_000; n++ {
		p, err := g.Admit(context.Background(), req)
		if err != nil {
			if !errors.Is(err, governor.ErrRateLimited) {
				t.Fatalf("Admit: %v", err)
			}
			return n
		}
		p.Release(time.Millisecond, governor.Success)
	}
	t.Fatal("never refused")
	return n
}

// TestApplyChangingARateLimitKeepsItsTokens: a changed rate limit, of a
// route or per key, keeps the tokens its buckets have left, up to the new
// burst. Each change used to build full buckets: an operator halving a rate
// during an overload let a full burst through, and so did every rate the
// engine's recommender rewrote, on every instance.
func TestApplyChangingARateLimitKeepsItsTokens(t *testing.T) {
	tests := []struct {
		name     string
		from, to rules.RateLimit
		use      int // requests admitted before the change
		want     int // admitted at once after it
	}{
		{"drained, rate halved", rules.RateLimit{Rate: 100, Burst: 50}, rules.RateLimit{Rate: 50, Burst: 50}, 50, 0},
		{"drained, burst raised", rules.RateLimit{Rate: 100, Burst: 50}, rules.RateLimit{Rate: 100, Burst: 100}, 50, 0},
		{"30 left, burst lowered to 10", rules.RateLimit{Rate: 100, Burst: 50}, rules.RateLimit{Rate: 100, Burst: 10}, 20, 10},
		{"30 left, rate halved", rules.RateLimit{Rate: 100, Burst: 50}, rules.RateLimit{Rate: 50, Burst: 40}, 20, 30},
		{"full, burst raised", rules.RateLimit{Rate: 100, Burst: 50}, rules.RateLimit{Rate: 100, Burst: 80}, 0, 50},
	}
	for _, tt := range tests {
		t.Run("route "+tt.name, func(t *testing.T) {
			r := route("api", "/")
			r.RateLimit = &tt.from
			f := newFixture(t, 1, ruleset(r))
			req := governor.Request{Path: "/"}
			for range tt.use {
				p, err := f.g.Admit(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				p.Release(time.Millisecond, governor.Success)
			}
			r.RateLimit = &tt.to
			if err := f.g.Apply(ruleset(r), 2); err != nil {
				t.Fatal(err)
			}
			if n := admitAll(t, f.g, req); n != tt.want {
				t.Fatalf("admitted %d at once after the change, want %d", n, tt.want)
			}
		})
		t.Run("per key "+tt.name, func(t *testing.T) {
			r := route("api", "/")
			r.KeyRateLimits = []rules.KeyRateLimit{{Key: "ip", Rate: tt.from.Rate, Burst: tt.from.Burst}}
			f := newFixture(t, 1, ruleset(r))
			req := governor.Request{Path: "/", ClientIP: "10.0.0.1"}
			if tt.use == 0 { // a key seen before, with a full bucket again
				p, err := f.g.Admit(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				p.Release(time.Millisecond, governor.Success)
				f.clk.Advance(time.Second)
			}
			for range tt.use {
				p, err := f.g.Admit(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				p.Release(time.Millisecond, governor.Success)
			}
			r.KeyRateLimits = []rules.KeyRateLimit{{Key: "ip", Rate: tt.to.Rate, Burst: tt.to.Burst}}
			if err := f.g.Apply(ruleset(r), 2); err != nil {
				t.Fatal(err)
			}
			if n := admitAll(t, f.g, req); n != tt.want {
				t.Fatalf("admitted %d at once after the change, want %d", n, tt.want)
			}
			other := governor.Request{Path: "/", ClientIP: "10.0.0.2"} // a key never seen: full
			if n := admitAll(t, f.g, other); n != tt.to.Burst {
				t.Fatalf("a new key admitted %d, want the new burst %d", n, tt.to.Burst)
			}
		})
	}
}

// TestApplyChangingMaxKeysKeepsEveryKeysTokens: changing only max_keys of a
// per-key limit used to build a new limiter with every key full.
func TestApplyChangingMaxKeysKeepsEveryKeysTokens(t *testing.T) {
	r := route("api", "/")
	r.KeyRateLimits = []rules.KeyRateLimit{
		{Key: "header:X-Api-Key", Rate: 100, Burst: 100},
		{Key: "ip", Rate: 1, Burst: 10, MaxKeys: 16},
	}
	f := newFixture(t, 1, ruleset(r))
	req := governor.Request{Path: "/", ClientIP: "10.0.0.1"}
	if n := admitAll(t, f.g, req); n != 10 {
		t.Fatalf("admitted %d, want the burst of 10", n)
	}
	r.KeyRateLimits = []rules.KeyRateLimit{
		{Key: "ip", Rate: 1, Burst: 10, MaxKeys: 32}, // moved first, max_keys changed
		{Key: "header:X-Api-Key", Rate: 100, Burst: 100},
	}
	if err := f.g.Apply(ruleset(r), 2); err != nil {
		t.Fatal(err)
	}
	if n := admitAll(t, f.g, req); n != 0 {
		t.Fatalf("drained key admitted %d requests at once after max_keys changed", n)
	}
	f.clk.Advance(time.Second)
	if n := admitAll(t, f.g, req); n != 1 {
		t.Fatalf("admitted %d a second later, want the 1/s rate", n)
	}
}

func TestApplyRefusesAndKeepsOldRules(t *testing.T) {
	f := newFixture(t, 1, ruleset(concRoute(1, 0)))
	bad := ruleset(concRoute(1, 0))
	bad.Routes[0].RateLimit = &rules.RateLimit{Rate: -5}
	otherService := ruleset(concRoute(5, 0))
	otherService.Service = "other"
	tests := []struct {
		name    string
		rs      *rules.Ruleset
		version int64
		want    error
		field   string
	}{
		{"invalid", bad, 2, rules.ErrInvalid, "routes[0].rate_limit.rate"},
		{"nil", nil, 2, governor.ErrInvalidRules, ""},
		{"other service", otherService, 2, governor.ErrInvalidRules, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.g.Apply(tt.rs, tt.version)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Apply: %v, want %v", err, tt.want)
			}
			if tt.field != "" {
				var ve *rules.ValidationError
				if !errors.As(err, &ve) || ve.Errors[0].Field != tt.field {
					t.Fatalf("Apply: %v, want a field error for %s", err, tt.field)
				}
			}
			if f.g.Version() != 1 {
				t.Fatalf("version %d after a refused Apply, want 1", f.g.Version())
			}
			if l, _ := f.g.Limit("api"); l != 1 {
				t.Fatalf("limit %d after a refused Apply, want the old 1", l)
			}
		})
	}
}

func TestApplyHandsDownstreamsOverAllOrNothing(t *testing.T) {
	failLimiter := false
	reg := prometheus.NewRegistry()
	set, err := outbound.New(outbound.Options{Service: "svc", NewLimiter: func(cfg rules.Concurrency, clk clock.Clock) (bulkhead.Limiter, error) {
		if failLimiter {
			return nil, errors.New("no limiter today")
		}
		return limit.New(cfg, clk)
	}})
	if err != nil {
		t.Fatal(err)
	}
	opts := governor.DefaultOptions("svc")
	opts.Outbound = set
	var applied []int64
	opts.Hooks.OnApply = func(v int64, err error) {
		if err == nil {
			applied = append(applied, v)
		}
	}
	opts.Registerer = reg
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Outbound() != set {
		t.Fatal("Outbound does not return the set given in Options")
	}
	rs := ruleset(concRoute(3, 0))
	rs.Downstreams = []rules.Downstream{{Name: "db"}}
	if err := g.Apply(rs, 4); err != nil {
		t.Fatal(err)
	}
	if set.Get("db") == nil {
		t.Fatalf("downstream db not applied to the outbound set: %v", set.Names())
	}
	failLimiter = true
	rs2 := ruleset(concRoute(9, 0))
	rs2.Downstreams = []rules.Downstream{{Name: "cache", Bulkhead: &rules.Bulkhead{MaxConcurrent: 10, Adaptive: true}}}
	if err := g.Apply(rs2, 5); !errors.Is(err, governor.ErrInvalidRules) || !errors.Is(err, outbound.ErrInvalidRules) {
		t.Fatalf("Apply with refused downstreams: %v", err)
	}
	if g.Version() != 4 || set.Get("db") == nil || set.Get("cache") != nil {
		t.Fatalf("half applied: version %d, downstreams %v", g.Version(), set.Names())
	}
	if l, _ := g.Limit("api"); l != 3 {
		t.Fatalf("inbound limit %d after a refused Apply, want 3", l)
	}
	if len(applied) != 1 || applied[0] != 4 {
		t.Fatalf("OnApply saw %v, want [4]", applied)
	}
	m := gather(t, reg)
	if v := m.value("governor_sdk_rules_version", nil); v != 4 {
		t.Fatalf("rules_version %v, want 4", v)
	}
	if v := m.value("governor_sdk_rules_applied_total", map[string]string{"result": "rejected"}); v != 1 {
		t.Fatalf("rejected updates %v, want 1", v)
	}
}

func TestApplyRemovingARouteDropsItsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := governor.DefaultOptions("svc")
	opts.Registerer = reg
	opts.Clock = clock.NewFake(fakeStart)
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, b := concRoute(5, 0), concRoute(5, 0)
	a.Name, b.Name, b.Match.PathPrefix = "a", "b", "/b"
	if err := g.Apply(ruleset(a, b), 1); err != nil {
		t.Fatal(err)
	}
	held, err := g.Admit(context.Background(), governor.Request{Path: "/b/x"})
	if err != nil || held.Route() != "b" {
		t.Fatalf("admit on b: %v %v", held.Route(), err)
	}
	if err := g.Apply(ruleset(a), 2); err != nil {
		t.Fatal(err)
	}
	m := gather(t, reg)
	if s := m.metric("governor_sdk_requests_total", map[string]string{"route": "b"}); s != nil {
		t.Fatal("removed route b still has series")
	}
	if s := m.metric("governor_sdk_requests_total", map[string]string{"route": "a"}); s == nil {
		t.Fatal("route a lost its series")
	}
	// /b/x now falls to route a; the permit admitted by b still releases cleanly.
	if p, err := g.Admit(context.Background(), governor.Request{Path: "/b/x"}); err != nil || p.Route() != "a" {
		t.Fatalf("after removal /b/x went to %q (%v), want a", p.Route(), err)
	}
	held.Release(time.Millisecond, governor.Success)
}

// TestApplyTakesAVersionBelowTheOneInForce: an instance leaving a canary
// returns to the stable version, numbered below the canary's; the caller
// (package watch) orders versions, and Apply must not refuse it.
func TestApplyTakesAVersionBelowTheOneInForce(t *testing.T) {
	f := newFixture(t, 1, ruleset(concRoute(1, 0)))
	if err := f.g.Apply(ruleset(concRoute(5, 0)), 3); err != nil {
		t.Fatal(err)
	}
	if err := f.g.Apply(ruleset(concRoute(2, 0)), 1); err != nil {
		t.Fatalf("Apply of the stable version 1 under the canary's 3: %v", err)
	}
	if v, c := f.g.Version(), f.g.Rules().Routes[0].Concurrency; v != 1 || c == nil || c.Max != 2 {
		t.Fatalf("in force: version %d, concurrency %+v; want version 1's", v, c)
	}
}

// TestOnApplyHookMayCallApply: OnApply runs after Apply has released its
// lock, so a hook may read the rules and apply a corrected ruleset when a
// version is refused. It ran under the lock, and such a hook deadlocked the
// Apply that called it.
func TestOnApplyHookMayCallApply(t *testing.T) {
	type call struct {
		version int64
		ok      bool
	}
	var (
		g    *governor.Governor
		seen []call
	)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clock.NewFake(fakeStart)
	opts.Hooks.OnApply = func(v int64, err error) {
		seen = append(seen, call{v, err == nil})
		if got := g.Rules().Service; got != "svc" {
			t.Errorf("Rules from the hook: service %q", got)
		}
		if err != nil {
			if err := g.Apply(ruleset(concRoute(2, 0)), v+1); err != nil {
				t.Errorf("corrected ruleset applied from the hook: %v", err)
			}
		}
	}
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Apply(ruleset(route("", "no-slash")), 5); !errors.Is(err, governor.ErrInvalidRules) {
		t.Fatalf("Apply of an invalid ruleset: %v, want ErrInvalidRules", err)
	}
	if want := []call{{5, false}, {6, true}}; !slices.Equal(seen, want) {
		t.Fatalf("OnApply saw %v, want %v (the refusal, then the correction the hook applied)", seen, want)
	}
	if g.Version() != 6 {
		t.Fatalf("version %d in force, want the corrected 6", g.Version())
	}
}

// TestOnApplyHookSeesConcurrentAppliesInOrder: with OnApply run outside the
// lock, concurrent Applies still reach the hook one at a time and in the
// order they took effect (here the order in which their limiters were
// built), so the last version the hook saw is the one in force.
func TestOnApplyHookSeesConcurrentAppliesInOrder(t *testing.T) {
	var (
		mu            sync.Mutex
		built, hooked []int64
		inHook        atomic.Int32
	)
	opts := governor.DefaultOptions("svc")
	opts.Clock = clock.NewFake(fakeStart)
	opts.Defaults = &rules.Ruleset{Service: "svc"}
	opts.NewLimiter = func(cfg rules.Concurrency, clk clock.Clock) (governor.Limiter, error) {
		mu.Lock()
		built = append(built, int64(cfg.Max))
		mu.Unlock()
		return (&limiters{}).factory(cfg, clk)
	}
	opts.Hooks.OnApply = func(v int64, err error) {
		if inHook.Add(1) != 1 {
			t.Error("OnApply called while another call runs")
		}
		mu.Lock()
		hooked = append(hooked, v)
		mu.Unlock()
		inHook.Add(-1)
	}
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var wg sync.WaitGroup
	for v := 1; v <= 100; v++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Apply(ruleset(concRoute(v, 0)), int64(v)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if !slices.Equal(built, hooked) {
		t.Fatalf("applied in the order %v\nOnApply saw %v", built, hooked)
	}
	if last := hooked[len(hooked)-1]; last != g.Version() {
		t.Fatalf("OnApply saw %d last, version %d is in force", last, g.Version())
	}
}
