package manager

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A receiver too slow for what it is sent (rate limited, or answering
// after seconds) never gives up on a notification, yet its full queue
// drops notifications and drops them again when they are sent again at
// the group interval: pages are late or lost while only a counter and a
// log line tell. Like a receiver that gives up, it raises
// GovernorAlertReceiverFailing, once its queue has kept dropping for
// DroppingFor (10m), not at the first drop of a burst; the alert resolves
// once the queue has dropped nothing for as long.
func TestReceiverDroppingNotificationsRaisesFailingAlert(t *testing.T) {
	h := newHarness(t)
	h.close()
	h.capacity, h.timeout = 1, time.Hour // the held requests never time out
	h.open()
	release := h.hook.hold()
	h.db.set("load", "a", "b", "c", "d") // four groups for a queue of one, its worker held by the first
	d := time.Duration(0)
	for ; d <= 9*time.Minute; d += 30 * time.Second {
		h.stepAt(d)
	}
	if v := testutil.ToFloat64(h.m.m.delivery.Dropped("hook")); v < 8 {
		t.Fatalf("notifications dropped for hook by 9m: %v, want them dropped again at every group interval", v)
	}
	if a, ok := h.receiverFailing("hook"); ok {
		t.Fatalf("hook dropping for less than 10m is failing already: %+v", a)
	}
	for ; d <= 11*time.Minute; d += 30 * time.Second {
		h.stepAt(d)
	}
	if a, ok := h.receiverFailing("hook"); !ok || !a.EndsAt.IsZero() {
		t.Fatalf("hook has dropped notifications for 10m: failing alert %+v (listed %v), want it firing", a, ok)
	}
	if v := testutil.ToFloat64(h.m.m.delivery.Failed("hook")); v != 0 {
		t.Fatalf("hook gave up on %v notifications, want none: the alert comes from the drops", v)
	}

	// The receiver catches up: its failing alert resolves once its queue
	// has dropped nothing for 10m.
	release()
	if err := h.m.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.steps(d, d+8*time.Minute)
	if a, ok := h.receiverFailing("hook"); !ok || !a.EndsAt.IsZero() {
		t.Fatalf("hook recovered less than 10m ago: failing alert %+v (listed %v), want it still firing", a, ok)
	}
	h.steps(d+8*time.Minute+30*time.Second, d+12*time.Minute)
	if a, ok := h.receiverFailing("hook"); ok && a.EndsAt.IsZero() {
		t.Fatalf("hook has kept up for 10m, yet its failing alert fires: %+v", a)
	}
}
