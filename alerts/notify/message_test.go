package notify_test

import (
	"testing"

	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
)

// TestWithoutResolvedKeepsTheFiringAlertsOnly: for a receiver with
// send_resolved false, as Alertmanager, a message with firing and resolved
// alerts carries the firing ones, its status, severity and common labels
// worked out from them; a message of resolved alerts only is not sent.
func TestWithoutResolvedKeepsTheFiringAlertsOnly(t *testing.T) {
	m := notifytest.Sample(notify.KindNotify)
	got := m.WithoutResolved()
	if got == nil || len(got.Alerts) != 1 || got.Alerts[0].Status != notify.StatusFiring || got.Status != notify.StatusFiring ||
		got.ID != m.ID || got.GroupKey != m.GroupKey || got.Severity != "P0" || got.CommonLabels["alertname"] != "Shed" {
		t.Fatalf("WithoutResolved() = %+v", got)
	}
	if len(m.Alerts) != 2 {
		t.Fatalf("the message given changed: %d alerts", len(m.Alerts))
	}
	if got := notifytest.SampleResolved(notify.KindNotify).WithoutResolved(); got != nil {
		t.Fatalf("resolved-only message kept: %+v", got)
	}
	firing := notify.NewMessage(notify.KindNotify, m.Receiver, m.GroupKey, m.GroupLabels, m.Alerts[:1], m.CreatedAt)
	if got := firing.WithoutResolved(); got != firing {
		t.Fatal("a message without resolved alerts is not returned as is")
	}
}
