package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/pagerduty"
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

// An acknowledge PagerDuty refuses (a 400 here; an outage longer than the
// queue's attempts alike) stays owed while the acknowledgement lasts: a
// later step sends it again, once, and the incident stops escalating.
func TestRefusedAcknowledgeIsSentAgainWhileAcknowledged(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	refused := 0
	h.pd.mu.Lock()
	h.pd.refuse = func(raw json.RawMessage) bool {
		var e pagerduty.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Error(err)
		}
		if e.EventAction == "acknowledge" && refused == 0 {
			refused++
			return true
		}
		return false
	}
	h.pd.mu.Unlock()
	h.db.set("shed", "checkout")
	for d := time.Duration(0); d <= 90*time.Second; d += 30 * time.Second {
		h.at(d)
	}
	if got := h.pdActions(); strings.Join(got, ",") != "trigger" {
		t.Fatalf("pagerduty %v, want the trigger", got)
	}
	fp := alerts.Labels{"alertname": "Shed", "service": "checkout", "severity": "P0"}.Fingerprint()
	if _, err := h.m.Acknowledge(ctx, fp, "ops", "mitigating", h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.pdActions(); len(got) != 0 {
		t.Fatalf("pagerduty %v, want the acknowledge refused", got)
	}
	if p, err := h.st.Undelivered(ctx); err != nil || len(p) != 1 || p[0].Message.Kind != notify.KindAcknowledge {
		t.Fatalf("log entries open %+v, %v: want the acknowledge, owed", p, err)
	}
	for d := 2 * time.Minute; d <= 8*time.Minute; d += 30 * time.Second {
		h.at(d)
	}
	if got := h.pdActions(); strings.Join(got, ",") != "acknowledge" {
		t.Fatalf("pagerduty %v, want the acknowledge accepted once", got)
	}
	if p, err := h.st.Undelivered(ctx); err != nil || len(p) != 0 {
		t.Fatalf("log entries open %+v, %v", p, err)
	}
	// A second acknowledgement of the same episode sends nothing more.
	if _, err := h.m.Acknowledge(ctx, fp, "ops", "still on it", h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	for d := 8*time.Minute + 30*time.Second; d <= 12*time.Minute; d += 30 * time.Second {
		h.at(d)
	}
	if got := h.pdActions(); len(got) != 0 {
		t.Fatalf("pagerduty %v, want nothing more", got)
	}
}

// An acknowledge PagerDuty keeps refusing is tried once a group interval
// while the acknowledgement lasts; once the alert resolves it is owed no
// more: its log entry is closed with the error, and nothing more is sent.
func TestRefusedAcknowledgeIsOwedUntilTheAlertResolves(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	refused := 0
	h.pd.mu.Lock()
	h.pd.refuse = func(raw json.RawMessage) bool {
		var e pagerduty.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Error(err)
		}
		if e.EventAction == "acknowledge" {
			refused++
			return true
		}
		return false
	}
	h.pd.mu.Unlock()
	refusals := func() int {
		h.pd.mu.Lock()
		defer h.pd.mu.Unlock()
		return refused
	}
	h.db.set("shed", "checkout")
	for d := time.Duration(0); d <= 90*time.Second; d += 30 * time.Second {
		h.at(d)
	}
	fp := alerts.Labels{"alertname": "Shed", "service": "checkout", "severity": "P0"}.Fingerprint()
	if _, err := h.m.Acknowledge(ctx, fp, "ops", "mitigating", h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	// Refused at 1m30s, then tried at 2m30s, 3m30s, 4m30s, 5m30s.
	for d := 2 * time.Minute; d <= 6*time.Minute; d += 30 * time.Second {
		h.at(d)
	}
	if n := refusals(); n != 5 {
		t.Fatalf("acknowledge sent %d times, want 5: once, then once a group interval", n)
	}
	h.db.set("shed")
	for d := 6*time.Minute + 30*time.Second; d <= 10*time.Minute; d += 30 * time.Second {
		h.at(d)
	}
	if n := refusals(); n != 5 {
		t.Fatalf("acknowledge sent %d times, want no more once the alert resolved", n)
	}
	if p, err := h.st.Undelivered(ctx); err != nil || len(p) != 0 {
		t.Fatalf("log entries open %+v, %v", p, err)
	}
	if got := h.pdActions(); strings.Join(got, ",") != "resolve,trigger" {
		t.Fatalf("pagerduty %v", got)
	}
}
