package governor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

var classPrio = [...]string{"critical", "core", "browse", "batch"}

func TestNewRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts governor.Options
		want string
	}{
		{"no service", governor.Options{}, "Service is required"},
		{"negative shards", governor.Options{Service: "a", Shards: -1}, "Shards"},
		{"bad defaults", governor.Options{Service: "a", Defaults: &rules.Ruleset{Service: "a", Routes: []rules.Route{{Name: "x"}}}}, "Defaults"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := governor.New(tt.opts)
			if !errors.Is(err, governor.ErrInvalidOptions) || !contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want ErrInvalidOptions mentioning %q", err, tt.want)
			}
		})
	}
}

func TestDefaultsGovernEverything(t *testing.T) {
	g, err := governor.New(governor.DefaultOptions("svc"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Version() != 0 {
		t.Fatalf("version %d, want 0", g.Version())
	}
	p, err := g.Admit(context.Background(), governor.Request{Path: "/anything", Priority: "7"})
	if err != nil || p.Route() != "default" || p.Class() != rules.ClassBrowse {
		t.Fatalf("Admit = %v, %v; want the default route", p.Route(), err)
	}
	if g.InFlight("default") != 1 {
		t.Fatalf("in flight %d, want 1", g.InFlight("default"))
	}
	p.Release(time.Millisecond, governor.Success)
	if g.InFlight("default") != 0 {
		t.Fatalf("in flight %d after release, want 0", g.InFlight("default"))
	}
}

// TestLimiterStateReadsTheRouteLimiter: LimiterState reports the state the
// default route's adaptive limiter decided its limit from, and nothing for a
// route that does not exist or has no concurrency limit.
func TestLimiterStateReadsTheRouteLimiter(t *testing.T) {
	opts := governor.DefaultOptions("svc")
	opts.Clock = clock.NewFake(fakeStart)
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	st, ok := g.LimiterState("default")
	if l, _ := g.Limit("default"); !ok || st.Limit != l {
		t.Fatalf("LimiterState(default) = %+v, %v; want the limiter's state with limit %d", st, ok, l)
	}
	if _, ok := g.LimiterState("nope"); ok {
		t.Fatal("LimiterState of an unknown route reported a state")
	}
	if err := g.Apply(ruleset(route("plain", "/")), 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.LimiterState("plain"); ok {
		t.Fatal("LimiterState of a route without a concurrency limit reported a state")
	}
}

func TestRouteMatching(t *testing.T) {
	withMethods := route("orders-post", "/orders")
	withMethods.Match.Methods = []string{"POST"}
	rs := ruleset(route("all", "/"), route("orders", "/orders"), withMethods, route("order-items", "/orders/items"))
	// A large table exercises the indexed matcher too.
	big := ruleset(rs.Routes...)
	for i := range 40 {
		big.Routes = append(big.Routes, route(fmt.Sprintf("r%d", i), fmt.Sprintf("/z/%d/", i)))
	}
	tests := []struct{ path, method, want string }{
		{"/", "GET", "all"},
		{"/health", "GET", "all"},
		{"/orders", "GET", "orders"},
		{"/orders/1", "POST", "orders-post"},
		{"/orders/items/3", "POST", "order-items"},
		{"/order", "GET", "all"},
	}
	for _, set := range []*rules.Ruleset{rs, big} {
		f := newFixture(t, 1, set)
		for _, tt := range tests {
			p, err := f.g.Admit(context.Background(), governor.Request{Path: tt.path, Method: tt.method})
			if err != nil || p.Route() != tt.want {
				t.Errorf("%d routes: %s %s -> %q, %v; want %q", len(set.Routes), tt.method, tt.path, p.Route(), err, tt.want)
			}
			p.Release(0, governor.Success)
		}
	}
	f := newFixture(t, 1, ruleset(route("api", "/api")))
	if p, err := f.g.Admit(context.Background(), governor.Request{Path: "/other"}); err != nil || p.Admitted() {
		t.Fatalf("unmatched request: %v, %v; want ungoverned admission", p.Admitted(), err)
	}
}

func concRoute(limit int, reserved float64) rules.Route {
	r := route("api", "/")
	r.Concurrency = &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: limit}
	r.Shedding = &rules.Shedding{Reserved: reserved}
	return r
}

// admitted tries one request of each class at the current load and releases
// whatever was admitted, leaving the load unchanged.
func admittedByClass(t *testing.T, g *governor.Governor) [4]bool {
	t.Helper()
	var got [4]bool
	for c, prio := range classPrio {
		p, err := g.Admit(context.Background(), governor.Request{Path: "/", Priority: prio})
		if err == nil {
			got[c] = true
			p.Release(time.Millisecond, governor.Success)
		} else if !errors.Is(err, governor.ErrShed) {
			t.Fatalf("class %s: %v, want ErrShed", prio, err)
		}
	}
	return got
}

func TestNoPriorityInversion(t *testing.T) {
	for _, shards := range []int{1, 4, 16} {
		for _, consistent := range []bool{false, true} {
			t.Run(fmt.Sprintf("shards=%d/consistent=%v", shards, consistent), func(t *testing.T) {
				r := concRoute(40, 0.1)
				r.Shedding.ConsistentUsers = consistent
				f := newFixture(t, shards, ruleset(r))
				rng := rand.New(rand.NewPCG(1, uint64(shards)))
				var held []governor.Permit
				sawShed := [4]bool{}
				for step := 0; step < 3000; step++ {
					// Random walk of the load: admit a random class or release.
					if rng.IntN(100) < 55 || len(held) == 0 {
						c := rng.IntN(4)
						p, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Priority: classPrio[c], User: fmt.Sprint("u", rng.IntN(50))})
						if err == nil {
							held = append(held, p)
						}
					} else {
						i := rng.IntN(len(held))
						held[i].Release(time.Millisecond, governor.Success)
						held = append(held[:i], held[i+1:]...)
					}
					got := admittedByClass(t, f.g)
					for c := 1; c < 4; c++ {
						if got[c] && !got[c-1] {
							t.Fatalf("step %d, load %d: class %s admitted while %s is shed (%v)", step, len(held), classPrio[c], classPrio[c-1], got)
						}
						if !got[c] {
							sawShed[c] = true
						}
					}
				}
				if !sawShed[3] {
					t.Fatal("the walk never reached overload; the test proves nothing")
				}
			})
		}
	}
}

