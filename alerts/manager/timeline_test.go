package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/silence"
)

func TestTimelineGroupWaitP0RepeatAndResolve(t *testing.T) {
	h := newHarness(t)
	h.db.set("shed", "checkout")
	h.timeline(0, 30*time.Second, nil) // pending for 1m
	// Fires at 1m, group wait 30s, then P0 repeats every 5m.
	h.timeline(time.Minute, 12*time.Minute, map[time.Duration][]string{
		90 * time.Second:                {"firing Shed@checkout/firing"},
		6*time.Minute + 30*time.Second:  {"firing Shed@checkout/firing"},
		11*time.Minute + 30*time.Second: {"firing Shed@checkout/firing"},
	})
	// A second service joins the same rule: its own group, own group wait.
	h.db.set("shed", "checkout", "search")
	h.timeline(12*time.Minute+30*time.Second, 14*time.Minute, map[time.Duration][]string{
		14 * time.Minute: {"firing Shed@search/firing"}, // pending 1m + wait 30s
	})
	h.db.set("shed", "search")
	h.timeline(14*time.Minute+30*time.Second, 15*time.Minute, map[time.Duration][]string{
		14*time.Minute + 30*time.Second: {"resolved Shed@checkout/resolved"},
	})
	if got := h.pdActions(); strings.Join(got, ",") != "resolve,trigger,trigger,trigger,trigger" {
		t.Fatalf("pagerduty actions %v", got)
	}
	if v := testutil.ToFloat64(h.m.m.alerts.WithLabelValues("firing", "P0")); v != 1 {
		t.Fatalf("governor_alerts_alerts{firing,P0} = %v", v)
	}
}

func TestTimelineP1RepeatsHourly(t *testing.T) {
	h := newHarness(t)
	h.db.set("load", "checkout")
	h.timeline(0, time.Minute, map[time.Duration][]string{30 * time.Second: {"firing Load@checkout/firing"}})
	h.at(time.Hour)
	h.expect(time.Hour)
	h.timeline(time.Hour+30*time.Second, time.Hour+time.Minute, map[time.Duration][]string{
		time.Hour + 30*time.Second: {"firing Load@checkout/firing"},
	})
}

func TestTimelineP2WaitsForBusinessHours(t *testing.T) {
	h := newHarness(t)
	h.start = time.Date(2026, 3, 6, 16, 59, 0, 0, time.UTC) // Friday 16:59
	h.db.set("breaker", "checkout")
	// Group wait ends at 16:59:30, still open: the first notification goes out.
	h.timeline(0, 30*time.Second, map[time.Duration][]string{30 * time.Second: {"firing Breaker@checkout/firing"}})
	// A second P2 raised at 17:00 waits for Monday 09:00.
	h.db.set("breaker", "checkout", "search")
	h.start = time.Date(2026, 3, 6, 17, 0, 0, 0, time.UTC)
	h.timeline(0, 2*time.Minute, nil)
	h.at(16 * time.Hour)
	h.expect(16 * time.Hour)
	h.start = time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC)                                                                            // Monday 09:00
	h.timeline(0, 30*time.Second, map[time.Duration][]string{0: {"firing Breaker@checkout/firing", "firing Breaker@search/firing"}}) // checkout: its daily repeat
}

func TestTimelineInhibition(t *testing.T) {
	h := newHarness(t)
	h.db.set("load", "checkout", "search")
	h.db.set("shed", "checkout")
	// The P1 of checkout waits for its group; when the P0 fires at 1m it
	// mutes checkout's P1. search's P1 is not affected.
	h.timeline(0, 2*time.Minute, map[time.Duration][]string{
		30 * time.Second: {"firing Load@checkout/firing", "firing Load@search/firing"},
		90 * time.Second: {"firing Shed@checkout/firing"},
	})
	h.at(time.Hour + 30*time.Second) // the P1 repeat: only search, checkout is inhibited; the P0 repeats
	h.expect(time.Hour+30*time.Second, "firing Load@search/firing", "firing Shed@checkout/firing")
	st := h.m.Alerts(h.clk.Now())
	inhibited := 0
	for _, s := range st {
		if s.InhibitedBy != "" {
			inhibited++
			if s.Labels["service"] != "checkout" || s.Labels["alertname"] != "Load" {
				t.Fatalf("wrong alert inhibited: %v", s.Labels)
			}
		}
	}
	if inhibited != 1 {
		t.Fatalf("inhibited %d alerts, want 1", inhibited)
	}
}

