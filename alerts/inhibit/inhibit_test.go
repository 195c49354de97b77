package inhibit

import (
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

func TestDefaultsMuteLowerTiersOfSameService(t *testing.T) {
	in, err := New(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	p0 := alerts.Alert{Labels: alerts.Labels{"alertname": "Shed", "service": "a", "severity": "P0"}, StartsAt: t0}
	resolvedP0 := alerts.Alert{Labels: alerts.Labels{"alertname": "Shed", "service": "c", "severity": "P0"}, StartsAt: t0, EndsAt: t0}
	firing := []alerts.Alert{p0, resolvedP0}
	tests := []struct {
		name   string
		target alerts.Labels
		muted  bool
	}{
		{"P1 same service", alerts.Labels{"alertname": "Load", "service": "a", "severity": "P1"}, true},
		{"P2 same service", alerts.Labels{"alertname": "Breaker", "service": "a", "severity": "P2"}, true},
		{"P1 other service", alerts.Labels{"alertname": "Load", "service": "b", "severity": "P1"}, false},
		{"P0 not muted", alerts.Labels{"alertname": "Other", "service": "a", "severity": "P0"}, false},
		{"resolved source mutes nothing", alerts.Labels{"alertname": "Load", "service": "c", "severity": "P1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp, got := in.MutedBy(tt.target, firing)
			if got != tt.muted {
				t.Fatalf("MutedBy = %v, want %v", got, tt.muted)
			}
			if got && fp != p0.Fingerprint() {
				t.Fatalf("muted by %s, want the P0", fp)
			}
		})
	}
	if _, err := New([]Rule{{Target: Defaults()[0].Target}}); err == nil {
		t.Fatal("rule without source accepted")
	}
	if _, err := New([]Rule{{Source: Defaults()[0].Source, Target: Defaults()[0].Target, Equal: []string{"1x"}}}); err == nil {
		t.Fatal("bad equal label accepted")
	}
}

// A P0 of no service (GovernorLeaderLost, as a configuration may declare
// it) must not mute every P1/P2 without one (GovernorAlertReceiverFailing),
// as an Equal label missing on both sides counts as equal.
func TestDefaultsServicelessP0MutesNothing(t *testing.T) {
	in, err := New(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	leaderLost := alerts.Alert{Labels: alerts.Labels{"alertname": "GovernorLeaderLost", "severity": "P0"}, StartsAt: t0}
	target := alerts.Labels{"alertname": "GovernorAlertReceiverFailing", "receiver": "pager", "severity": "P1"}
	if _, muted := in.MutedBy(target, []alerts.Alert{leaderLost}); muted {
		t.Fatal("a P0 of no service muted a P1 of no service: the default rule mutes only the same service")
	}
}

// Alertmanager's semantics, through Inhibitor.MutedBy and a Snapshot alike:
// an Equal label missing on both sides, or empty on one and missing on the
// other, counts as equal; an alert that matches source and target does not
// mute itself; a resolved source mutes nothing.
func TestAlertmanagerSemantics(t *testing.T) {
	src, err := alerts.ParseMatchers(`{alertname="Down"}`)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := alerts.ParseMatchers(`{severity=~"P1|P2"}`)
	if err != nil {
		t.Fatal(err)
	}
	in, err := New([]Rule{{Source: src, Target: tgt, Equal: []string{"zone"}}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		source alerts.Alert
		target alerts.Labels
		muted  bool
	}{
		{"missing on both sides", alerts.Alert{Labels: alerts.Labels{"alertname": "Down"}, StartsAt: t0},
			alerts.Labels{"alertname": "Load", "severity": "P1"}, true},
		{"empty on one side, missing on the other", alerts.Alert{Labels: alerts.Labels{"alertname": "Down", "zone": ""}, StartsAt: t0},
			alerts.Labels{"alertname": "Load", "severity": "P1"}, true},
		{"missing on one side only", alerts.Alert{Labels: alerts.Labels{"alertname": "Down"}, StartsAt: t0},
			alerts.Labels{"alertname": "Load", "severity": "P1", "zone": "z1"}, false},
		{"itself", alerts.Alert{Labels: alerts.Labels{"alertname": "Down", "severity": "P1"}, StartsAt: t0},
			alerts.Labels{"alertname": "Down", "severity": "P1"}, false},
		{"resolved source", alerts.Alert{Labels: alerts.Labels{"alertname": "Down"}, StartsAt: t0, EndsAt: t0.Add(time.Minute)},
			alerts.Labels{"alertname": "Load", "severity": "P1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			firing := []alerts.Alert{tt.source}
			if _, got := in.MutedBy(tt.target, firing); got != tt.muted {
				t.Fatalf("Inhibitor.MutedBy = %v, want %v", got, tt.muted)
			}
			if _, got := in.Snapshot(firing).MutedBy(tt.target); got != tt.muted {
				t.Fatalf("Snapshot.MutedBy = %v, want %v", got, tt.muted)
			}
		})
	}
}