func TestReservedHeadroomForCritical(t *testing.T) {
	f := newFixture(t, 4, ruleset(concRoute(20, 0.1)))
	ctx := context.Background()
	var held []governor.Permit
	for {
		p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "core"})
		if err != nil {
			break
		}
		held = append(held, p)
	}
	if len(held) != 18 {
		t.Fatalf("core filled %d slots, want 18 (20 less 10%% reserved)", len(held))
	}
	for i := 0; i < 2; i++ {
		p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "0"})
		if err != nil {
			t.Fatalf("critical request %d refused with the reserve free: %v", i, err)
		}
		held = append(held, p)
	}
	_, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "critical"})
	var rej *governor.Rejection
	if !errors.As(err, &rej) || rej.Reason != governor.ReasonShed || rej.Class != rules.ClassCritical || rej.RetryAfterSeconds() != 1 {
		t.Fatalf("critical beyond the limit: %v, want a shed rejection", err)
	}
	for _, p := range held {
		p.Release(time.Millisecond, governor.Success)
	}
}

func TestConsistentUserShedding(t *testing.T) {
	r := concRoute(200, 0.1)
	r.Shedding.ConsistentUsers = true
	r.Shedding.RotateEvery = rules.Duration(time.Hour)
	f := newFixture(t, 1, ruleset(r))
	ctx := context.Background()
	// Load the route into the batch band: batch's ceiling is 144 and its band
	// starts at 129.
	var held []governor.Permit
	for range 137 {
		p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "critical"})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	admitted := func() map[string]bool {
		m := map[string]bool{}
		for u := range 200 {
			user := fmt.Sprint("user-", u)
			p, err := f.g.Admit(ctx, governor.Request{Path: "/", Priority: "batch", User: user})
			m[user] = err == nil
			if err == nil {
				p.Release(time.Millisecond, governor.Success)
			}
		}
		return m
	}
	first := admitted()
	var in, out int
	for _, ok := range first {
		if ok {
			in++
		} else {
			out++
		}
	}
	if in == 0 || out == 0 {
		t.Fatalf("in the band %d users admitted and %d shed; want some of each", in, out)
	}
	for round := range 5 {
		f.clk.Advance(time.Minute)
		again := admitted()
		for u, ok := range first {
			if again[u] != ok {
				t.Fatalf("round %d: user %s admitted=%v, was %v: shedding is not consistent", round, u, again[u], ok)
			}
		}
	}
	f.clk.Advance(time.Hour)
	rotated := admitted()
	changed := 0
	for u, ok := range first {
		if rotated[u] != ok {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("a new rotation epoch shed exactly the same users")
	}
	for _, p := range held {
		p.Release(time.Millisecond, governor.Success)
	}
}

