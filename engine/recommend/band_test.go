package recommend

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
)

var admin = versioning.Actor{Name: "root", Roles: []versioning.Role{versioning.RoleAdmin}}

func TestPolicyBand(t *testing.T) {
	config := Band{MaxChangePerHour: 0.1, Floor: 10, Ceiling: 5000}
	set := &versioning.AutoApplyBand{MaxChangePerHour: 0.5, Floor: 100, Ceiling: 2000}
	tests := []struct {
		name     string
		pol      versioning.Policy
		fallback Band
		want     Band
		source   string
	}{
		{"nobody set a band", versioning.DefaultPolicy("s"), config, config, BandFromConfig},
		{"manual-only policy makes the configured band manual", versioning.Policy{Service: "s", ManualOnly: true}, config,
			Band{Manual: true, MaxChangePerHour: 0.1, Floor: 10, Ceiling: 5000}, BandFromConfig},
		{"configured manual stays manual", versioning.DefaultPolicy("s"), Band{Manual: true, MaxChangePerHour: 0.3},
			Band{Manual: true, MaxChangePerHour: 0.3}, BandFromConfig},
		{"a person's band wins", versioning.Policy{Service: "s", Band: set}, config,
			Band{MaxChangePerHour: 0.5, Floor: 100, Ceiling: 2000}, BandFromPolicy},
		{"a person's band is not manual unless the policy is", versioning.Policy{Service: "s", Band: set}, Band{Manual: true},
			Band{MaxChangePerHour: 0.5, Floor: 100, Ceiling: 2000}, BandFromPolicy},
		{"a person's manual band", versioning.Policy{Service: "s", Band: set, ManualOnly: true}, config,
			Band{Manual: true, MaxChangePerHour: 0.5, Floor: 100, Ceiling: 2000}, BandFromPolicy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, src := PolicyBand(tc.pol, tc.fallback)
			if got != tc.want || src != tc.source {
				t.Fatalf("got %+v from %s, want %+v from %s", got, src, tc.want, tc.source)
			}
		})
	}
}

func TestPolicyBands(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}
	config := Band{MaxChangePerHour: 0.2, Ceiling: 900}
	pb := &PolicyBands{Reader: st, Fallback: func(string) Band { return config }}
	if got := pb.Band("checkout"); got != config {
		t.Fatalf("no policy: %+v, want the configured %+v", got, config)
	}
	if _, err := st.SetPolicy(ctx, versioning.Policy{Service: "checkout",
		Band: &versioning.AutoApplyBand{MaxChangePerHour: 0.4, Floor: 50}}, admin); err != nil {
		t.Fatal(err)
	}
	if got, want := pb.Band("checkout"), (Band{MaxChangePerHour: 0.4, Floor: 50}); got != want {
		t.Fatalf("policy band: %+v, want %+v", got, want)
	}
	if got := pb.Band("search"); got != config {
		t.Fatalf("other service: %+v, want the configured %+v", got, config)
	}
	if got := (&PolicyBands{Reader: st}).Band("search"); got != DefaultBand() {
		t.Fatalf("no fallback: %+v, want %+v", got, DefaultBand())
	}
	// A store that cannot be read: the configured band, made manual.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := pb.Band("checkout"), (Band{Manual: true, MaxChangePerHour: 0.2, Ceiling: 900}); got != want {
		t.Fatalf("store closed: %+v, want %+v", got, want)
	}
}

