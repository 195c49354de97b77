package outbound

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/bulkhead"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/retry"
	"governor.dev/governor/sdk/rules"
)

type fixture struct {
	t       *testing.T
	clk     *clock.Fake
	reg     *prometheus.Registry
	set     *Set
	changes []string
	rejects []error
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: clock.NewFake(time.Time{}), reg: prometheus.NewRegistry()}
	set, err := New(Options{
		Service:    "checkout",
		Clock:      f.clk,
		Registerer: f.reg,
		Float64:    func() float64 { return 0.5 },
		Hooks: Hooks{
			OnStateChange: func(ds string, from, to breaker.State) {
				f.changes = append(f.changes, ds+":"+from.String()+">"+to.String())
			},
			OnReject: func(err *RejectedError) { f.rejects = append(f.rejects, err) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.set = set
	return f
}

func (f *fixture) apply(ds ...rules.Downstream) {
	f.t.Helper()
	if err := f.set.Apply(ds); err != nil {
		f.t.Fatalf("Apply: %v", err)
	}
}

// call runs one call through the downstream and returns Begin's error.
func (f *fixture) call(name string, failed bool) error {
	d := f.set.Get(name)
	c, err := d.Begin(f.clk.Nanotime())
	if err != nil {
		return err
	}
	f.clk.Advance(10 * time.Millisecond)
	c.End(f.clk.Nanotime(), failed, false)
	return nil
}

func (f *fixture) trip(name string) {
	f.t.Helper()
	for range 100 {
		if f.set.Get(name).Breaker().State(f.clk.Nanotime()) == breaker.Open {
			break
		}
		_ = f.call(name, true)
	}
	if st := f.set.Get(name).Breaker().State(f.clk.Nanotime()); st != breaker.Open {
		f.t.Fatalf("breaker of %s is %v after failures", name, st)
	}
}

// gathered returns the series of a family in the registry.
func (f *fixture) gathered(name string) []*dto.Metric {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (f *fixture) count(outcome, ds string) float64 {
	for _, m := range f.gathered("governor_sdk_downstream_calls_total") {
		if label(m, "downstream") == ds && label(m, "outcome") == outcome {
			return m.GetCounter().GetValue()
		}
	}
	f.t.Fatalf("no series for %s %s", ds, outcome)
	return 0
}

func (f *fixture) retries(outcome, ds string) float64 {
	for _, m := range f.gathered("governor_sdk_retries_total") {
		if label(m, "downstream") == ds && label(m, "outcome") == outcome {
			return m.GetCounter().GetValue()
		}
	}
	f.t.Fatalf("no retry series for %s %s", ds, outcome)
	return 0
}

func brk() *rules.Breaker {
	return &rules.Breaker{MinCalls: 5, OpenBase: rules.Duration(time.Second), HalfOpenProbes: 1}
}

func TestApplyKeepsStateOfUnchangedParts(t *testing.T) {
	f := newFixture(t)
	base := rules.Downstream{Name: "payments", Breaker: brk(), Retry: &rules.Retry{Budget: 0.1},
		Bulkhead: &rules.Bulkhead{MaxConcurrent: 5}}
	f.apply(base, rules.Downstream{Name: "search"})
	f.trip("payments")
	d0 := f.set.Get("payments")
	d0.Request(f.clk.Nanotime())

	f.apply(base, rules.Downstream{Name: "search", Timeout: rules.Duration(time.Second)})
	if f.set.Get("payments") != d0 {
		t.Fatal("unchanged downstream was rebuilt")
	}

	if _, err := d0.Bulkhead().Acquire(); err != nil { // a call in flight
		t.Fatal(err)
	}
	changed := base
	changed.Retry = &rules.Retry{Budget: 0.1, MaxAttempts: 5}
	changed.Bulkhead = &rules.Bulkhead{MaxConcurrent: 9}
	f.apply(changed)
	d1 := f.set.Get("payments")
	switch {
	case d1 == d0:
		t.Fatal("changed downstream kept as is")
	case d1.Breaker() != d0.Breaker():
		t.Fatal("breaker rebuilt although its rules are equal")
	case d1.Retrier() == d0.Retrier() || d1.Retrier().Budget() != d0.Retrier().Budget():
		t.Fatal("want a new retrier sharing the old budget")
	case d1.Bulkhead() == d0.Bulkhead() || d1.Bulkhead().Limit() != 9:
		t.Fatal("bulkhead not rebuilt")
	case d1.Bulkhead().InFlight() != 1:
		t.Fatal("the rebuilt bulkhead lost the in-flight count")
	case f.set.Get("search") != nil:
		t.Fatal("search was not dropped")
	}
	if err := f.call("payments", false); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("call = %v: the kept breaker should still be open", err)
	}

	newBrk := *brk()
	newBrk.MinCalls = 50
	changed.Breaker = &newBrk
	f.apply(changed)
	if err := f.call("payments", false); err != nil {
		t.Fatalf("call after the breaker rules changed = %v, want a fresh closed breaker", err)
	}
	if got := f.set.Names(); len(got) != 1 || got[0] != "payments" {
		t.Fatalf("Names = %v", got)
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "a", Breaker: brk()})
	a := f.set.Get("a")
	tests := []struct {
		name string
		ds   []rules.Downstream
		want string
	}{
		{"duplicate name", []rules.Downstream{{Name: "b"}, {Name: "b"}}, `downstreams[1].name: duplicate "b"`},
		{"breaker rejects its rules", []rules.Downstream{{Name: "b"}, {Name: "c", Breaker: &rules.Breaker{ErrorRatio: 3}}}, "downstreams[1] (c)"},
		{"bulkhead rejects its rules", []rules.Downstream{{Name: "d", Bulkhead: &rules.Bulkhead{}}}, "max_concurrent"},
		{"retry rejects its rules", []rules.Downstream{{Name: "e", Retry: &rules.Retry{MaxAttempts: 1000}}}, "max_attempts"},
		{"balancer rejects its rules", []rules.Downstream{{Name: "g", Balancer: &rules.Balancer{Decay: -1}}}, "balancer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.set.Apply(tt.ds)
			if !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Apply = %v, want ErrInvalidRules mentioning %q", err, tt.want)
			}
			if f.set.Get("a") != a || len(f.set.Names()) != 1 {
				t.Fatalf("rules in force changed: %v", f.set.Names())
			}
		})
	}
}

