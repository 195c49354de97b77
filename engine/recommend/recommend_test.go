package recommend

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/loadscore"
	"governor.dev/governor/engine/signals"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ruleset(perInstance float64) *rules.Ruleset {
	return &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
		Name: "api", Match: rules.Match{PathPrefix: "/api/"},
		RateLimit:   &rules.RateLimit{Rate: perInstance},
		Concurrency: &rules.Concurrency{Initial: 20, Min: 2, Max: 40},
	}}}
}

func active(perInstance float64, evidence json.RawMessage) *versioning.Version {
	return &versioning.Version{Service: "checkout", Number: 1, State: versioning.StatePublished, Active: true,
		Ruleset: ruleset(perInstance), Evidence: evidence}
}

func entry(rate float64) *signals.Entry {
	e := &signals.Entry{Key: signals.Key{Service: "checkout"}, Values: map[signals.Signal]signals.Value{}}
	for _, s := range signals.All {
		e.Values[s] = signals.Unknown(signals.Missing, "no series")
	}
	e.Values[signals.RequestRate] = signals.KnownValue(rate)
	e.Values[signals.ErrorRatio] = signals.KnownValue(0.001)
	e.Values[signals.LatencyP50] = signals.KnownValue(0.02)
	e.Values[signals.LatencyP99] = signals.KnownValue(0.15)
	return e
}

func score(v float64) loadscore.Score {
	if math.IsNaN(v) {
		return loadscore.Score{Value: math.NaN(), Raw: loadscore.Raw{Score: math.NaN(), Reason: "latency unknown"}}
	}
	return loadscore.Score{Value: v, Known: true, Raw: loadscore.Raw{Score: v, Known: true, KnownWeight: 1,
		Terms: []loadscore.Contribution{{Term: loadscore.Latency, Known: true, Normalized: v, Weight: 1, EffectiveWeight: 1, Contribution: v}}}}
}

