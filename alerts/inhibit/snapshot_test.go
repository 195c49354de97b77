package inhibit

import (
	"math/rand/v2"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

// randomLabels draws from small value sets, so that Equal values, two-sided
// matches, missing labels and duplicate alerts are frequent.
func randomLabels(rng *rand.Rand) alerts.Labels {
	l := alerts.Labels{}
	pick := func(name string, values ...string) {
		if v := values[rng.IntN(len(values))]; v != "-" {
			l[name] = v
		}
	}
	pick("alertname", "Down", "Load", "Breaker", "-")
	pick("service", "a", "b", "c", "", "-")
	pick("severity", "P0", "P1", "P2", "-")
	pick("zone", "z1", "z2", "-")
	return l
}

func randomMatchers(t *testing.T, rng *rand.Rand) alerts.Matchers {
	pool := []string{
		`severity="P0"`, `severity=~"P1|P2"`, `severity!="P2"`, `service=~".+"`, `service=""`,
		`alertname="Down"`, `alertname!~"Load|Breaker"`, `zone="z1"`, `zone!="z2"`, `alertname=~".*"`,
	}
	var ms alerts.Matchers
	for range 1 + rng.IntN(2) {
		m, err := alerts.ParseMatchers("{" + pool[rng.IntN(len(pool))] + "}")
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m...)
	}
	return ms
}

// The snapshot answers as Inhibitor.MutedBy, the muting source included,
// on random rule sets and alert sets: self-muting, the two-sided rule,
// resolved sources, missing Equal labels, duplicate alerts and the order
// of the firing slice all covered.
func TestSnapshotMutesAsMutedBy(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260302, 1))
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	equals := [][]string{nil, {"service"}, {"service", "zone"}, {"zone"}, {"missing"}, {"service", "missing"}}
	muted, checked := 0, 0
	for iter := range 3000 {
		var rules []Rule
		for range 1 + rng.IntN(3) {
			rules = append(rules, Rule{Source: randomMatchers(t, rng), Target: randomMatchers(t, rng),
				Equal: equals[rng.IntN(len(equals))]})
		}
		in, err := New(rules)
		if err != nil {
			t.Fatal(err)
		}
		var firing []alerts.Alert
		for range rng.IntN(30) {
			a := alerts.Alert{Labels: randomLabels(rng), StartsAt: t0}
			if rng.IntN(8) == 0 {
				a.EndsAt = t0.Add(time.Minute)
			}
			firing = append(firing, a)
		}
		snap := in.Snapshot(firing)
		targets := []alerts.Labels{randomLabels(rng), {}}
		for _, a := range firing {
			targets = append(targets, a.Labels)
		}
		for _, target := range targets {
			wantFP, want := in.MutedBy(target, firing)
			gotFP, got := snap.MutedBy(target)
			if got != want || gotFP != wantFP {
				t.Fatalf("iteration %d: target %s: snapshot says (%s, %v), MutedBy (%s, %v)\nrules %+v\nfiring %v",
					iter, target, gotFP, got, wantFP, want, rules, firing)
			}
			checked++
			if want {
				muted++
			}
		}
	}
	// The random sets must exercise both answers.
	if muted < checked/10 || muted > checked*9/10 {
		t.Fatalf("%d of %d targets muted: the random sets do not exercise both answers", muted, checked)
	}
	t.Logf("%d of %d targets muted", muted, checked)
}

// A snapshot of no rules, or a nil one, mutes nothing.
func TestEmptySnapshotMutesNothing(t *testing.T) {
	in, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	target := alerts.Labels{"severity": "P1", "service": "a"}
	if _, ok := in.Snapshot(storm(10)).MutedBy(target); ok {
		t.Fatal("a snapshot without rules muted an alert")
	}
	var s *Snapshot
	if _, ok := s.MutedBy(target); ok {
		t.Fatal("a nil snapshot muted an alert")
	}
}

// Looking a target up in a snapshot allocates nothing: it runs once per
// firing alert per flush.
func TestSnapshotMutedByDoesNotAllocate(t *testing.T) {
	in, err := New(append(Defaults(), Rule{Source: Defaults()[0].Source, Target: Defaults()[0].Target,
		Equal: []string{"service", "zone"}}))
	if err != nil {
		t.Fatal(err)
	}
	firing := storm(100)
	snap := in.Snapshot(firing)
	if n := testing.AllocsPerRun(100, func() { snap.MutedBy(firing[7].Labels) }); n != 0 {
		t.Fatalf("MutedBy allocates %v times per call", n)
	}
}