func TestEnforceRefuses(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "db", Breaker: brk(), Bulkhead: &rules.Bulkhead{MaxConcurrent: 1}})
	d := f.set.Get("db")
	held, err := d.Begin(f.clk.Nanotime())
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Begin(f.clk.Nanotime())
	var rej *RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, bulkhead.ErrFull) || rej.Downstream != "db" || rej.StatusCode() != 503 {
		t.Fatalf("Begin over the bulkhead = %v", err)
	}
	held.End(f.clk.Nanotime(), false, false)
	f.trip("db")
	err = f.call("db", false)
	if !errors.Is(err, breaker.ErrOpen) || !strings.Contains(err.Error(), "db") {
		t.Fatalf("call with the breaker open = %v", err)
	}
	if d.Bulkhead().InFlight() != 0 {
		t.Fatal("a refused call kept its bulkhead slot")
	}
	if len(f.rejects) != 2 || f.count(OutcomeBulkheadFull, "db") != 1 || f.count(OutcomeBreakerOpen, "db") != 1 ||
		f.count(OutcomeError, "db") != 4 || f.count(OutcomeSuccess, "db") != 1 {
		t.Fatalf("rejects %v; counts full=%v open=%v error=%v success=%v", f.rejects,
			f.count(OutcomeBulkheadFull, "db"), f.count(OutcomeBreakerOpen, "db"),
			f.count(OutcomeError, "db"), f.count(OutcomeSuccess, "db"))
	}
	err = d.Refuse(fmt.Errorf("every endpoint ejected: %w", breaker.ErrOpen))
	if !errors.As(err, &rej) || !errors.Is(err, breaker.ErrOpen) || len(f.rejects) != 3 || f.count(OutcomeBreakerOpen, "db") != 2 {
		t.Fatalf("Refuse = %v; rejects %d, breaker_open %v", err, len(f.rejects), f.count(OutcomeBreakerOpen, "db"))
	}
	if len(f.changes) != 1 || f.changes[0] != "db:closed>open" {
		t.Fatalf("state changes %v", f.changes)
	}
}

