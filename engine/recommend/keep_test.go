package recommend

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// openRuleset is the ruleset of the open proposal and its variants: a
// per-instance rate, the concurrency upper bound, and the payments
// breaker's slow_call threshold.
func openRuleset(rate float64, maxConc int, slowCall time.Duration) *rules.Ruleset {
	rs := withBreakers(rate, slowCall, 2*time.Second)
	rs.Routes[0].Concurrency.Max = maxConc
	return rs
}

// TestOpenProposalDeadband: an open engine proposal (400 req/s per
// instance, concurrency max 32, slow_call 300ms, waiting for approval)
// keeps its ruleset when the next recommendation moves the rate and
// concurrency bounds by at most the deadband (default 10% of the open
// values) and changes nothing else; otherwise it is revised in place with
// the new ruleset; a recommendation that applies itself replaces it. The
// percentages are
// worked out by hand: 420/400 = +5%, 33/32 = +3.1%, 440/400 = +10%,
// 360/400 = -10%, 450/400 = +12.5%, 36/32 = +12.5%.
func TestOpenProposalDeadband(t *testing.T) {
	manual := Band{Manual: true, MaxChangePerHour: 0.1}
	tests := []struct {
		name     string
		deadband float64
		next     *rules.Ruleset
		band     Band
		to       float64 // service-wide ceiling of the next recommendation
		kept     bool
		keptWhy  string // substring of Submitted.Kept
		auto     bool
	}{
		{"same content", 0, openRuleset(400, 32, 300*time.Millisecond), manual, 800, true, "", false},
		{"5% rate, 3.1% concurrency", 0, openRuleset(420, 33, 300*time.Millisecond), manual, 840, true, "at most 5.0%, inside the deadband of 10.0%", false},
		{"10% up, on the edge", 0, openRuleset(440, 32, 300*time.Millisecond), manual, 880, true, "at most 10.0%", false},
		{"10% down, on the edge", 0, openRuleset(360, 32, 300*time.Millisecond), manual, 720, true, "at most 10.0%", false},
		{"12.5% rate", 0, openRuleset(450, 32, 300*time.Millisecond), manual, 900, false, "", false},
		{"12.5% concurrency", 0, openRuleset(400, 36, 300*time.Millisecond), manual, 800, false, "", false},
		{"12.5% rate inside a 20% deadband", 0.2, openRuleset(450, 32, 300*time.Millisecond), manual, 900, true, "at most 12.5%, inside the deadband of 20.0%", false},
		{"breaker change with a small rate move", 0, openRuleset(410, 32, 350*time.Millisecond), manual, 820, false, "", false},
		{"breaker change alone", 0, openRuleset(400, 32, 350*time.Millisecond), manual, 800, false, "", false},
		{"route added", 0, func() *rules.Ruleset {
			rs := openRuleset(400, 32, 300*time.Millisecond)
			rs.Routes = append(rs.Routes, rules.Route{Name: "web", Match: rules.Match{PathPrefix: "/web/"}})
			return rs
		}(), manual, 800, false, "", false},
		// 940/1000 is a 6% move the band pre-approves: it applies itself
		// and replaces the open proposal rather than waiting behind it.
		{"small move the band applies", 0, openRuleset(470, 32, 300*time.Millisecond), DefaultBand(), 940, false, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(t0)
			st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			p, err := st.Propose(ctx, versioning.Proposal{Ruleset: openRuleset(500, 40, 300*time.Millisecond), Author: alice, Reason: "start"})
			if err != nil {
				t.Fatal(err)
			}
			v1, err := st.Approve(ctx, "checkout", p.Number, bob, "ok")
			if err != nil {
				t.Fatal(err)
			}
			recFor := func(rs *rules.Ruleset, to float64) Recommendation {
				return Recommendation{Service: "checkout", Base: v1.Number, Ruleset: rs, Reason: "move the ceiling",
					Evidence: &Evidence{Ceiling: Ceiling{From: 1000, To: to, Instances: 2, Routes: map[string]float64{"api": to}}}}
			}
			pr := &Proposer{Store: st, Clock: clk, OpenDeadband: tc.deadband}
			open, err := pr.Submit(ctx, recFor(openRuleset(400, 32, 300*time.Millisecond), 800), manual)
			if err != nil {
				t.Fatal(err)
			}
			if open.AutoApplied || open.Version.State != versioning.StateProposed {
				t.Fatalf("open proposal %+v", open)
			}
			before, err := st.List(ctx, versioning.ListFilter{Service: "checkout"})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(10 * time.Second)
			sub, err := pr.Submit(ctx, recFor(tc.next, tc.to), tc.band)
			if err != nil {
				t.Fatal(err)
			}
			after, err := st.List(ctx, versioning.ListFilter{Service: "checkout"})
			if err != nil {
				t.Fatal(err)
			}
			proposed, err := st.List(ctx, versioning.ListFilter{Service: "checkout", States: []versioning.State{versioning.StateProposed}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.kept {
				if !sub.Unchanged || sub.Version.Number != open.Version.Number || sub.Replaced != 0 ||
					sub.Revised || sub.Version.Revision != 0 {
					t.Fatalf("want the open v%d kept as it is (evidence refreshed at most once a minute), got %+v", open.Version.Number, sub)
				}
				if !strings.Contains(sub.Kept, tc.keptWhy) {
					t.Fatalf("kept %q, want it to contain %q", sub.Kept, tc.keptWhy)
				}
				if len(after) != len(before) {
					t.Fatalf("%d versions after, %d before: a new version was proposed", len(after), len(before))
				}
				if len(proposed) != 1 || proposed[0].Number != open.Version.Number {
					t.Fatalf("open proposals %+v", proposed)
				}
				return
			}
			if sub.Unchanged || sub.Kept != "" {
				t.Fatalf("want the ruleset of v%d moved, got %+v", open.Version.Number, sub)
			}
			want, err := tc.next.Checksum()
			if err != nil {
				t.Fatal(err)
			}
			if sub.Version.Checksum != want {
				t.Fatalf("checksum %s, want the new ruleset's %s", sub.Version.Checksum, want)
			}
			if !tc.auto {
				// Revised in place: same number, revision 1, nothing stacked.
				if !sub.Revised || sub.Replaced != 0 || sub.AutoApplied || sub.Version.Number != open.Version.Number ||
					sub.Version.Revision != 1 || !sub.Version.RevisedAt.Equal(clk.Now()) {
					t.Fatalf("want v%d revised, got %+v", open.Version.Number, sub)
				}
				if len(after) != len(before) {
					t.Fatalf("%d versions after, %d before: a new version was proposed", len(after), len(before))
				}
				if len(proposed) != 1 || proposed[0].Number != open.Version.Number {
					t.Fatalf("open proposals %+v", proposed)
				}
				return
			}
			if !sub.AutoApplied || sub.Revised || sub.Replaced != open.Version.Number || sub.Version.Number == open.Version.Number {
				t.Fatalf("want v%d replaced by a version that applies itself, got %+v", open.Version.Number, sub)
			}
			if len(after) != len(before)+1 {
				t.Fatalf("%d versions after, %d before: want one new version", len(after), len(before))
			}
			if len(proposed) != 0 {
				t.Fatalf("open proposals %+v, want none", proposed)
			}
			for _, v := range after {
				if v.Number == open.Version.Number && v.State != versioning.StateWithdrawn {
					t.Fatalf("replaced v%d is %s, want withdrawn", v.Number, v.State)
				}
			}
		})
	}
}

func TestProposerOptions(t *testing.T) {
	st := versioning.Store(nil)
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		name  string
		p     Proposer
		field string // "" for valid
	}{
		{"default", Proposer{Store: s}, ""},
		{"set", Proposer{Store: s, OpenDeadband: 0.25}, ""},
		{"negative", Proposer{Store: s, OpenDeadband: -0.1}, "Proposer.OpenDeadband"},
		{"one", Proposer{Store: s, OpenDeadband: 1}, "Proposer.OpenDeadband"},
		{"NaN", Proposer{Store: s, OpenDeadband: math.NaN()}, "Proposer.OpenDeadband"},
		{"refresh every submission", Proposer{Store: s, EvidenceRefresh: -1}, ""},
		{"refresh every 5 minutes", Proposer{Store: s, EvidenceRefresh: 5 * time.Minute}, ""},
		{"refresh beyond a day", Proposer{Store: s, EvidenceRefresh: 25 * time.Hour}, "Proposer.EvidenceRefresh"},
		{"no store", Proposer{Store: st}, "Proposer.Store"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want %v naming %s", err, ErrInvalidOption, tc.field)
			}
			// Submit refuses the same options before touching the store.
			rec := Recommendation{Service: "checkout", Ruleset: ruleset(400), Evidence: &Evidence{}}
			if _, err := tc.p.Submit(ctx, rec, DefaultBand()); !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("submit: %v, want %v", err, ErrInvalidOption)
			}
		})
	}
}