func TestTimelineSilence(t *testing.T) {
	h := newHarness(t)
	ms, err := alerts.ParseMatchers(`{service="checkout", alertname="Load"}`)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.m.AddSilence(context.Background(), silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(10 * time.Minute),
		CreatedBy: "ops@example.com", Comment: "load test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.AddSilence(context.Background(), silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0}); err == nil {
		t.Fatal("silence without end, author and comment accepted")
	}
	h.db.set("load", "checkout", "search")
	h.timeline(0, 5*time.Minute, map[time.Duration][]string{30 * time.Second: {"firing Load@search/firing"}})
	if err := h.m.ExpireSilence(context.Background(), s.ID, t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Unmuted at 5m30: a fresh group for checkout, its group wait applies.
	h.timeline(5*time.Minute+30*time.Second, 7*time.Minute, map[time.Duration][]string{
		6 * time.Minute: {"firing Load@checkout/firing"},
	})
}

func TestTimelineAcknowledgeUntilResolved(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.db.set("shed", "checkout")
	h.timeline(0, 90*time.Second, map[time.Duration][]string{90 * time.Second: {"firing Shed@checkout/firing"}})
	if got := h.pdActions(); strings.Join(got, ",") != "trigger" {
		t.Fatalf("pagerduty %v", got)
	}
	fp := alerts.Labels{"alertname": "Shed", "service": "checkout", "severity": "P0"}.Fingerprint()
	if _, err := h.m.Acknowledge(ctx, fp, "", "", h.clk.Now()); err == nil {
		t.Fatal("acknowledge without author accepted")
	}
	if _, err := h.m.Acknowledge(ctx, 42, "ops", "x", h.clk.Now()); err == nil {
		t.Fatal("acknowledge of an unknown alert accepted")
	}
	if _, err := h.m.Acknowledge(ctx, fp, "ops", "on it", h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.pdActions(); strings.Join(got, ",") != "acknowledge" {
		t.Fatalf("pagerduty after ack %v", got)
	}
	// No P0 repeat while acknowledged (it would be due at 6m30 and 11m30).
	h.timeline(2*time.Minute, 12*time.Minute, nil)
	// The alert resolves: the resolve goes out and the acknowledgement ends.
	h.db.set("shed")
	h.timeline(12*time.Minute+30*time.Second, 13*time.Minute, map[time.Duration][]string{
		12*time.Minute + 30*time.Second: {"resolved Shed@checkout/resolved"},
	})
	if acks, _ := h.st.Acks(ctx); len(acks) != 0 {
		t.Fatalf("ack kept after resolve: %+v", acks)
	}
	// It fires again: re-armed, notified after pending and group wait.
	h.db.set("shed", "checkout")
	h.timeline(13*time.Minute+30*time.Second, 15*time.Minute+30*time.Second, map[time.Duration][]string{
		15 * time.Minute: {"firing Shed@checkout/firing"},
	})
	if got := h.pdActions(); strings.Join(got, ",") != "resolve,trigger" {
		t.Fatalf("pagerduty after re-fire %v", got)
	}
	hist, err := h.m.History(ctx, fp, 10)
	if err != nil || len(hist) != 5 { // pending, firing, inactive, pending, firing
		t.Fatalf("history %+v %v", hist, err)
	}
}

func TestFailingReceiverAlertsAndDoesNotBlockOthers(t *testing.T) {
	h := newHarness(t)
	h.pd.mu.Lock()
	h.pd.fail = true
	h.pd.mu.Unlock()
	h.db.set("shed", "checkout")
	h.at(0)
	h.at(time.Minute)
	// 90s: the webhook gets the page although PagerDuty keeps failing.
	h.clk.Set(t0.Add(90 * time.Second))
	if err := h.m.Step(context.Background(), h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.m.queues["hook"].Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.expect(90*time.Second, "firing Shed@checkout/firing")
	// PagerDuty retries with back-off (1s, 2s) and gives up after 3 attempts.
	for h.clk.Pending() == 0 {
		waitBriefly()
	}
	h.clk.Advance(time.Second)
	for h.clk.Pending() == 0 {
		waitBriefly()
	}
	h.clk.Advance(2 * time.Second)
	if err := h.m.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(h.m.m.delivery.Failed("pd")); v != 1 {
		t.Fatalf("failed notifications to pd = %v", v)
	}
	// The failure raises GovernorAlertReceiverFailing (P1), sent to the webhook.
	h.at(2 * time.Minute)
	// PagerDuty is back: the page it gave up on goes out again at the
	// group interval after it (90s + 1m).
	h.pd.mu.Lock()
	h.pd.fail = false
	h.pd.mu.Unlock()
	h.at(2*time.Minute + 30*time.Second)
	got := h.hook.webhooks(t)
	if len(got) != 1 || !strings.Contains(got[0], "GovernorAlertReceiverFailing@/firing") {
		t.Fatalf("receiver failing alert: %v", got)
	}
	if got := h.pdActions(); strings.Join(got, ",") != "trigger" {
		t.Fatalf("pagerduty after it came back: %v, want the page given up on", got)
	}
}