func TestShadowCountsButNeverRefuses(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "db", Mode: rules.ModeShadow, Breaker: brk(), Bulkhead: &rules.Bulkhead{MaxConcurrent: 1}})
	d := f.set.Get("db")
	held, _ := d.Begin(f.clk.Nanotime())
	if err := f.call("db", false); err != nil { // over the bulkhead
		t.Fatalf("shadow refused: %v", err)
	}
	held.End(f.clk.Nanotime(), false, false)
	f.trip("db")
	for range 3 {
		if err := f.call("db", false); err != nil {
			t.Fatalf("shadow refused with the breaker open: %v", err)
		}
	}
	if got := f.count(OutcomeShadowWouldReject, "db"); got != 4 {
		t.Fatalf("shadow_would_reject = %v, want 4", got)
	}
	if len(f.rejects) != 0 || f.count(OutcomeBreakerOpen, "db") != 0 {
		t.Fatal("shadow counted a real refusal")
	}
	// The breaker still learns in shadow: after the open period a probe
	// closes it.
	f.clk.Advance(time.Second)
	_ = f.call("db", false)
	if st := d.Breaker().State(f.clk.Nanotime()); st != breaker.Closed {
		t.Fatalf("breaker %v after a successful probe in shadow", st)
	}
}

func TestRetriesAreCountedAndBudgeted(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "api", Retry: &rules.Retry{MaxAttempts: 10, Budget: 0.5, MinPerSecond: 0.05}},
		rules.Downstream{Name: "plain"})
	d := f.set.Get("api")
	ctx := context.Background()
	for range 4 {
		d.Request(f.clk.Nanotime())
	}
	// A caller that has gone gets no retry: nothing is spent or counted.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.NextRetry(gone, retry.Failure{Attempts: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("NextRetry for a cancelled caller = %v, want context.Canceled", err)
	}
	// 0.5 x 4 requests + 0.05/s x 10s window = 2.5: two retries, then none.
	var errs []error
	for range 3 {
		_, err := d.NextRetry(ctx, retry.Failure{Attempts: 1})
		if err == nil {
			// Counted once its back-off ends; the fake clock stands
			// still, so the test waits for none.
			err = d.Wait(ctx, 0)
		}
		errs = append(errs, err)
	}
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], retry.ErrBudgetExhausted) {
		t.Fatalf("NextRetry errors %v", errs)
	}
	attempted := f.retries(RetryAttempted, "api")
	refused := f.retries(RetryBudgetExhausted, "api")
	if attempted != 2 || refused != 1 {
		t.Fatalf("retries attempted %v budget_exhausted %v", attempted, refused)
	}
	p := f.set.Get("plain")
	p.Request(0)
	if _, err := p.NextRetry(ctx, retry.Failure{Attempts: 1}); !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Fatalf("NextRetry without retry rules = %v", err)
	}
	if err := p.Wait(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsAreCreatedUpFrontAndDropped(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "a", Breaker: brk(), Retry: &rules.Retry{}, Bulkhead: &rules.Bulkhead{MaxConcurrent: 7}},
		rules.Downstream{Name: "b"})
	f.set.SetEndpoints("a", []string{"x:1", "y:1"})
	count := func(name string) int {
		ms := f.gathered(name)
		for _, m := range ms {
			if label(m, "service") != "checkout" || label(m, "downstream") == "" {
				t.Fatalf("%s series without service or downstream label: %v", name, m.GetLabel())
			}
		}
		return len(ms)
	}
	tests := []struct {
		name string
		want int
	}{
		{"governor_sdk_downstream_calls_total", 2 * len(outcomes)},
		{"governor_sdk_downstream_duration_seconds", 2},
		{"governor_sdk_retries_total", 8}, // four outcomes for each of the two downstreams
		{"governor_sdk_breaker_state", 1},
		{"governor_sdk_retry_budget_ratio", 1},
		{"governor_sdk_downstream_inflight", 1},
		{"governor_sdk_downstream_limit", 1},
		{"governor_sdk_downstream_endpoints", 2},
		{"governor_sdk_downstream_panic", 1},
		{"governor_sdk_downstream_panic_picks_total", 1},
		{"governor_sdk_downstream_ejections_skipped_total", 2},
	}
	for _, tt := range tests {
		if got := count(tt.name); got != tt.want {
			t.Errorf("%s: %d series before any call, want %d", tt.name, got, tt.want)
		}
	}
	if ms := f.gathered("governor_sdk_downstream_limit"); ms[0].GetGauge().GetValue() != 7 {
		t.Fatalf("downstream_limit = %v, want 7", ms[0].GetGauge().GetValue())
	}
	for _, m := range f.gathered("governor_sdk_downstream_endpoints") {
		want := map[string]float64{"active": 2, "ejected": 0}[label(m, "state")]
		if m.GetGauge().GetValue() != want {
			t.Fatalf("endpoints %s = %v, want %v", label(m, "state"), m.GetGauge().GetValue(), want)
		}
	}
	f.apply(rules.Downstream{Name: "a", Breaker: brk(), Retry: &rules.Retry{}})
	if got := count("governor_sdk_downstream_calls_total"); got != len(outcomes) {
		t.Fatalf("%d call series after b was dropped", got)
	}
	f.trip("a")
	if ms := f.gathered("governor_sdk_breaker_state"); len(ms) != 1 || ms[0].GetGauge().GetValue() != 2 {
		t.Fatalf("breaker_state = %v, want one series at 2", ms)
	}
	// Every admitted call took 10ms: all of them in the 10ms bucket.
	h := f.gathered("governor_sdk_downstream_duration_seconds")[0].GetHistogram()
	calls := f.count(OutcomeError, "a") + f.count(OutcomeSuccess, "a")
	if float64(h.GetSampleCount()) != calls || calls == 0 || h.GetSampleSum() < calls*0.0099 || h.GetSampleSum() > calls*0.0101 {
		t.Fatalf("histogram count %d sum %v for %v calls", h.GetSampleCount(), h.GetSampleSum(), calls)
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 0.01 {
			want = h.GetSampleCount()
		}
		if b.GetCumulativeCount() != want {
			t.Fatalf("bucket %v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	// Counters survive a rebuild of the downstream.
	before := f.count(OutcomeError, "a")
	f.apply(rules.Downstream{Name: "a", Breaker: brk(), Retry: &rules.Retry{MaxAttempts: 4}})
	if got := f.count(OutcomeError, "a"); got != before {
		t.Fatalf("error count %v after a rebuild, want %v", got, before)
	}
	if _, err := New(Options{Registerer: f.reg, Service: "checkout"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("registering twice = %v", err)
	}
}

func TestEndpointsSurviveApply(t *testing.T) {
	f := newFixture(t)
	f.set.SetEndpoints("api", []string{"10.0.0.1:80", "10.0.0.2:80"})
	f.apply(rules.Downstream{Name: "api"})
	if got := f.set.Get("api").Balancer().Endpoints(); len(got) != 2 {
		t.Fatalf("endpoints %v", got)
	}
	f.set.SetEndpoints("api", []string{"10.0.0.3:80"})
	f.apply(rules.Downstream{Name: "api", Balancer: &rules.Balancer{SlowStart: rules.Duration(time.Second)}})
	if got := f.set.Get("api").Balancer().Endpoints(); len(got) != 1 || got[0] != "10.0.0.3:80" {
		t.Fatalf("endpoints after a rebuild %v", got)
	}
}

func TestAdaptiveBulkhead(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "db", Bulkhead: &rules.Bulkhead{MaxConcurrent: 50, Adaptive: true}})
	// sdk/limit's gradient limiter starts at its initial limit, 20.
	if got := f.set.Get("db").Bulkhead().Limit(); got != 20 {
		t.Fatalf("adaptive limit = %d, want the initial 20", got)
	}
	f.apply(rules.Downstream{Name: "db", Bulkhead: &rules.Bulkhead{MaxConcurrent: 3, Adaptive: true}})
	if got := f.set.Get("db").Bulkhead().Limit(); got != 3 {
		t.Fatalf("adaptive limit = %d, want capped at 3", got)
	}
	bad, _ := New(Options{NewLimiter: func(rules.Concurrency, clock.Clock) (bulkhead.Limiter, error) {
		return nil, errors.New("no limiter")
	}})
	if err := bad.Apply([]rules.Downstream{{Name: "x", Bulkhead: &rules.Bulkhead{MaxConcurrent: 1, Adaptive: true}}}); !errors.Is(err, ErrInvalidRules) {
		t.Fatalf("Apply with a failing limiter factory = %v", err)
	}
}

// TestAPanickingHookLeaksNoBulkheadSlot: a service's OnStateChange hook has a
// bug and panics, and its server recovers the panic per request, as net/http
// does. The breaker runs the hook inside End (closed to open) and inside
// Begin (open to half-open, after the bulkhead slot is taken). Each panic
// must leave the bulkhead and the call counts as they should be: before, it
// kept the call's slot for good, and enough state changes left the bulkhead
// refusing every call to the downstream.
func TestAPanickingHookLeaksNoBulkheadSlot(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s, err := New(Options{Clock: clk, Hooks: Hooks{
		OnStateChange: func(string, breaker.State, breaker.State) { panic("bug in a hook") },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]rules.Downstream{{Name: "db", Breaker: brk(), Bulkhead: &rules.Bulkhead{MaxConcurrent: 10}}}); err != nil {
		t.Fatal(err)
	}
	d := s.Get("db")
	panics := func(fn func()) (panicked bool) {
		defer func() { panicked = recover() != nil }()
		fn()
		return false
	}
	inEnd := 0
	for range 5 { // the fifth failure opens the breaker inside End
		c, err := d.Begin(clk.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
		if panics(func() { c.End(clk.Nanotime(), true, false) }) {
			inEnd++
		}
	}
	if n := d.Bulkhead().InFlight(); inEnd != 1 || n != 0 {
		t.Fatalf("%d panics in End, then %d bulkhead slots held; want 1 and 0", inEnd, n)
	}
	if got := d.stats.snapshot().calls[iError]; got != 5 {
		t.Fatalf("%d errors counted, want 5", got)
	}
	clk.Advance(time.Second) // open period over: the next Allow turns half-open
	if !panics(func() { _, _ = d.Begin(clk.Nanotime()) }) {
		t.Fatal("the hook did not run in Begin")
	}
	if n := d.Bulkhead().InFlight(); n != 0 {
		t.Fatalf("%d bulkhead slots held after the hook panicked in Begin", n)
	}
}

// TestCancelledProbeFreesItsSlotAtOnce: with one half-open probe, a probe
// whose caller cancels it ends with Call.Cancel. Before Cancel gave the probe
// slot back, every call to the downstream was refused until the probe round
// timed out a window (10s) later, and each cancelled probe of the next round
// did it again. The next call must be admitted as a probe at once, and
// decide the round.
func TestCancelledProbeFreesItsSlotAtOnce(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "db", Breaker: brk(), Bulkhead: &rules.Bulkhead{MaxConcurrent: 5}})
	f.trip("db")
	f.clk.Advance(time.Second) // the open period is over
	d := f.set.Get("db")
	for range 3 {
		probe, err := d.Begin(f.clk.Nanotime())
		if err != nil {
			t.Fatalf("probe after a cancelled probe: %v", err)
		}
		probe.Cancel()
		if st := d.Breaker().State(f.clk.Nanotime()); st != breaker.HalfOpen {
			t.Fatalf("breaker %v after a cancelled probe, want half-open", st)
		}
	}
	if err := f.call("db", false); err != nil {
		t.Fatalf("call after cancelled probes = %v", err)
	}
	if st := d.Breaker().State(f.clk.Nanotime()); st != breaker.Closed {
		t.Fatalf("breaker %v after a successful probe, want closed", st)
	}
	if n := d.Bulkhead().InFlight(); n != 0 {
		t.Fatalf("%d bulkhead slots held after cancelled calls", n)
	}
	if got := f.count(OutcomeSuccess, "db"); got != 1 {
		t.Fatalf("%v successes counted, want 1: a cancelled call is no success", got)
	}
}

// TestCancelledCallsLeaveTheThrottleUnchanged: two of three calls are
// cancelled by their callers (hedging, callers that leave) and the rest
// succeed. Counted as requests that were never accepted, the cancelled calls
// made the adaptive throttle refuse more than half of all calls to a
// downstream that never failed; Cancel takes their requests back.
func TestCancelledCallsLeaveTheThrottleUnchanged(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	rng := rand.New(rand.NewPCG(1, 2))
	s, err := New(Options{Clock: clk, Float64: rng.Float64})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]rules.Downstream{{Name: "db", Breaker: &rules.Breaker{Kind: rules.BreakerKindThrottle}}}); err != nil {
		t.Fatal(err)
	}
	d := s.Get("db")
	refused := 0
	for i := range 1000 {
		clk.Advance(10 * time.Millisecond)
		c, err := d.Begin(clk.Nanotime())
		switch {
		case err != nil:
			refused++
		case i%3 != 0:
			c.Cancel()
		default:
			c.End(clk.Nanotime(), false, false)
		}
	}
	if refused != 0 {
		t.Fatalf("%d of 1000 calls refused; the downstream never failed", refused)
	}
}