// TestKeptRulesetKeepsItsCeilingInTheEvidence: an evidence-only revision
// keeps the open proposal's ruleset (400 req/s on each of 2 instances, a
// ceiling of 800) although the recommendation moved to 840 (+5%, inside
// the deadband); the evidence stored with it must still give the ceiling
// of that ruleset, 800, since the engine reads the ceiling in force back
// from it once the version is published (a re-split would otherwise split
// 840 and quietly move the ceiling).
func TestKeptRulesetKeepsItsCeilingInTheEvidence(t *testing.T) {
	ctx := context.Background()
	clk, st, v1 := checkoutAt500(t)
	cur, _ := currentCeiling(&v1, 2)
	recFor := func(to float64) Recommendation {
		rs, c, conc := apply(v1.Ruleset, cur, to, 2)
		return Recommendation{Service: "checkout", Base: v1.Number, Ruleset: rs, Reason: "move",
			Evidence: &Evidence{Ceiling: c, Concurrency: conc}}
	}
	manual := Band{Manual: true, MaxChangePerHour: 0.1}
	pr := &Proposer{Store: st, Clock: clk}
	open, err := pr.Submit(ctx, recFor(800), manual)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * DefaultEvidenceRefresh)
	sub, err := pr.Submit(ctx, recFor(840), manual)
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Revised || sub.Kept == "" || sub.Version.Number != open.Version.Number {
		t.Fatalf("want an evidence-only revision keeping the ruleset, got %+v", sub)
	}
	got, err := st.Get(ctx, "checkout", open.Version.Number)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := ceilingOf(got.Evidence)
	per := got.Ruleset.Routes[0].RateLimit.Rate
	if !ok || per != 400 || c.To != 800 || c.PerInstance["api"] != per {
		t.Fatalf("kept ruleset has %v req/s per instance, evidence ceiling %+v, want 800 at 400 each", per, c)
	}
	var e struct {
		Concurrency map[string][2]int `json:"concurrency"`
	}
	if err := json.Unmarshal(got.Evidence, &e); err != nil {
		t.Fatal(err)
	}
	if want := got.Ruleset.Routes[0].Concurrency.Max; e.Concurrency["api"][1] != want {
		t.Fatalf("evidence concurrency %v, the kept ruleset's max is %d", e.Concurrency, want)
	}
	// Published, the version's ceiling in force is its ruleset's.
	published, err := st.Approve(ctx, "checkout", open.Version.Number, bob, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := currentCeiling(&published, 3); c.To != 800 {
		t.Fatalf("ceiling in force read back as %v, want 800", c.To)
	}
}