func TestRateLimit(t *testing.T) {
	r := route("api", "/")
	r.RateLimit = &rules.RateLimit{Rate: 10, Burst: 5}
	for _, shards := range []int{1, 4} {
		f := newFixture(t, shards, ruleset(r))
		ctx := context.Background()
		admit := func() error {
			p, err := f.g.Admit(ctx, governor.Request{Path: "/"})
			p.Release(time.Millisecond, governor.Success)
			return err
		}
		for i := range 5 {
			if err := admit(); err != nil {
				t.Fatalf("shards %d: burst request %d: %v", shards, i, err)
			}
		}
		err := admit()
		var rej *governor.Rejection
		if !errors.As(err, &rej) || !errors.Is(err, governor.ErrRateLimited) || rej.RetryAfterSeconds() != 1 {
			t.Fatalf("shards %d: beyond the burst: %v, want rate limited", shards, err)
		}
		// 10/s: one second refills 10 tokens, capped at the burst of 5.
		f.clk.Advance(time.Second)
		n := 0
		for admit() == nil {
			n++
		}
		if n != 5 {
			t.Fatalf("shards %d: after 1s admitted %d, want the burst of 5", shards, n)
		}
		f.clk.Advance(100 * time.Millisecond)
		if err := admit(); err != nil {
			t.Fatalf("shards %d: one token after 100ms: %v", shards, err)
		}
	}
}

func TestKeyRateLimitPerClientIP(t *testing.T) {
	r := route("api", "/")
	r.KeyRateLimits = []rules.KeyRateLimit{{Key: "ip", Rate: 1, Burst: 2, MaxKeys: 1600}, {Key: "header:x-api-key", Rate: 100, Burst: 1}}
	f := newFixture(t, 1, ruleset(r))
	ctx := context.Background()
	admit := func(ip, key string) error {
		h := map[string]string{"X-Api-Key": key}
		p, err := f.g.Admit(ctx, governor.Request{Path: "/", ClientIP: ip, Header: mapHeader(h)})
		p.Release(time.Millisecond, governor.Success)
		return err
	}
	for i := range 2 {
		if err := admit("10.0.0.1", ""); err != nil {
			t.Fatalf("request %d of 10.0.0.1: %v", i, err)
		}
	}
	if err := admit("10.0.0.1", ""); !errors.Is(err, governor.ErrRateLimited) {
		t.Fatalf("third request of 10.0.0.1: %v, want rate limited", err)
	}
	if err := admit("10.0.0.2", ""); err != nil {
		t.Fatalf("another IP is limited too: %v", err)
	}
	if err := admit("10.0.0.3", "k1"); err != nil {
		t.Fatal(err)
	}
	if err := admit("10.0.0.4", "k1"); !errors.Is(err, governor.ErrRateLimited) {
		t.Fatalf("second request with api key k1: %v, want rate limited by the header key", err)
	}
}

type mapHeader map[string]string

func (m mapHeader) Get(k string) string { return m[k] }

func TestWarmUpRamp(t *testing.T) {
	r := concRoute(100, 0.1)
	r.WarmUp = &rules.WarmUp{InitialFraction: 0.2, Period: rules.Duration(10 * time.Second)}
	f := newFixture(t, 1, ruleset(r))
	tests := []struct {
		at   time.Duration
		want int
	}{{0, 20}, {5 * time.Second, 60}, {10 * time.Second, 100}, {time.Minute, 100}}
	var elapsed time.Duration
	for _, tt := range tests {
		f.clk.Advance(tt.at - elapsed)
		elapsed = tt.at
		if got, _ := f.g.Limit("api"); got != tt.want {
			t.Fatalf("at %s: limit %d, want %d", tt.at, got, tt.want)
		}
	}
	// Admission follows the effective limit: a fresh governor admits 20
	// critical requests, not 100.
	f2 := newFixture(t, 2, ruleset(r))
	n := 0
	for {
		if _, err := f2.g.Admit(context.Background(), governor.Request{Path: "/", Priority: "0"}); err != nil {
			break
		}
		n++
	}
	if n != 20 {
		t.Fatalf("admitted %d at start of the ramp, want 20", n)
	}
}

func TestWarmUpRampsRateLimit(t *testing.T) {
	r := route("api", "/")
	r.RateLimit = &rules.RateLimit{Rate: 100, Burst: 1}
	r.WarmUp = &rules.WarmUp{InitialFraction: 0.1, Period: rules.Duration(time.Hour)}
	f := newFixture(t, 1, ruleset(r))
	count := func() int {
		n := 0
		for range 100 {
			f.clk.Advance(10 * time.Millisecond)
			if p, err := f.g.Admit(context.Background(), governor.Request{Path: "/"}); err == nil {
				n++
				p.Release(0, governor.Success)
			}
		}
		return n
	}
	// At 10% of 100/s, one second admits about 10 requests.
	if n := count(); n < 9 || n > 11 {
		t.Fatalf("first second of the ramp admitted %d, want about 10", n)
	}
}