// TestApplyKeepsEndpointStateWhenTheBalancerChanges: a changed balancer
// rule rebuilt the balancer from scratch: tuning slow_start during an
// incident put the dead, ejected endpoint back into rotation at once, and a
// breaker change threw away every endpoint's latency estimate. The ejection
// must survive a balancer change, and the estimate a breaker change.
func TestApplyKeepsEndpointStateWhenTheBalancerChanges(t *testing.T) {
	f := newFixture(t)
	base := rules.Downstream{Name: "api", Breaker: brk(), Balancer: &rules.Balancer{SlowStart: rules.Duration(time.Second)}}
	f.apply(base)
	f.set.SetEndpoints("api", []string{"10.0.0.1:80"})
	bal := f.set.Get("api").Balancer()
	for range 5 {
		p, err := bal.Pick(f.clk.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Millisecond)
		bal.Done(p, f.clk.Nanotime(), true)
	}
	f.set.SetEndpoints("api", []string{"10.0.0.1:80", "10.0.0.2:80"})
	if got := bal.Ejected(f.clk.Nanotime()); !slices.Equal(got, []string{"10.0.0.1:80"}) {
		t.Fatalf("ejected %v, want the failing endpoint", got)
	}
	decay := float64(10 * time.Second)
	est := bal.Endpoint("10.0.0.1:80").Latency(f.clk.Nanotime(), decay)

	changed := base
	changed.Balancer = &rules.Balancer{SlowStart: rules.Duration(2 * time.Second)}
	f.apply(changed)
	if got := f.set.Get("api").Balancer().Ejected(f.clk.Nanotime()); !slices.Equal(got, []string{"10.0.0.1:80"}) {
		t.Fatalf("after a slow_start change ejected %v, want the failing endpoint still", got)
	}
	if got := f.set.Get("api").Balancer().Endpoints(); len(got) != 2 {
		t.Fatalf("endpoints %v", got)
	}

	nb := *brk()
	nb.MinCalls = 7
	changed.Breaker = &nb
	f.apply(changed)
	if got := f.set.Get("api").Balancer().Endpoint("10.0.0.1:80").Latency(f.clk.Nanotime(), decay); got != est {
		t.Fatalf("after a breaker change the estimate is %v, want %v kept", got, est)
	}
}

