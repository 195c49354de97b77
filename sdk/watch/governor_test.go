package watch

import (
	"testing"

	governor "governor.dev/governor/sdk"
)

// TestCanaryInstanceWithARealGovernorReturnsToStable: the watcher applies a
// version below the one in force when an instance leaves a canary, so the
// SDK's Governor (not only a test Applier) must take it. It refused it as
// stale: after an abort every canary instance NACKed the stable version and
// kept enforcing the aborted rules.
func TestCanaryInstanceWithARealGovernorReturnsToStable(t *testing.T) {
	s, _, reports, _ := newTestState(t, "checkout", "i-1", map[string]string{"zone": "a"})
	g, err := governor.New(governor.Options{Service: "checkout"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s.applier = g
	s.onStable(envelopeBytes(t, "checkout", 1))
	s.onCanary(canaryBytes(t, 3, Selector{Labels: map[string]string{"zone": "a"}}))
	if s.running.Load() != 3 {
		t.Fatalf("running %d under the canary, want 3", s.running.Load())
	}
	s.onCanaryGone() // aborted
	if s.running.Load() != 1 {
		t.Fatalf("running %d after the abort, want the stable 1", s.running.Load())
	}
	last := (*reports)[len(*reports)-1]
	if last.Version != 1 || last.Status != StatusACK {
		t.Fatalf("last report %+v, want an ACK of version 1", last)
	}
	if got := g.Rules().Routes[0].RateLimit.Rate; got != 2 { // envelopeBytes: rate version+1
		t.Fatalf("the governor enforces rate %v, want the stable version's 2", got)
	}
}
