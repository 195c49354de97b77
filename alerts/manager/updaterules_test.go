package manager

import (
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/rule"
)

// A rule update that drops a changed rule's firing alert is stored at the
// next step, even though no transition reports the drop: a restart must not
// bring the alert back as firing.
func TestRuleUpdateDropSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	h.db.set("load", "checkout")
	h.at(0)
	if got := h.m.Alerts(h.clk.Now()); len(got) != 1 || !got[0].EndsAt.IsZero() {
		t.Fatalf("Load should fire: %+v", got)
	}
	// The rule changes (new expression) and its new condition does not hold.
	rules := []rule.Rule{testRules[0], {Name: "Load", Expr: "load2", Severity: alerts.P1}, testRules[2]}
	if err := h.m.UpdateRules(rules); err != nil {
		t.Fatal(err)
	}
	h.at(30 * time.Second)
	for _, a := range h.m.Alerts(h.clk.Now()) {
		if a.EndsAt.IsZero() {
			t.Fatalf("running manager still has %v firing", a.Labels)
		}
	}
	h.close()
	h.open()
	for _, a := range h.m.Alerts(h.clk.Now()) {
		if a.EndsAt.IsZero() {
			t.Fatalf("after restart %v is firing again (since %s), although the rule update dropped it", a.Labels, a.StartsAt)
		}
	}
}