// TestPanicModeIsExported: with its only endpoint ejected the balancer is in
// panic mode (below the default threshold of half), which
// governor_sdk_downstream_panic shows, and each call panic mode sends to
// the ejected endpoint counts in governor_sdk_downstream_panic_picks_total.
func TestPanicModeIsExported(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "api", Breaker: brk(), Balancer: &rules.Balancer{}})
	f.set.SetEndpoints("api", []string{"10.0.0.1:80"})
	bal := f.set.Get("api").Balancer()
	for range 5 {
		p, err := bal.Pick(f.clk.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Millisecond)
		bal.Done(p, f.clk.Nanotime(), true)
	}
	gauge := func() float64 { return f.gathered("governor_sdk_downstream_panic")[0].GetGauge().GetValue() }
	picks := func() float64 {
		return f.gathered("governor_sdk_downstream_panic_picks_total")[0].GetCounter().GetValue()
	}
	if gauge() != 1 || picks() != 0 {
		t.Fatalf("panic %v, panic picks %v with the only endpoint ejected, want 1 and 0", gauge(), picks())
	}
	for range 3 {
		p, err := bal.Pick(f.clk.Nanotime())
		if err != nil || !p.Panic() {
			t.Fatalf("pick %v, %v: want a panic pick", p.Panic(), err)
		}
		bal.Done(p, f.clk.Nanotime(), false)
	}
	if picks() != 3 {
		t.Fatalf("panic picks %v, want 3", picks())
	}
}

