package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/internal/testenv"
)

// stepGivingUp steps at start+d while PagerDuty fails, moves the clock
// through the queue's back-offs (1s, 2s: 3 attempts) and waits until the
// queue gave up.
func (h *harness) stepGivingUp(d time.Duration) {
	h.t.Helper()
	h.clk.Set(h.start.Add(d))
	if err := h.m.Step(context.Background(), h.clk.Now()); err != nil {
		h.t.Fatal(err)
	}
	for _, b := range []time.Duration{time.Second, 2 * time.Second} {
		for h.clk.Pending() == 0 {
			waitBriefly()
		}
		h.clk.Advance(b)
	}
	if err := h.m.Idle(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// steps steps every 30s from from to to (inclusive); the webhook gets the
// receiver-failing alert meanwhile, which these tests leave unchecked.
func (h *harness) steps(from, to time.Duration) {
	h.t.Helper()
	for d := from; d <= to; d += 30 * time.Second {
		h.at(d)
	}
}

func (h *harness) setPagerDutyFailing(fail bool) {
	h.pd.mu.Lock()
	h.pd.fail = fail
	h.pd.mu.Unlock()
}

// pageThenLoseResolve pages a P0 at 90s, then lets PagerDuty refuse its
// resolve (150s) until the queue gives up; the webhook gets the resolve.
func pageThenLoseResolve(t *testing.T, h *harness) {
	t.Helper()
	h.db.set("shed", "checkout")
	h.timeline(0, 90*time.Second, map[time.Duration][]string{90 * time.Second: {"firing Shed@checkout/firing"}})
	if got := h.pdInOrder(); strings.Join(got, ",") != "trigger" {
		t.Fatalf("first page: %v", got)
	}
	h.setPagerDutyFailing(true)
	h.db.set("shed")
	h.at(2 * time.Minute)
	h.stepGivingUp(150 * time.Second)
	if v := testutil.ToFloat64(h.m.m.delivery.Failed("pd")); v != 1 {
		t.Fatalf("failed notifications to pd = %v, want the resolve given up", v)
	}
	h.expect(150*time.Second, "resolved Shed@checkout/resolved")
}

// A resolve that PagerDuty refused until the queue gave up is sent again at
// the group interval after it (150s + 1m) once PagerDuty is back, and only
// once: the incident does not stay open forever.
func TestResolveGivenUpIsSentAgain(t *testing.T) {
	h := newHarness(t)
	pageThenLoseResolve(t, h)
	h.pd.take()
	h.setPagerDutyFailing(false)
	h.at(3 * time.Minute)
	if got := h.pdInOrder(); len(got) != 0 {
		t.Fatalf("pagerduty before the group interval: %v", got)
	}
	h.at(3*time.Minute + 30*time.Second)
	if got := h.pdInOrder(); strings.Join(got, ",") != "resolve" {
		t.Fatalf("pagerduty at the group interval: %v, want the resolve given up on", got)
	}
	h.steps(4*time.Minute, 10*time.Minute)
	if got := h.pdInOrder(); len(got) != 0 {
		t.Fatalf("pagerduty after the resolve: %v", got)
	}
	if pend, _ := h.st.Undelivered(context.Background()); len(pend) != 0 {
		t.Fatalf("log entries left open: %+v", pend)
	}
}

func TestResolveGivenUpSurvivesRestartSQLite(t *testing.T) {
	t.Run("before the next step", func(t *testing.T) { testResolveGivenUpRestart(t, newHarness(t), false) })
	t.Run("after the next step", func(t *testing.T) { testResolveGivenUpRestart(t, newHarness(t), true) })
}

func TestResolveGivenUpSurvivesRestartPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	t.Run("before the next step", func(t *testing.T) {
		testResolveGivenUpRestart(t, newHarnessOn(t, testenv.Postgres(t)), false)
	})
	t.Run("after the next step", func(t *testing.T) {
		testResolveGivenUpRestart(t, newHarnessOn(t, testenv.Postgres(t)), true)
	})
}

// testResolveGivenUpRestart restarts the manager after PagerDuty gave up on
// a resolve, before or after the next step took it back from its group:
// either way the restarted manager sends the resolve once. Before, the log
// entry is still open and the restart queues it again; after, the group
// state stored holds the alert again and the log entry is closed.
func testResolveGivenUpRestart(t *testing.T, h *harness, stepFirst bool) {
	ctx := context.Background()
	pageThenLoseResolve(t, h)
	if stepFirst {
		h.at(3 * time.Minute)
	}
	h.close()
	h.setPagerDutyFailing(false)
	h.pd.take()
	h.open()
	if err := h.m.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	h.steps(3*time.Minute+30*time.Second, 10*time.Minute)
	if got := h.pdInOrder(); strings.Join(got, ",") != "resolve" {
		t.Fatalf("pagerduty after the restart: %v, want the resolve given up on, once", got)
	}
	if pend, _ := h.st.Undelivered(ctx); len(pend) != 0 {
		t.Fatalf("log entries left open: %+v", pend)
	}
}
