package recommend

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// withBreakers is ruleset(perInstance) (nil rate: no rate limit) with a
// breaker downstream "payments" (slow_call and timeout as given, other
// fields set to be kept), a throttled one and one without a breaker.
func withBreakers(perInstance float64, slowCall, timeout time.Duration) *rules.Ruleset {
	rs := ruleset(perInstance)
	if perInstance == 0 {
		rs.Routes[0].RateLimit = nil
	}
	rs.Downstreams = []rules.Downstream{
		{Name: "payments", Timeout: rules.Duration(timeout), Breaker: &rules.Breaker{Window: rules.Duration(20 * time.Second),
			MinCalls: 30, ErrorRatio: 0.4, SlowCallRatio: 0.5, SlowCall: rules.Duration(slowCall)}},
		{Name: "search", Breaker: &rules.Breaker{Kind: rules.BreakerKindThrottle, K: 3}},
		{Name: "audit", Timeout: rules.Duration(time.Second)},
	}
	return rs
}

func activeRS(rs *rules.Ruleset) *versioning.Version {
	return &versioning.Version{Service: "checkout", Number: 1, State: versioning.StatePublished, Active: true, Ruleset: rs}
}

// entryP99 is entry(rate) with the given p99 latency in seconds.
func entryP99(rate, p99 float64) *signals.Entry {
	e := entry(rate)
	e.Values[signals.LatencyP99] = signals.KnownValue(p99)
	return e
}