func newRec(t *testing.T) *Recommender {
	t.Helper()
	o := DefaultOptions()
	o.MinScores = 2
	o.Thresholds.MinSamples = 3
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run evaluates the same input n times, 10 s apart, and returns the last.
func run(r *Recommender, in Input, n int) Recommendation {
	var rec Recommendation
	for i := range n {
		in.At = t0.Add(time.Duration(i) * 10 * time.Second)
		rec = r.Evaluate(in)
	}
	return rec
}

func TestEvaluate(t *testing.T) {
	withCeiling := json.RawMessage(`{"ceiling":{"from":800,"to":1000,"instances":2,"routes":{"api":1000},"per_instance":{"api":500}}}`)
	tests := []struct {
		name         string
		in           Input
		n            int
		inconclusive bool
		propose      bool
		reason       string
		check        func(t *testing.T, rec Recommendation)
	}{
		{name: "unknown score", n: 5, inconclusive: true, reason: "load score unknown",
			in: Input{Service: "checkout", Score: score(math.NaN()), Entry: entry(900), Active: active(500, nil), Instances: 2}},
		{name: "too few known scores", n: 1, inconclusive: true, reason: "1 of 2",
			in: Input{Service: "checkout", Score: score(0.9), Entry: entry(900), Active: active(500, nil), Instances: 2}},
		{name: "no active version", n: 5, inconclusive: true, reason: "no active version",
			in: Input{Service: "checkout", Score: score(0.9), Entry: entry(900)}},
		{name: "no live instance", n: 5, inconclusive: true, reason: "no live instance",
			in: Input{Service: "checkout", Score: score(0.9), Entry: entry(900), Active: active(500, nil)}},
		{name: "rate unknown", n: 5, inconclusive: true, reason: "request rate unknown",
			in: Input{Service: "checkout", Score: score(0.9), Entry: &signals.Entry{}, Active: active(500, nil), Instances: 2}},
		{name: "at the setpoint nothing moves", n: 5, reason: "below the minimum",
			in: Input{Service: "checkout", Score: score(0.7), Entry: entry(990), Active: active(500, nil), Instances: 2}},
		{name: "idle and not binding", n: 5, reason: "not binding",
			in: Input{Service: "checkout", Score: score(0.2), Entry: entry(300), Active: active(500, nil), Instances: 2}},
		{name: "overload lowers the ceiling", n: 3, propose: true, reason: "lower the ceiling from 1000.0",
			in: Input{Service: "checkout", Score: score(0.95), Entry: entry(990), Active: active(500, nil), Instances: 2},
			check: func(t *testing.T, rec Recommendation) {
				ev := rec.Evidence
				if !(ev.Ceiling.To < 1000) || ev.PID.P >= 0 || ev.PID.Output != ev.Ceiling.To {
					t.Fatalf("ceiling %v, pid %+v", ev.Ceiling, ev.PID)
				}
				per := rec.Ruleset.Routes[0].RateLimit.Rate
				if math.Abs(per-ev.Ceiling.To/2) > 0.1 || ev.Ceiling.PerInstance["api"] != per {
					t.Fatalf("per-instance %v for ceiling %v over 2", per, ev.Ceiling.To)
				}
				if c := rec.Ruleset.Routes[0].Concurrency; c.Max >= 40 || c.Initial > c.Max {
					t.Fatalf("concurrency %+v", c)
				}
				if ev.ExpectedShedRatio <= 0 || ev.Confidence <= 0 || ev.Confidence > 1 || *ev.Signals[signals.RequestRate] != 990 {
					t.Fatalf("evidence %+v", ev)
				}
				if ev.Signals[signals.CPU] != nil {
					t.Fatal("unknown signal reported as a value")
				}
				if rec.Base != 1 {
					t.Fatalf("base %d", rec.Base)
				}
			}},
		{name: "overload below a slack ceiling cuts the offered rate", n: 3, propose: true, reason: "lower the ceiling",
			in: Input{Service: "checkout", Score: score(0.95), Entry: entry(400), Active: active(500, nil), Instances: 2},
			check: func(t *testing.T, rec Recommendation) {
				if to := rec.Evidence.Ceiling.To; !(to < 400) {
					t.Fatalf("ceiling %v not below the offered 400", to)
				}
			}},
		{name: "a slack ceiling's cut stops at the band's floor", n: 3, propose: true, reason: "lower the ceiling",
			in: Input{Service: "checkout", Score: score(0.95), Entry: entry(400), Active: active(500, nil), Instances: 2, Band: Band{Floor: 350}},
			check: func(t *testing.T, rec Recommendation) {
				if to := rec.Evidence.Ceiling.To; to != 350 {
					t.Fatalf("ceiling %v, want the floor 350", to)
				}
			}},
		{name: "a floor above the offered rate leaves a slack ceiling alone", n: 3, reason: "the band's floor 900.0 req/s keeps any cut above the offered rate",
			in: Input{Service: "checkout", Score: score(0.95), Entry: entry(400), Active: active(500, nil), Instances: 2, Band: Band{Floor: 900}}},
		{name: "underload with a binding ceiling raises it", n: 3, propose: true, reason: "raise the ceiling",
			in: Input{Service: "checkout", Score: score(0.3), Entry: entry(1000), Active: active(500, nil), Instances: 2}},
		{name: "a new instance re-splits the ceiling", n: 3, propose: true, reason: "re-split the 1000.0 req/s ceiling over 3",
			in: Input{Service: "checkout", Score: score(0.7), Entry: entry(900), Active: active(500, withCeiling), Instances: 3},
			check: func(t *testing.T, rec Recommendation) {
				if per := rec.Ruleset.Routes[0].RateLimit.Rate; per != 333.3 {
					t.Fatalf("per instance %v, want 333.3", per)
				}
			}},
		{name: "the band bounds the controller", n: 30, propose: true,
			in: Input{Service: "checkout", Score: score(1), Entry: entry(1000), Active: active(500, nil), Instances: 2, Band: Band{Floor: 900}},
			check: func(t *testing.T, rec Recommendation) {
				if rec.Evidence.Ceiling.To < 900 {
					t.Fatalf("ceiling %v below the floor", rec.Evidence.Ceiling.To)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := run(newRec(t), tt.in, tt.n)
			if rec.Inconclusive != tt.inconclusive || (rec.Ruleset != nil) != tt.propose || !strings.Contains(rec.Reason, tt.reason) {
				t.Fatalf("inconclusive %v, ruleset %v, reason %q", rec.Inconclusive, rec.Ruleset != nil, rec.Reason)
			}
			if rec.Ruleset != nil {
				if err := rec.Ruleset.Validate(); err != nil {
					t.Fatalf("invalid ruleset: %v", err)
				}
				if _, err := json.Marshal(rec.Evidence); err != nil {
					t.Fatalf("evidence does not encode: %v", err)
				}
			}
			if tt.check != nil {
				tt.check(t, rec)
			}
		})
	}
}

func TestBandAllows(t *testing.T) {
	tests := []struct {
		band    Band
		ref, to float64
		want    bool
	}{
		{DefaultBand(), 1000, 1090, true},
		{DefaultBand(), 1000, 911, true},
		{DefaultBand(), 1000, 1200, false},
		{Band{Manual: true, MaxChangePerHour: 1}, 1000, 1010, false},
		{Band{MaxChangePerHour: 1, Floor: 950}, 1000, 900, false},
		{Band{MaxChangePerHour: 1, Ceiling: 1050}, 1000, 1100, false},
		{DefaultBand(), 0, 10, false},
		{DefaultBand(), 1000, math.NaN(), false},
		{DefaultBand(), 1000, math.Inf(1), false},
		{DefaultBand(), 1000, 0, false},
	}
	for _, tt := range tests {
		if got, why := tt.band.Allows(tt.ref, tt.to); got != tt.want || why == "" {
			t.Errorf("%+v.Allows(%v, %v) = %v (%s), want %v", tt.band, tt.ref, tt.to, got, why, tt.want)
		}
	}
	if err := (Band{Floor: 10, Ceiling: 5}).Validate("bands.x"); err == nil || !strings.Contains(err.Error(), "bands.x.floor") {
		t.Fatalf("validate: %v", err)
	}
}

func TestOptionsNameEveryError(t *testing.T) {
	o := DefaultOptions()
	o.Setpoint, o.MinScores, o.Binding = 2, -1, 3
	_, err := New(o)
	for _, f := range []string{"Setpoint", "MinScores", "Binding"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
}

var (
	alice = versioning.Actor{Name: "alice", Roles: []versioning.Role{versioning.RoleOperator}}
	bob   = versioning.Actor{Name: "bob", Roles: []versioning.Role{versioning.RoleApprover}}
)

func TestProposer(t *testing.T) {
	ctx := context.Background()
	clk, st, v1 := checkoutAt500(t)
	r := newRec(t)
	pr := &Proposer{Store: st, Clock: clk}
	evaluate := func(sc float64, rate float64, act *versioning.Version) Recommendation {
		var rec Recommendation
		for range 3 {
			clk.Advance(10 * time.Second)
			rec = r.Evaluate(Input{At: clk.Now(), Service: "checkout", Score: score(sc), Entry: entry(rate), Active: act, Instances: 2})
		}
		return rec
	}

	// A large cut exceeds the 10% band: it waits for approval.
	rec := evaluate(1, 1000, &v1)
	if rec.Ruleset == nil {
		t.Fatalf("no recommendation: %s", rec.Reason)
	}
	big, err := pr.Submit(ctx, rec, DefaultBand())
	if err != nil {
		t.Fatal(err)
	}
	if big.AutoApplied || big.Version.State != versioning.StateProposed || big.Version.Source != versioning.SourceEngine {
		t.Fatalf("submitted %+v", big)
	}
	// The same content again keeps the open proposal.
	again, err := pr.Submit(ctx, rec, DefaultBand())
	if err != nil || !again.Unchanged || again.Version.Number != big.Version.Number {
		t.Fatalf("resubmit: %+v %v", again, err)
	}
	// A newer recommendation revises it in place: one open proposal per
	// service.
	rec2 := evaluate(1, 1000, &v1)
	upd, err := pr.Submit(ctx, rec2, DefaultBand())
	if err != nil {
		t.Fatal(err)
	}
	if !upd.Revised || upd.Replaced != 0 || upd.Version.Number != big.Version.Number || upd.Version.Revision != 1 {
		t.Fatalf("want v%d revised, got %+v", big.Version.Number, upd)
	}
	open, _ := st.List(ctx, versioning.ListFilter{Service: "checkout", States: []versioning.State{versioning.StateProposed}})
	if len(open) != 1 || open[0].Number != upd.Version.Number {
		t.Fatalf("open proposals %+v", open)
	}
	var ev map[string]any
	if err := json.Unmarshal(upd.Version.Evidence, &ev); err != nil || ev["pid"] == nil || ev["expected_effect"] == nil || ev["auto_apply"] != false {
		t.Fatalf("evidence %s (%v)", upd.Version.Evidence, err)
	}

	// A small change inside the band applies itself, audited as the engine.
	small := rec2
	small.Ruleset = ruleset(475)
	small.Evidence = &Evidence{Ceiling: Ceiling{From: 1000, To: 950, Instances: 2, Routes: map[string]float64{"api": 950}}}
	small.Reason = "small cut"
	auto, err := pr.Submit(ctx, small, DefaultBand())
	if err != nil {
		t.Fatal(err)
	}
	if !auto.AutoApplied || !auto.Version.Active || auto.Version.Author != "engine" {
		t.Fatalf("auto %+v", auto)
	}
	// Another 8% within the same hour adds up beyond the band.
	next := small
	next.Base = auto.Version.Number
	next.Ruleset = ruleset(437)
	next.Evidence = &Evidence{Ceiling: Ceiling{From: 950, To: 874, Instances: 2, Routes: map[string]float64{"api": 874}}}
	held, err := pr.Submit(ctx, next, DefaultBand())
	if err != nil {
		t.Fatal(err)
	}
	if held.AutoApplied || !strings.Contains(held.Policy, "exceeds the band") {
		t.Fatalf("cumulative change applied itself: %+v", held)
	}
	// A manual service never applies itself.
	next.Ruleset = ruleset(470)
	next.Evidence = &Evidence{Ceiling: Ceiling{From: 950, To: 940, Instances: 2, Routes: map[string]float64{"api": 940}}}
	man, err := pr.Submit(ctx, next, Band{Manual: true, MaxChangePerHour: 1})
	if err != nil || man.AutoApplied {
		t.Fatalf("manual: %+v %v", man, err)
	}
	entries, err := st.Audit(ctx, versioning.AuditFilter{Service: "checkout"})
	if err != nil {
		t.Fatal(err)
	}
	var autoBy string
	for _, e := range entries {
		if e.Action == versioning.ActionAutoApply {
			autoBy = e.Actor
		}
	}
	if autoBy != "engine" {
		t.Fatalf("auto-apply audited as %q", autoBy)
	}
	if _, err := st.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkoutAt500 is a rules store on a fake clock at t0 whose checkout
// service runs ruleset(500) as v1, proposed by alice and approved by bob.
func checkoutAt500(t *testing.T) (*clock.Fake, versioning.Store, versioning.Version) {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := st.Propose(ctx, versioning.Proposal{Ruleset: ruleset(500), Author: alice, Reason: "start"})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := st.Approve(ctx, "checkout", p.Number, bob, "ok")
	if err != nil {
		t.Fatal(err)
	}
	return clk, st, v1
}

// The per-instance rates the SDK enforces add up to the service-wide
// ceiling the evidence names, within 1%, from one instance to a thousand.
func TestPerInstanceRatesEnforceTheCeilingInTheEvidenceAtAnyInstanceCount(t *testing.T) {
	tests := []struct {
		instances   int
		perInstance float64
	}{
		{1, 500}, {3, 3.3}, {400, 1}, {1000, 0.05}, {250, 0.4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.instances), func(t *testing.T) {
			r := newRec(t)
			c := float64(tt.instances) * tt.perInstance
			in := Input{Service: "checkout", Score: score(0.95), Entry: entry(c), Active: active(tt.perInstance, nil), Instances: tt.instances, Band: DefaultBand()}
			rec := run(r, in, 3)
			if rec.Ruleset == nil {
				t.Fatalf("no recommendation: %s", rec.Reason)
			}
			per := rec.Ruleset.Routes[0].RateLimit.Rate
			enforced := per * float64(tt.instances)
			want := rec.Evidence.Ceiling.Routes["api"]
			if math.Abs(enforced/want-1) > 0.01 {
				t.Fatalf("%d instances at %v req/s each enforce %v req/s, evidence says %v (ceiling to %v); effect: %s",
					tt.instances, per, enforced, want, rec.Evidence.Ceiling.To, rec.Evidence.ExpectedEffect)
			}
			if got := rec.Evidence.Ceiling.PerInstance["api"]; got != per {
				t.Fatalf("evidence per instance %v, ruleset %v", got, per)
			}
		})
	}
}

// A proposal waiting for approval does not move the ceiling in force, so
// the load cannot answer it: the controller must not wind the proposal
// down to the band's floor meanwhile (a 90% cut expected to bring the
// score to 0.10 after two minutes), but hold it where, by the evidence's
// own estimate, it answers the error.
func TestAProposalWaitingForApprovalDoesNotWindTheControllerDown(t *testing.T) {
	in := Input{Service: "checkout", Score: score(0.95), Entry: entry(1000), Active: active(500, nil), Instances: 2, Band: DefaultBand()}
	settled := run(newRec(t), in, 12)
	for _, n := range []int{3, 6, 12, 60} {
		rec := run(newRec(t), in, n)
		require.NotNil(t, rec.Ruleset, rec.Reason)
		ev := rec.Evidence
		require.Less(t, ev.Ceiling.To, 1000.0, "still a cut")
		require.GreaterOrEqual(t, ev.ExpectedScore, 0.6, "after %d evaluations: %s", n, rec.Reason)
		if n >= 12 {
			require.Equal(t, settled.Evidence.Ceiling.To, ev.Ceiling.To, "after %d evaluations the waiting proposal moved", n)
		}
	}
}
