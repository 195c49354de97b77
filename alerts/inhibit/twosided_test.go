package inhibit

import (
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

// Two alerts that each match both the source and the target of a rule do
// not inhibit each other (Alertmanager's rule), while they still mute an
// alert that matches the target only. Example: "a fleet-wide breaker (P1)
// mutes the P1/P2 of its service" with two fleet breakers of checkout (two
// downstreams) and a P2 of checkout.
func TestTwoSidedMatchDoesNotMuteEachOther(t *testing.T) {
	src, err := alerts.ParseMatchers(`{alertname="GovernorBreakerOpenFleet"}`)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := alerts.ParseMatchers(`{severity=~"P1|P2"}`)
	if err != nil {
		t.Fatal(err)
	}
	in, err := New([]Rule{{Source: src, Target: tgt, Equal: []string{"service"}}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a := alerts.Alert{Labels: alerts.Labels{"alertname": "GovernorBreakerOpenFleet", "service": "checkout", "downstream": "db", "severity": "P1"}, StartsAt: t0}
	b := alerts.Alert{Labels: alerts.Labels{"alertname": "GovernorBreakerOpenFleet", "service": "checkout", "downstream": "cache", "severity": "P1"}, StartsAt: t0}
	firing := []alerts.Alert{a, b}
	_, aMuted := in.MutedBy(a.Labels, firing)
	_, bMuted := in.MutedBy(b.Labels, firing)
	if aMuted || bMuted {
		t.Fatalf("fleet-breaker alerts of checkout muted by each other: db %v, cache %v", aMuted, bMuted)
	}
	p2 := alerts.Labels{"alertname": "GovernorSlow", "service": "checkout", "severity": "P2"}
	if _, muted := in.MutedBy(p2, firing); !muted {
		t.Fatal("the service's P2 is not muted by its fleet breakers")
	}
}