// TestProposerUsesPolicyBand: the band an admin sets in the service's
// policy decides what applies itself, over the engine's configured band,
// until the admin clears it again.
func TestProposerUsesPolicyBand(t *testing.T) {
	ctx := context.Background()
	clk, st, v1 := checkoutAt500(t)
	pr := &Proposer{Store: st, Clock: clk}
	config := DefaultBand() // 10% per hour
	// A 20% cut: 1000 -> 800 req/s service-wide (2 instances).
	cut := Recommendation{Service: "checkout", Base: v1.Number, Ruleset: ruleset(400), Reason: "cut",
		Evidence: &Evidence{Ceiling: Ceiling{From: 1000, To: 800, Instances: 2, Routes: map[string]float64{"api": 800}}}}
	setBand := func(b *versioning.AutoApplyBand, manual bool) {
		t.Helper()
		pol, err := st.Policy(ctx, "checkout")
		if err != nil {
			t.Fatal(err)
		}
		pol.Band, pol.ManualOnly = b, manual
		if _, err := st.SetPolicy(ctx, pol, admin); err != nil {
			t.Fatal(err)
		}
	}
	evidenceBand := func(v versioning.Version) (Band, string) {
		t.Helper()
		var e struct {
			Band       Band   `json:"band"`
			BandSource string `json:"band_source"`
		}
		if err := json.Unmarshal(v.Evidence, &e); err != nil {
			t.Fatal(err)
		}
		return e.Band, e.BandSource
	}

	// Under the configured band the cut waits.
	sub, err := pr.Submit(ctx, cut, config)
	if err != nil {
		t.Fatal(err)
	}
	if sub.AutoApplied || sub.BandSource != BandFromConfig || sub.Band != config {
		t.Fatalf("configured band: %+v", sub)
	}
	if b, src := evidenceBand(sub.Version); b != config || src != BandFromConfig {
		t.Fatalf("evidence band %+v from %s", b, src)
	}
	// A person's manual-only policy: waits too, and is not refused.
	setBand(&versioning.AutoApplyBand{MaxChangePerHour: 0.5}, true)
	clk.Advance(10 * time.Second)
	cut.Ruleset = ruleset(401)
	sub, err = pr.Submit(ctx, cut, config)
	if err != nil {
		t.Fatal(err)
	}
	if sub.AutoApplied || sub.BandSource != BandFromPolicy || !sub.Band.Manual {
		t.Fatalf("manual policy band: %+v", sub)
	}
	// A person's 50% band lets the 20% cut apply itself.
	setBand(&versioning.AutoApplyBand{MaxChangePerHour: 0.5, Floor: 100, Ceiling: 5000}, false)
	clk.Advance(10 * time.Second)
	cut.Ruleset = ruleset(400)
	sub, err = pr.Submit(ctx, cut, config)
	if err != nil {
		t.Fatal(err)
	}
	want := Band{MaxChangePerHour: 0.5, Floor: 100, Ceiling: 5000}
	if !sub.AutoApplied || sub.BandSource != BandFromPolicy || sub.Band != want {
		t.Fatalf("policy band: %+v", sub)
	}
	if b, src := evidenceBand(sub.Version); b != want || src != BandFromPolicy {
		t.Fatalf("evidence band %+v from %s", b, src)
	}
	// The policy's floor holds: 800 -> 90 req/s is below it.
	clk.Advance(10 * time.Second)
	low := Recommendation{Service: "checkout", Base: sub.Version.Number, Ruleset: ruleset(45), Reason: "deep cut",
		Evidence: &Evidence{Ceiling: Ceiling{From: 800, To: 90, Instances: 2, Routes: map[string]float64{"api": 90}}}}
	held, err := pr.Submit(ctx, low, Band{MaxChangePerHour: 10})
	if err != nil {
		t.Fatal(err)
	}
	if held.AutoApplied || held.Policy != "90.0 req/s is below the floor 100.0" {
		t.Fatalf("below the policy's floor: %+v", held)
	}
	// Cleared: the configured band is back.
	setBand(nil, false)
	clk.Advance(10 * time.Second)
	low.Ruleset = ruleset(46)
	back, err := pr.Submit(ctx, low, Band{MaxChangePerHour: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !back.AutoApplied || back.BandSource != BandFromConfig {
		t.Fatalf("cleared policy band: %+v", back)
	}
}

// TestBandChangedWhileTrackingBoundsTheNextProposal: a person sets a floor
// (or ceiling) in the service's policy while the controller already tracks
// the active version; the next recommendation stays inside the new band,
// as the band's documentation promises, instead of waiting for a new
// version to restart the controller.
func TestBandChangedWhileTrackingBoundsTheNextProposal(t *testing.T) {
	t.Run("floor", func(t *testing.T) {
		r := newRec(t)
		in := Input{Service: "checkout", Score: score(0.99), Entry: entry(990), Active: active(500, nil), Instances: 2}
		for i := range 3 {
			in.At = t0.Add(time.Duration(i) * 10 * time.Second)
			r.Evaluate(in)
		}
		in.Band = Band{MaxChangePerHour: 0.1, Floor: 950}
		var rec Recommendation
		for i := 3; i < 40; i++ {
			in.At = t0.Add(time.Duration(i) * 10 * time.Second)
			rec = r.Evaluate(in)
			if rec.Ruleset != nil && rec.Evidence.Ceiling.To < 950 {
				t.Fatalf("evaluation %d: proposed %.1f req/s, below the floor of 950: %s", i, rec.Evidence.Ceiling.To, rec.Reason)
			}
		}
	})
	t.Run("ceiling", func(t *testing.T) {
		r := newRec(t)
		in := Input{Service: "checkout", Score: score(0.3), Entry: entry(995), Active: active(500, nil), Instances: 2}
		for i := range 3 {
			in.At = t0.Add(time.Duration(i) * 10 * time.Second)
			r.Evaluate(in)
		}
		in.Band = Band{MaxChangePerHour: 0.1, Ceiling: 1050}
		var rec Recommendation
		for i := 3; i < 40; i++ {
			in.At = t0.Add(time.Duration(i) * 10 * time.Second)
			rec = r.Evaluate(in)
			if rec.Ruleset != nil && rec.Evidence.Ceiling.To > 1050 {
				t.Fatalf("evaluation %d: proposed %.1f req/s, above the ceiling of 1050: %s", i, rec.Evidence.Ceiling.To, rec.Reason)
			}
		}
	})
}

// TestBandPinningTheCeilingIsFollowed: a band whose floor equals its
// ceiling (a person pins the service's ceiling), or whose floor lies ten
// times above the ceiling in force, still gives recommendations: toward
// the band, not "controller: invalid config" for ever.
func TestBandPinningTheCeilingIsFollowed(t *testing.T) {
	for _, tt := range []struct {
		name string
		band Band
		want float64
	}{
		{"pinned", Band{MaxChangePerHour: 0.1, Floor: 1200, Ceiling: 1200}, 1200},
		{"floor far above", Band{MaxChangePerHour: 0.1, Floor: 20000}, 20000},
		{"ceiling far below", Band{MaxChangePerHour: 0.1, Ceiling: 50}, 50},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec(t)
			in := Input{Service: "checkout", Score: score(0.7), Entry: entry(990), Active: active(500, nil), Instances: 2, Band: tt.band}
			var rec Recommendation
			for i := range 5 {
				in.At = t0.Add(time.Duration(i) * 10 * time.Second)
				rec = r.Evaluate(in)
			}
			if rec.Ruleset == nil || rec.Evidence.Ceiling.To != tt.want {
				t.Fatalf("inconclusive %v: %s", rec.Inconclusive, rec.Reason)
			}
		})
	}
}
