package manager

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/notify/webhook"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/internal/testenv"
)

func TestRestartSQLite(t *testing.T) { testRestart(t, newHarness(t)) }

func TestRestartPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	testRestart(t, newHarnessOn(t, testenv.Postgres(t)))
}

// testRestart stops the manager with a firing acknowledged P0 and a firing
// P1, starts a new one on the same database, and checks that nothing is
// sent twice and nothing is lost.
func testRestart(t *testing.T, h *harness) {
	ctx := context.Background()
	h.db.set("shed", "checkout")
	h.db.set("load", "search")
	h.timeline(0, 90*time.Second, map[time.Duration][]string{
		30 * time.Second: {"firing Load@search/firing"},
		90 * time.Second: {"firing Shed@checkout/firing"},
	})
	fp := alerts.Labels{"alertname": "Shed", "service": "checkout", "severity": "P0"}.Fingerprint()
	if _, err := h.m.Acknowledge(ctx, fp, "ops", "mitigating", h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.pdActions(); strings.Join(got, ",") != "acknowledge,trigger" {
		t.Fatalf("pagerduty %v", got)
	}

	h.close()
	h.open()

	// The restarted manager knows the alerts, the acknowledgement and what
	// it sent: no re-notification, no repeat of the acknowledged P0.
	st := h.m.Alerts(h.clk.Now())
	if len(st) != 2 {
		t.Fatalf("alerts after restart: %+v", st)
	}
	for _, s := range st {
		if (s.Acknowledged != nil) != (s.Labels["alertname"] == "Shed") {
			t.Fatalf("acknowledgement lost or misplaced: %+v", s)
		}
	}
	h.timeline(2*time.Minute, 59*time.Minute, nil)
	if got := h.pdActions(); len(got) != 0 {
		t.Fatalf("pagerduty after restart %v", got)
	}
	// The P1 repeat is still due once an hour after its first notification.
	h.timeline(59*time.Minute+30*time.Second, time.Hour+time.Minute, map[time.Duration][]string{
		time.Hour + 30*time.Second: {"firing Load@search/firing"},
	})
	// The acknowledged P0 resolves: one resolve, then the ack is gone.
	h.db.set("shed")
	h.timeline(time.Hour+90*time.Second, time.Hour+3*time.Minute, map[time.Duration][]string{
		time.Hour + 90*time.Second: {"resolved Shed@checkout/resolved"},
	})
	if got := h.pdActions(); strings.Join(got, ",") != "resolve" {
		t.Fatalf("pagerduty resolve %v", got)
	}
	if acks, _ := h.st.Acks(ctx); len(acks) != 0 {
		t.Fatalf("acks %+v", acks)
	}
}

func TestRestartResendsUndeliveredOnce(t *testing.T) {
	h := newHarness(t)
	h.hook.mu.Lock()
	h.hook.fail = true
	h.hook.mu.Unlock()
	h.db.set("load", "search")
	h.clk.Set(t0)
	ctx := context.Background()
	if err := h.m.Step(ctx, t0); err != nil {
		t.Fatal(err)
	}
	h.clk.Set(t0.Add(30 * time.Second))
	if err := h.m.Step(ctx, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	// The first attempt fails; the queue waits on its back-off when the
	// process stops.
	for h.clk.Pending() == 0 {
		waitBriefly()
	}
	h.close()
	h.hook.mu.Lock()
	h.hook.fail = false
	h.hook.mu.Unlock()
	h.open()
	if err := h.m.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	h.expect(30*time.Second, "firing Load@search/firing")
	// Logged and delivered: later steps do not send it again.
	h.timeline(time.Minute, 3*time.Minute, nil)
	if pend, _ := h.st.Undelivered(ctx); len(pend) != 0 {
		t.Fatalf("undelivered %+v", pend)
	}
}

// A rule removed from, or disabled in, the configuration across a restart
// takes its alerts with it, as UpdateRules does for a running manager: the
// restarted manager does not list them (GET /alerts), not even before its
// first step, never fires them again, and resolves what they had notified.
func TestRestartDropsAlertsOfRemovedRules(t *testing.T) {
	disabled := testRules[1]
	disabled.Disabled = true
	tests := []struct {
		name  string
		rules []rule.Rule
	}{
		{"removed", []rule.Rule{testRules[0], testRules[2]}},
		{"disabled", []rule.Rule{testRules[0], disabled, testRules[2]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.db.set("load", "checkout")
			h.timeline(0, 30*time.Second, map[time.Duration][]string{30 * time.Second: {"firing Load@checkout/firing"}})
			h.close()
			h.rules = tt.rules
			h.open()
			if got := h.m.Alerts(h.clk.Now()); len(got) != 0 {
				t.Fatalf("alerts listed after the restart: %+v", got)
			}
			h.timeline(time.Minute, 3*time.Minute, map[time.Duration][]string{
				time.Minute + 30*time.Second: {"resolved Load@checkout/resolved"}, // 30s + group interval
			})
			if got := h.m.Alerts(h.clk.Now()); len(got) != 0 {
				t.Fatalf("alerts listed after the first steps: %+v", got)
			}
		})
	}
}

// A P2 resolved at 17:30 on Friday has its resolve held until Monday
// 09:00, with a restart in between: the webhook's endsAt is when the alert
// resolved, stored with its group, not the time the resolve was sent.
func TestHeldResolveReportsItsEndAcrossRestart(t *testing.T) {
	h := newHarness(t)
	h.start = time.Date(2026, 3, 6, 16, 0, 0, 0, time.UTC) // Friday 16:00
	h.db.set("breaker", "checkout")
	h.timeline(0, 30*time.Second, map[time.Duration][]string{30 * time.Second: {"firing Breaker@checkout/firing"}})
	h.db.set("breaker")
	h.timeline(90*time.Minute, 100*time.Minute, nil) // resolved at 17:30, after hours
	h.close()
	h.open()
	h.timeline(3*time.Hour, 3*time.Hour+time.Minute, nil) // the resolved alert has left the evaluator
	h.start = time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC) // Monday 09:00
	h.at(0)
	raws := h.hook.take()
	if len(raws) != 1 {
		t.Fatalf("%d payloads, want the held resolve", len(raws))
	}
	var p webhook.Payload
	if err := json.Unmarshal(raws[0], &p); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 3, 6, 17, 30, 0, 0, time.UTC)
	if len(p.Alerts) != 1 || p.Alerts[0].Status != "resolved" || !p.Alerts[0].EndsAt.Equal(want) {
		t.Fatalf("payload alerts %+v, want one resolved alert ending at %s", p.Alerts, want)
	}
}
