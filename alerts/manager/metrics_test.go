package manager

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsOnInjectedRegisterer(t *testing.T) {
	h := newHarness(t)
	h.db.set("load", "search")
	h.timeline(0, 30*time.Second, map[time.Duration][]string{30 * time.Second: {"firing Load@search/firing"}})
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{
		"governor_alerts_alerts", "governor_alerts_muted", "governor_alerts_evaluations_total",
		"governor_alerts_rule_errors_total", "governor_alerts_store_errors_total", "governor_alerts_events_total",
		"governor_alerts_notifications_sent_total", "governor_alerts_notifications_failed_total",
		"governor_alerts_notifications_dropped_total", "governor_alerts_notification_attempts_total",
		"governor_alerts_notification_queue_depth", "governor_alerts_notifications_discarded_total",
	} {
		if !have[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
	if v := testutil.ToFloat64(h.m.m.evals); v != 2 {
		t.Fatalf("evaluations %v, want 2", v)
	}
	if v := testutil.ToFloat64(h.m.m.alerts.WithLabelValues("firing", "P1")); v != 1 {
		t.Fatalf("firing P1 %v", v)
	}
	if v := testutil.ToFloat64(h.m.m.delivery.Sent("hook")); v != 1 {
		t.Fatalf("sent to hook %v", v)
	}
}

// TestAlertGaugesCountPendingAndFiringBySeverity: the gauges count the
// alerts of the last step by state and tier, resolved ones not at all.
func TestAlertGaugesCountPendingAndFiringBySeverity(t *testing.T) {
	h := newHarness(t)
	h.db.set("shed", "a", "b", "c") // P0, pending for a minute
	h.db.set("load", "a", "b")      // P1, firing at once
	h.db.set("breaker", "a")        // P2, firing at once
	h.at(0)
	h.db.set("breaker") // resolved: counted nowhere
	h.at(30 * time.Second)
	want := map[[2]string]float64{
		{"pending", "P0"}: 3, {"firing", "P1"}: 2,
	}
	for _, st := range []string{"pending", "firing"} {
		for _, sev := range []string{"P0", "P1", "P2"} {
			if v := testutil.ToFloat64(h.m.m.alerts.WithLabelValues(st, sev)); v != want[[2]string{st, sev}] {
				t.Errorf("%s %s = %v, want %v", st, sev, v, want[[2]string{st, sev}])
			}
		}
	}
}
