package manager

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

// TestAcknowledgeFindsFiringAlertsOfLatestStep: an alert can be
// acknowledged while it fires in the last step, not once it resolved, and
// one that started firing in the last step can.
func TestAcknowledgeFindsFiringAlertsOfLatestStep(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	fp := func(svc string) alerts.Fingerprint {
		return alerts.Labels{"alertname": "Load", "service": svc, "severity": "P1"}.Fingerprint()
	}
	var svcs []string
	for i := range 50 {
		svcs = append(svcs, fmt.Sprintf("svc%02d", i))
	}
	h.db.set("load", svcs...)
	h.at(0)
	for _, svc := range svcs {
		if _, err := h.m.Acknowledge(ctx, fp(svc), "ops", "storm", h.clk.Now()); err != nil {
			t.Fatalf("acknowledge %s: %v", svc, err)
		}
	}
	h.db.set("load", "new")
	h.at(30 * time.Second)
	if _, err := h.m.Acknowledge(ctx, fp("svc00"), "ops", "late", h.clk.Now()); !errors.Is(err, alerts.ErrNotFound) {
		t.Fatalf("acknowledge of a resolved alert: %v, want ErrNotFound", err)
	}
	ack, err := h.m.Acknowledge(ctx, fp("new"), "ops", "on it", h.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !ack.StartsAt.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("ack starts at %s, want the alert's start %s", ack.StartsAt, t0.Add(30*time.Second))
	}
}
