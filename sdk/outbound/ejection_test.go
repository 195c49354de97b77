package outbound

import (
	"slices"
	"testing"
	"time"

	"governor.dev/governor/sdk/balancer"
	"governor.dev/governor/sdk/rules"
)

// failPicks fails n calls picked by the downstream's balancer.
func (f *fixture) failPicks(name string, n int) {
	f.t.Helper()
	bal := f.set.Get(name).Balancer()
	for range n {
		p, err := bal.Pick(f.clk.Nanotime())
		if err != nil {
			f.t.Fatal(err)
		}
		f.clk.Advance(time.Millisecond)
		bal.Done(p, f.clk.Nanotime(), true)
	}
}

func (f *fixture) series(name, ds string) float64 {
	f.t.Helper()
	for _, m := range f.gathered(name) {
		if label(m, "downstream") == ds {
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	f.t.Fatalf("no %s series for %s", name, ds)
	return 0
}

func percent(p int) *int { return &p }

// TestConsecutiveFailuresFromTheRulesEject: a ruleset's
// balancer.consecutive_failures reaches the balancer: the endpoint is
// ejected after that many failures in a row, not before, for
// base_ejection_time.
func TestConsecutiveFailuresFromTheRulesEject(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "api", Balancer: &rules.Balancer{
		ConsecutiveFailures: 3, BaseEjectionTime: rules.Duration(10 * time.Second)}})
	f.set.SetEndpoints("api", []string{"10.0.0.1:80"})
	bal := f.set.Get("api").Balancer()
	f.failPicks("api", 2)
	if got := bal.Ejected(f.clk.Nanotime()); len(got) != 0 {
		t.Fatalf("ejected %v after 2 failures, want none before 3", got)
	}
	f.failPicks("api", 1)
	if got := bal.Ejected(f.clk.Nanotime()); !slices.Equal(got, []string{"10.0.0.1:80"}) {
		t.Fatalf("ejected %v after 3 failures, want the endpoint", got)
	}
	if got := f.gathered("governor_sdk_downstream_endpoints"); len(got) != 2 {
		t.Fatalf("endpoint series %v", got)
	}
	f.clk.Advance(10 * time.Second)
	if got := bal.Ejected(f.clk.Nanotime()); len(got) != 0 {
		t.Fatalf("ejected %v after base_ejection_time, want it back", got)
	}
}

// TestSkippedEjectionsAreExported: with max_ejection_percent 50 of two
// endpoints, the second failing endpoint is not ejected, and
// governor_sdk_downstream_ejections_skipped_total counts the refusal.
func TestSkippedEjectionsAreExported(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "api", Balancer: &rules.Balancer{ConsecutiveFailures: 3, MaxEjectionPercent: percent(50)}})
	if got := f.series("governor_sdk_downstream_ejections_skipped_total", "api"); got != 0 {
		t.Fatalf("skipped %v before any endpoint, want a series at 0", got)
	}
	f.set.SetEndpoints("api", []string{"10.0.0.1:80", "10.0.0.2:80"})
	bal := f.set.Get("api").Balancer()
	for range 10 {
		if len(bal.Ejected(f.clk.Nanotime())) == 1 {
			break
		}
		f.failPicks("api", 1)
	}
	if len(bal.Ejected(f.clk.Nanotime())) != 1 {
		t.Fatal("no endpoint ejected")
	}
	f.failPicks("api", 3) // all go to the endpoint left
	if got := bal.Ejected(f.clk.Nanotime()); len(got) != 1 {
		t.Fatalf("ejected %v, want one of two with max_ejection_percent 50", got)
	}
	if got := f.series("governor_sdk_downstream_ejections_skipped_total", "api"); got != 1 {
		t.Fatalf("skipped %v, want 1", got)
	}

	// A balancer rule change rebuilds the balancer: the ejection stays and
	// the counters do not go back.
	f.apply(rules.Downstream{Name: "api", Balancer: &rules.Balancer{ConsecutiveFailures: 3, MaxEjectionPercent: percent(50), SlowStart: rules.Duration(time.Second)}})
	if f.set.Get("api").Balancer() == bal {
		t.Fatal("balancer not rebuilt")
	}
	if got := f.set.Get("api").Balancer().Ejected(f.clk.Nanotime()); len(got) != 1 {
		t.Fatalf("ejected %v after the rule change, want the ejection kept", got)
	}
	if got := f.series("governor_sdk_downstream_ejections_skipped_total", "api"); got != 1 {
		t.Fatalf("skipped %v after the rule change, want 1 kept", got)
	}
	f.failPicks("api", 3)
	if got := f.series("governor_sdk_downstream_ejections_skipped_total", "api"); got != 2 {
		t.Fatalf("skipped %v, want 2", got)
	}
}