func TestShadowModeCountsButNeverRejects(t *testing.T) {
	r := concRoute(2, 0.1)
	r.Mode = rules.ModeShadow
	r.RateLimit = &rules.RateLimit{Rate: 1, Burst: 3}
	f := newFixture(t, 1, ruleset(r))
	var held []governor.Permit
	for i := range 10 {
		p, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Priority: "batch"})
		if err != nil || !p.Admitted() {
			t.Fatalf("shadow route refused request %d: %v", i, err)
		}
		held = append(held, p)
	}
	if got := f.g.InFlight("api"); got != 10 {
		t.Fatalf("in flight %d, want 10", got)
	}
	for _, p := range held {
		p.Release(time.Millisecond, governor.Success)
	}
}

func TestExemptions(t *testing.T) {
	r := concRoute(1, 0)
	r.RateLimit = &rules.RateLimit{Rate: 1, Burst: 1}
	r.Exempt = &rules.Exempt{Paths: []string{"/healthz"}, Callers: []string{"prober"}}
	f := newFixture(t, 1, ruleset(r))
	ctx := context.Background()
	if _, err := f.g.Admit(ctx, governor.Request{Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := f.g.Admit(ctx, governor.Request{Path: "/healthz"}); err != nil {
			t.Fatalf("health check %d refused: %v", i, err)
		}
		if _, err := f.g.Admit(ctx, governor.Request{Path: "/x", Header: mapHeader{"X-Caller": "prober"}}); err != nil {
			t.Fatalf("exempt caller %d refused: %v", i, err)
		}
	}
	if _, err := f.g.Admit(ctx, governor.Request{Path: "/x", Caller: "someone"}); err == nil {
		t.Fatal("a caller that is not exempt was admitted beyond the limits")
	}
}

func TestExpiredContextNeverStarts(t *testing.T) {
	f := newFixture(t, 1, ruleset(concRoute(10, 0)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.g.Admit(ctx, governor.Request{Path: "/"})
	if !errors.Is(err, governor.ErrQueueTimeout) {
		t.Fatalf("Admit with a done context: %v, want ErrQueueTimeout", err)
	}
	if f.g.InFlight("api") != 0 {
		t.Fatal("a request with a done context took a slot")
	}
}

func TestReleaseFeedsTheLimiter(t *testing.T) {
	f := newFixture(t, 1, ruleset(concRoute(10, 0)))
	for _, o := range []governor.Outcome{governor.Success, governor.Failure, governor.Dropped} {
		p, err := f.g.Admit(context.Background(), governor.Request{Path: "/"})
		if err != nil {
			t.Fatal(err)
		}
		p.Release(time.Millisecond, o)
	}
	l := f.lims.made[0]
	if l.samples.Load() != 3 || l.dropped.Load() != 1 {
		t.Fatalf("limiter saw %d samples, %d dropped; want 3 and 1", l.samples.Load(), l.dropped.Load())
	}
}

func TestHooksOnReject(t *testing.T) {
	var seen []governor.Reason
	f := &fixture{}
	_ = f
	opts := governor.DefaultOptions("svc")
	opts.Hooks.OnReject = func(r *governor.Rejection) { seen = append(seen, r.Reason) }
	lims := &limiters{}
	opts.NewLimiter = lims.factory
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Apply(ruleset(concRoute(1, 0)), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Admit(context.Background(), governor.Request{Path: "/"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Admit(context.Background(), governor.Request{Path: "/"}); err == nil {
		t.Fatal("second request admitted beyond a limit of 1")
	}
	if len(seen) != 1 || seen[0] != governor.ReasonShed {
		t.Fatalf("OnReject saw %v, want one shed", seen)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestConcurrentAdmissionNeverExceedsTheLimit: whatever the interleaving,
// the requests in progress never exceed the limit, and every class stays
// under its own ceiling.
func TestConcurrentAdmissionNeverExceedsTheLimit(t *testing.T) {
	r := concRoute(16, 0.25)
	r.RateLimit = &rules.RateLimit{Rate: 1e9, Burst: 1 << 20}
	f := newFixture(t, 8, ruleset(r))
	var inflight, peak atomic.Int64
	var lowPeak atomic.Int64 // batch requests in progress
	var lowNow atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				c := (w + i) % 4
				p, err := f.g.Admit(context.Background(), governor.Request{Path: "/", Priority: classPrio[c]})
				if err != nil {
					continue
				}
				n := inflight.Add(1)
				for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
				}
				if c == 3 {
					l := lowNow.Add(1)
					for m := lowPeak.Load(); l > m && !lowPeak.CompareAndSwap(m, l); m = lowPeak.Load() {
					}
					runtime.Gosched()
					lowNow.Add(-1)
				}
				inflight.Add(-1)
				p.Release(time.Millisecond, governor.Success)
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 16 {
		t.Fatalf("peak in flight %d, limit 16", peak.Load())
	}
	if got, ceiling := lowPeak.Load(), int64(9); got > ceiling {
		t.Fatalf("peak batch in flight %d above its ceiling %d", got, ceiling)
	}
	if f.g.InFlight("api") != 0 {
		t.Fatalf("in flight %d at the end", f.g.InFlight("api"))
	}
}

func TestPriorityFromConfiguredHeaders(t *testing.T) {
	rs := ruleset(concRoute(1, 0))
	rs.Priority = &rules.Priority{Header: "x-prio", Default: rules.ClassBrowse,
		Aliases: map[string]rules.Class{"checkout": rules.ClassCritical}}
	f := newFixture(t, 1, rs)
	if f.g.PriorityHeader() != "X-Prio" {
		t.Fatalf("priority header %q, want X-Prio", f.g.PriorityHeader())
	}
	held, err := f.g.Admit(context.Background(), governor.Request{Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(time.Millisecond, governor.Success)
	tests := []struct {
		req  governor.Request
		want rules.Class
	}{
		{governor.Request{Path: "/"}, rules.ClassBrowse},
		{governor.Request{Path: "/", Header: mapHeader{"X-Prio": "checkout"}}, rules.ClassCritical},
		{governor.Request{Path: "/", Header: mapHeader{"X-Prio": "9"}}, rules.ClassBatch},
		{governor.Request{Path: "/", Header: mapHeader{"X-Traffic-Priority": "0"}}, rules.ClassBrowse},
		{governor.Request{Path: "/", Priority: "core", Header: mapHeader{"X-Prio": "9"}}, rules.ClassCore},
	}
	for _, tt := range tests {
		_, err := f.g.Admit(context.Background(), tt.req)
		var rej *governor.Rejection
		if !errors.As(err, &rej) || rej.Class != tt.want {
			t.Errorf("request %+v: %v, want refused as %s", tt.req, err, tt.want)
		}
	}
}

// scriptedClock returns the given Nanotime readings in turn, then the last.
type scriptedClock struct {
	*clock.Fake
	mu       sync.Mutex
	readings []time.Duration
}

func (c *scriptedClock) Nanotime() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.readings[0]
	if len(c.readings) > 1 {
		c.readings = c.readings[1:]
	}
	return int64(d)
}

// TestStaleClockReadingIsJudgedAgain: a request whose goroutine was
// descheduled after reading the clock must not be refused by a bucket that
// has moved past that reading.
func TestStaleClockReadingIsJudgedAgain(t *testing.T) {
	clk := &scriptedClock{Fake: clock.NewFake(fakeStart)}
	// New reads the clock once; then the first request reads 10s, the second
	// a stale 9s, then (again) 10.2s.
	clk.readings = []time.Duration{0, 10 * time.Second, 9 * time.Second, 10200 * time.Millisecond}
	opts := governor.DefaultOptions("svc")
	opts.Clock = clk
	opts.Shards = 1
	opts.Defaults = &rules.Ruleset{Service: "svc"}
	g, err := governor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := route("api", "/")
	r.RateLimit = &rules.RateLimit{Rate: 10, Burst: 1}
	if err := g.Apply(ruleset(r), 1); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := g.Admit(context.Background(), governor.Request{Path: "/"}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
}

// TestNewThatFailsUnregistersItsMetrics: a New that fails after registering
// its metrics takes them back. Here the outbound set it made could not
// register (the service had made one on the same registry), and the call
// that then passed that set as Options.Outbound failed too, on the series
// the first call had left behind.
func TestNewThatFailsUnregistersItsMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	set, err := outbound.New(outbound.Options{Service: "svc", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	opts := governor.DefaultOptions("svc")
	opts.Registerer = reg
	if _, err := governor.New(opts); !errors.Is(err, governor.ErrInvalidOptions) {
		t.Fatalf("New with a second outbound set on the registry: %v, want ErrInvalidOptions", err)
	}
	opts.Outbound = set
	g, err := governor.New(opts)
	if err != nil {
		t.Fatalf("New with the service's outbound set after a failed New: %v", err)
	}
	g.Close()
}