// TestBreakerThresholds: the recommender (MinSamples 3, SlowCallFactor 2,
// deadband 20%, bounds 10ms..30s) turns the healthy p99 baseline into the
// breaker's slow_call. The expectations are worked out by hand: a p99 of
// 150ms gives 2 x 150ms = 300ms (two significant digits). The baseline is
// a sketch quantile with 1% relative accuracy: 150ms reads as 151ms.
func TestBreakerThresholds(t *testing.T) {
	tests := []struct {
		name    string
		in      Input
		n       int
		propose bool
		reason  string
		want    time.Duration // payments' slow_call in the proposal (0: no change)
		why     string        // in the evidence's breaker text or note
	}{
		{name: "inconclusive baselines change nothing", n: 2, reason: "baselines inconclusive (2 healthy intervals of 3 needed)",
			in: Input{Score: score(0.7), Entry: entry(990), Active: activeRS(withBreakers(500, 0, 0)), Instances: 2}},
		{name: "unset slow_call (1s) moves to 2 x p99", n: 3, propose: true, want: 300 * time.Millisecond,
			reason: "keep the ceiling at 1000.0 req/s", why: "payments: slow_call 1s -> 300ms: 2 x the healthy p99 baseline 151ms over 3 healthy intervals",
			in: Input{Score: score(0.7), Entry: entry(990), Active: activeRS(withBreakers(500, 0, 0)), Instances: 2}},
		{name: "330ms is within the 20% deadband of 300ms", n: 3, reason: "within 20% of the recommended 300ms",
			in: Input{Score: score(0.7), Entry: entry(990), Active: activeRS(withBreakers(500, 330*time.Millisecond, 0)), Instances: 2}},
		{name: "240ms is 25% off 300ms", n: 3, propose: true, want: 300 * time.Millisecond, why: "slow_call 240ms -> 300ms",
			in: Input{Score: score(0.7), Entry: entry(990), Active: activeRS(withBreakers(500, 240*time.Millisecond, 0)), Instances: 2}},
		{name: "capped at the downstream timeout", n: 3, propose: true, want: 200 * time.Millisecond, why: "capped at the downstream timeout 200ms",
			in: Input{Score: score(0.7), Entry: entry(990), Active: activeRS(withBreakers(500, 0, 200*time.Millisecond)), Instances: 2}},
		{name: "raised to the minimum", n: 3, propose: true, want: 10 * time.Millisecond, why: "raised to the minimum 10ms",
			in: Input{Score: score(0.7), Entry: entryP99(990, 0.002), Active: activeRS(withBreakers(500, 0, 0)), Instances: 2}},
		{name: "lowered to the maximum", n: 3, propose: true, want: 30 * time.Second, why: "lowered to the maximum 30s",
			in: Input{Score: score(0.7), Entry: entryP99(990, 20), Active: activeRS(withBreakers(500, 0, 0)), Instances: 2}},
		{name: "a service without rate limits gets the breaker change alone", n: 3, propose: true, want: 300 * time.Millisecond,
			reason: "breaker payments: slow_call 1s -> 300ms",
			in:     Input{Score: score(0.7), Entry: entry(990), Active: activeRS(withBreakers(0, 0, 0)), Instances: 2}},
		{name: "without rate limits and inside the deadband nothing", n: 3, reason: "no rate-limited route to govern; breaker thresholds unchanged",
			in: Input{Score: score(0.7), Entry: entry(990), Active: activeRS(withBreakers(0, 300*time.Millisecond, 0)), Instances: 2}},
		{name: "ceiling and breaker change together", n: 3, propose: true, want: 300 * time.Millisecond,
			reason: "lower the ceiling from 1000.0",
			in:     Input{Score: score(0.95), Entry: entry(990), Active: activeRS(withBreakers(500, 0, 0)), Instances: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Service = "checkout"
			rec := run(newRec(t), tt.in, tt.n)
			if (rec.Ruleset != nil) != tt.propose || !strings.Contains(rec.Reason, tt.reason) {
				t.Fatalf("ruleset %v, reason %q", rec.Ruleset != nil, rec.Reason)
			}
			if !tt.propose {
				return
			}
			if err := rec.Ruleset.Validate(); err != nil {
				t.Fatalf("invalid ruleset: %v", err)
			}
			ev := rec.Evidence
			if len(ev.Breakers) != 1 || ev.Breakers[0].Downstream != "payments" || !strings.Contains(ev.Breakers[0].Why, tt.why) {
				t.Fatalf("breakers %+v", ev.Breakers)
			}
			p99, _ := tt.in.Entry.Get(signals.LatencyP99).Get()
			if b := ev.Breakers[0]; math.Abs(b.BaselineP99/p99-1) > 0.02 ||
				b.HealthyIntervals != 3 || b.To != tt.want.Seconds() {
				t.Fatalf("breaker evidence %+v, want to %v", b, tt.want)
			}
			active := tt.in.Active.Ruleset.Downstreams
			ds := rec.Ruleset.Downstreams
			if got := ds[0].Breaker.SlowCall.D(); got != tt.want {
				t.Fatalf("slow_call %v, want %v", got, tt.want)
			}
			if a := active[0].Breaker; a.SlowCall == ds[0].Breaker.SlowCall && a.SlowCall.D() != tt.want {
				t.Fatal("the active ruleset was modified")
			}
			// Every other field is kept, other downstreams untouched.
			keep := *ds[0].Breaker
			keep.SlowCall = active[0].Breaker.SlowCall
			if keep != *active[0].Breaker || *ds[1].Breaker != *active[1].Breaker || ds[2].Breaker != nil || ds[0].Timeout != active[0].Timeout {
				t.Fatalf("downstreams %+v, active %+v", ds, active)
			}
			if _, err := json.Marshal(ev); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBoundSlowCall(t *testing.T) {
	tests := []struct {
		s    float64
		want time.Duration
		note string
	}{
		{0.3, 300 * time.Millisecond, ""},
		{0.2346, 230 * time.Millisecond, ""},
		{0.2351, 240 * time.Millisecond, ""},
		{1.234, 1200 * time.Millisecond, ""},
		{0.0152, 15 * time.Millisecond, ""},
		{0.004, 10 * time.Millisecond, "raised to the minimum 10ms"},
		{0.0004, 10 * time.Millisecond, "raised to the minimum 10ms"},
		{44, 30 * time.Second, "lowered to the maximum 30s"},
	}
	for _, tt := range tests {
		got, note := boundSlowCall(tt.s, 10*time.Millisecond, 30*time.Second)
		if got != tt.want || note != tt.note {
			t.Errorf("boundSlowCall(%v) = %v %q, want %v %q", tt.s, got, note, tt.want, tt.note)
		}
	}
}

func TestSlowCallOptions(t *testing.T) {
	tests := []struct {
		name  string
		set   func(o *Options)
		field string
	}{
		{"min below 1ms", func(o *Options) { o.SlowCallMin = time.Microsecond }, "SlowCallMin"},
		{"max below min", func(o *Options) { o.SlowCallMin, o.SlowCallMax = time.Second, time.Millisecond*500 }, "SlowCallMax"},
		{"max above 1h", func(o *Options) { o.SlowCallMax = 2 * time.Hour }, "SlowCallMax"},
		{"deadband 1", func(o *Options) { o.SlowCallDeadband = 1 }, "SlowCallDeadband"},
		{"negative deadband", func(o *Options) { o.SlowCallDeadband = -0.1 }, "SlowCallDeadband"},
	}
	for _, tt := range tests {
		o := DefaultOptions()
		tt.set(&o)
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: error %v does not name %s", tt.name, err, tt.field)
		}
	}
}

// TestBreakerProposalWaits: a breaker threshold change is outside every
// band, so even with the ceiling held it waits for approval, and the stored
// evidence names the baseline.
func TestBreakerProposalWaits(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.Propose(ctx, versioning.Proposal{Ruleset: withBreakers(500, 0, 0), Author: alice, Reason: "start"})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := st.Approve(ctx, "checkout", p.Number, bob, "ok")
	if err != nil {
		t.Fatal(err)
	}
	r := newRec(t)
	var rec Recommendation
	for range 3 {
		clk.Advance(10 * time.Second)
		rec = r.Evaluate(Input{At: clk.Now(), Service: "checkout", Score: score(0.7), Entry: entry(990), Active: &v1, Instances: 2})
	}
	sub, err := (&Proposer{Store: st, Clock: clk}).Submit(ctx, rec, Band{MaxChangePerHour: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sub.AutoApplied || sub.Version.State != versioning.StateProposed || !strings.Contains(sub.Policy, "breaker thresholds change") {
		t.Fatalf("submitted %+v", sub)
	}
	var ev struct {
		Breakers []BreakerChange `json:"breakers"`
		Ceiling  Ceiling         `json:"ceiling"`
	}
	if err := json.Unmarshal(sub.Version.Evidence, &ev); err != nil || len(ev.Breakers) != 1 || ev.Breakers[0].BaselineP99 == 0 ||
		ev.Ceiling.To != 1000 || ev.Ceiling.From != 1000 {
		t.Fatalf("evidence %s (%v)", sub.Version.Evidence, err)
	}
	var got time.Duration
	for _, d := range sub.Version.Ruleset.Downstreams {
		if d.Name == "payments" {
			got = d.Breaker.SlowCall.D()
		}
	}
	if got != 300*time.Millisecond {
		t.Fatalf("stored slow_call %v", got)
	}

	// Overload: the ceiling cut inside the band applies itself alone; the
	// breaker change is held back (slow_call stays unset).
	for range 3 {
		clk.Advance(10 * time.Second)
		rec = r.Evaluate(Input{At: clk.Now(), Service: "checkout", Score: score(0.95), Entry: entry(990), Active: &v1, Instances: 2})
	}
	if rec.Ruleset == nil || len(rec.Evidence.Breakers) != 1 || !(rec.Evidence.Ceiling.To < 1000) {
		t.Fatalf("recommendation %+v", rec)
	}
	cut, err := (&Proposer{Store: st, Clock: clk}).Submit(ctx, rec, Band{MaxChangePerHour: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !cut.AutoApplied || cut.Replaced != sub.Version.Number || !strings.Contains(cut.Policy, "breaker changes follow in a later proposal") ||
		strings.Contains(cut.Version.Reason, "slow_call") || !strings.Contains(cut.Version.Reason, "lower the ceiling") {
		t.Fatalf("ceiling cut %+v", cut)
	}
	for _, d := range cut.Version.Ruleset.Downstreams {
		if d.Name == "payments" && d.Breaker.SlowCall != 0 {
			t.Fatalf("the breaker change applied itself: %+v", d.Breaker)
		}
	}
	ev.Breakers = nil
	var note struct {
		BreakerNote string `json:"breaker_note"`
	}
	if err := json.Unmarshal(cut.Version.Evidence, &ev); err != nil || len(ev.Breakers) != 0 ||
		json.Unmarshal(cut.Version.Evidence, &note) != nil || !strings.Contains(note.BreakerNote, "held back") {
		t.Fatalf("evidence %s (%v)", cut.Version.Evidence, err)
	}
	// On the new version, at the setpoint, the breaker change comes alone
	// and waits.
	v2 := cut.Version
	for range 3 {
		clk.Advance(10 * time.Second)
		rec = r.Evaluate(Input{At: clk.Now(), Service: "checkout", Score: score(0.7), Entry: entry(990), Active: &v2, Instances: 2})
	}
	later, err := (&Proposer{Store: st, Clock: clk}).Submit(ctx, rec, Band{MaxChangePerHour: 1})
	if err != nil {
		t.Fatal(err)
	}
	if later.AutoApplied || later.Version.Parent != v2.Number || !strings.Contains(later.Version.Reason, "keep the ceiling") ||
		!strings.Contains(later.Version.Reason, "slow_call 1s -> 300ms") {
		t.Fatalf("breaker proposal on the new version %+v", later)
	}
}

// TestBreakerSlowCallOff: a breaker whose slow_call_ratio is unset or 1
// does not count slow calls (sdk/breaker), so its slow_call is never
// proposed: with no other change there is no proposal and the note says
// why; next to a breaker that counts slow calls only that one changes.
// Every other breaker knob stays as the ruleset has it.
func TestBreakerSlowCallOff(t *testing.T) {
	withRatio := func(perInstance, ratio float64) *rules.Ruleset {
		rs := withBreakers(perInstance, 0, 0)
		rs.Downstreams[0].Breaker.SlowCallRatio = ratio
		return rs
	}
	const off = "slow-call detection off (slow_call_ratio unset or 1) on payments"
	tests := []struct {
		name string
		rs   *rules.Ruleset
		note string // in the reason or the evidence's breaker note
	}{
		{"unset ratio, no rate limit", withRatio(0, 0), "no rate-limited route to govern; breaker thresholds unchanged: " + off},
		{"ratio 1, no rate limit", withRatio(0, 1), "breaker thresholds unchanged: " + off},
		{"unset ratio next to a rate limit", withRatio(500, 0), "breaker thresholds unchanged: " + off},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Service: "checkout", Score: score(0.7), Entry: entry(990), Active: activeRS(tt.rs), Instances: 2}
			rec := run(newRec(t), in, 3)
			note := ""
			if rec.Evidence != nil {
				if len(rec.Evidence.Breakers) != 0 {
					t.Fatalf("breaker changes %+v for a breaker that ignores slow_call", rec.Evidence.Breakers)
				}
				note = rec.Evidence.BreakerNote
			}
			if rec.Ruleset != nil {
				for _, d := range rec.Ruleset.Downstreams {
					if d.Breaker != nil && d.Name == "payments" && d.Breaker.SlowCall != 0 {
						t.Fatalf("slow_call set to %v", d.Breaker.SlowCall.D())
					}
				}
			}
			if !strings.Contains(rec.Reason, tt.note) && !strings.Contains(note, tt.note) {
				t.Fatalf("reason %q, breaker note %q: want %q", rec.Reason, note, tt.note)
			}
		})
	}

	t.Run("only the breaker that counts slow calls changes", func(t *testing.T) {
		rs := withBreakers(0, 0, 0)
		rs.Downstreams = append(rs.Downstreams, rules.Downstream{Name: "ledger", Breaker: &rules.Breaker{
			MinCalls: 10, ErrorRatio: 0.3, SlowCall: rules.Duration(2 * time.Second)}})
		in := Input{Service: "checkout", Score: score(0.7), Entry: entry(990), Active: activeRS(rs), Instances: 2}
		rec := run(newRec(t), in, 3)
		if rec.Ruleset == nil || len(rec.Evidence.Breakers) != 1 || rec.Evidence.Breakers[0].Downstream != "payments" {
			t.Fatalf("reason %q, breakers %+v", rec.Reason, rec.Evidence.Breakers)
		}
		if got := *rec.Ruleset.Downstreams[3].Breaker; got != *rs.Downstreams[3].Breaker {
			t.Fatalf("ledger breaker %+v, want it unchanged %+v", got, *rs.Downstreams[3].Breaker)
		}
	})
}