// TestEjectionRuleChangesReachTheBalancer: lowering
// consecutive_failures in force ejects sooner.
func TestEjectionRuleChangesReachTheBalancer(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "api", Balancer: &rules.Balancer{ConsecutiveFailures: 5, PanicThreshold: new(float64)}})
	f.set.SetEndpoints("api", []string{"10.0.0.1:80"})
	f.apply(rules.Downstream{Name: "api", Balancer: &rules.Balancer{ConsecutiveFailures: 2, PanicThreshold: new(float64)}})
	f.failPicks("api", 2)
	if got := f.set.Get("api").Balancer().Ejected(f.clk.Nanotime()); len(got) != 1 {
		t.Fatalf("ejected %v after 2 failures with consecutive_failures 2", got)
	}
}

// TestPanicPicksDoNotGoBackOnARuleChange: panic picks counted before a
// balancer rule change stay counted after it.
func TestPanicPicksDoNotGoBackOnARuleChange(t *testing.T) {
	f := newFixture(t)
	f.apply(rules.Downstream{Name: "api", Breaker: brk(), Balancer: &rules.Balancer{}})
	f.set.SetEndpoints("api", []string{"10.0.0.1:80"})
	f.failPicks("api", 5) // opens the endpoint's breaker
	f.failPicks("api", 3) // panic picks
	if got := f.series("governor_sdk_downstream_panic_picks_total", "api"); got != 3 {
		t.Fatalf("panic picks %v, want 3", got)
	}
	f.apply(rules.Downstream{Name: "api", Breaker: brk(), Balancer: &rules.Balancer{SlowStart: rules.Duration(time.Second)}})
	if got := f.series("governor_sdk_downstream_panic_picks_total", "api"); got != 3 {
		t.Fatalf("panic picks %v after a rule change, want 3 kept", got)
	}
}

// TestEjectionTimeDefaultsMatchTheBalancer: rules validation checks
// max_ejection_time against the balancer's default base time.
func TestEjectionTimeDefaultsMatchTheBalancer(t *testing.T) {
	ok := &rules.Ruleset{Service: "s", Downstreams: []rules.Downstream{{Name: "d", Balancer: &rules.Balancer{
		ConsecutiveFailures: 1, MaxEjectionTime: rules.Duration(balancer.DefaultEjectionBaseTime)}}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("max_ejection_time at the default base time refused: %v", err)
	}
	ok.Downstreams[0].Balancer.MaxEjectionTime--
	if err := ok.Validate(); err == nil {
		t.Fatal("max_ejection_time below the default base time accepted")
	}
	ok.Downstreams[0].Balancer.MaxEjectionTime = 0
	ok.Downstreams[0].Balancer.BaseEjectionTime = rules.Duration(balancer.DefaultEjectionMaxTime)
	if err := ok.Validate(); err != nil {
		t.Fatalf("base_ejection_time at the default max time refused: %v", err)
	}
	ok.Downstreams[0].Balancer.BaseEjectionTime++
	if err := ok.Validate(); err == nil {
		t.Fatal("base_ejection_time above the default max time accepted")
	}
}