// TestShadowCountsACallOnce: a shadow call that both bulkhead and breaker
// would refuse is one call that would be refused, not two.
func TestShadowCountsACallOnce(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "db", Mode: rules.ModeShadow, Breaker: brk(), Bulkhead: &rules.Bulkhead{MaxConcurrent: 1}})
	f.trip("db")
	before := f.count(OutcomeShadowWouldReject, "db")
	d := f.set.Get("db")
	held, _ := d.Begin(f.clk.Nanotime())
	if err := f.call("db", false); err != nil {
		t.Fatalf("shadow refused: %v", err)
	}
	held.Cancel()
	// held: breaker open (1); the call: bulkhead over and breaker open (1).
	if got := f.count(OutcomeShadowWouldReject, "db") - before; got != 2 {
		t.Fatalf("shadow_would_reject grew by %v for two calls, want 2", got)
	}
}

// TestARetryGivenUpInItsBackoffIsNotCounted: a caller that leaves during the
// back-off makes no retry; the budget gets it back and retries_total must not
// count it as attempted.
func TestARetryGivenUpInItsBackoffIsNotCounted(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "api", Retry: &rules.Retry{MinPerSecond: 100}})
	d := f.set.Get("api")
	d.Request(f.clk.Nanotime())
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := d.NextRetry(ctx, retry.Failure{Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := d.Wait(ctx, max(wait, time.Millisecond)); err == nil {
		t.Fatal("Wait after cancel = nil")
	}
	if got := f.retries(RetryAttempted, "api"); got != 0 {
		t.Fatalf("retries attempted = %v, want 0", got)
	}
	// A retry whose back-off ends is counted (the fake clock stands still:
	// the test waits for none).
	if _, err := d.NextRetry(context.Background(), retry.Failure{Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if got := f.retries(RetryAttempted, "api"); got != 1 {
		t.Fatalf("retries attempted = %v, want 1", got)
	}
}

// TestSuppressedRetriesAreExported: the retries not made because the
// response said "overloaded; don't retry" or because the call served a
// request that was itself a retry are counted apart on the dashboards,
// created at 0 with the downstream.
func TestSuppressedRetriesAreExported(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "api", Retry: &rules.Retry{MaxAttempts: 3}})
	if got := f.retries(RetrySuppressedOverloaded, "api"); got != 0 {
		t.Fatalf("suppressed_overloaded at start %v, want 0", got)
	}
	d := f.set.Get("api")
	d.SuppressedRetry(true)
	d.SuppressedRetry(false)
	d.SuppressedRetry(false)
	if o, n := f.retries(RetrySuppressedOverloaded, "api"), f.retries(RetrySuppressedInboundRetry, "api"); o != 1 || n != 2 {
		t.Fatalf("suppressed_overloaded %v, suppressed_inbound_retry %v; want 1 and 2", o, n)
	}
}

// A scrape reads the throttle's state as it is now (closed once the window
// has emptied) without running the state-change hook: hooks run on the
// goroutine of a call, never inside the registry's gather.
func TestScrapeRunsNoStateChangeHook(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	reg := prometheus.NewRegistry()
	var changes []string
	s, err := New(Options{Clock: clk, Registerer: reg, Float64: func() float64 { return 0.99 },
		Hooks: Hooks{OnStateChange: func(_ string, from, to breaker.State) {
			changes = append(changes, from.String()+">"+to.String())
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]rules.Downstream{{Name: "pay", Breaker: &rules.Breaker{Kind: rules.BreakerKindThrottle}}}); err != nil {
		t.Fatal(err)
	}
	d := s.Get("pay")
	for range 100 {
		clk.Advance(10 * time.Millisecond)
		if c, err := d.Begin(clk.Nanotime()); err == nil {
			c.End(clk.Nanotime(), true, false)
		}
	}
	if len(changes) != 1 {
		t.Fatalf("changes %v during the outage, want one", changes)
	}
	clk.Advance(time.Hour)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 {
		t.Fatalf("the scrape ran the hook: changes %v", changes)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "governor_sdk_breaker_state" {
			for _, m := range mf.GetMetric() {
				found = true
				if v := m.GetGauge().GetValue(); v != float64(breaker.Closed) {
					t.Fatalf("state gauge %v an hour after the outage, want closed (%d)", v, breaker.Closed)
				}
			}
		}
	}
	if !found {
		t.Fatal("no governor_sdk_breaker_state sample")
	}
}
