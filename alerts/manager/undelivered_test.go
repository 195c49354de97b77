package manager

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/pagerduty"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
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

// pdEvents returns the PagerDuty events in arrival order as action:service
// for the Shed alerts of the services named.
func (h *harness) pdEvents(services ...string) []string {
	var out []string
	for _, raw := range h.pd.take() {
		var e pagerduty.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			h.t.Fatal(err)
		}
		svc := "?"
		for _, s := range services {
			if e.DedupKey == (alerts.Labels{"alertname": "Shed", "service": s, "severity": "P0"}).Fingerprint().String() {
				svc = s
			}
		}
		out = append(out, e.EventAction+":"+svc)
	}
	return out
}

// waitBackoff waits until a queue worker waits on its back-off timer.
func (h *harness) waitBackoff() {
	for h.clk.Pending() == 0 {
		waitBriefly()
	}
}

// stepAt steps at start+d without waiting for the deliveries.
func (h *harness) stepAt(d time.Duration) {
	h.t.Helper()
	h.clk.Set(h.start.Add(d))
	if err := h.m.Step(context.Background(), h.clk.Now()); err != nil {
		h.t.Fatalf("step at %s: %v", d, err)
	}
}

// A resolve dropped because PagerDuty's queue was full (PagerDuty slow,
// its queue holding a page on back-off and another resolve) is not lost:
// like a notification the receiver gave up on, the next step takes it back
// from its group and it goes out again at the group interval after it
// (4m30s + 1m), once, so the incident does not stay open; its log entry is
// closed.
func TestResolveDroppedOnFullQueueIsSentAgain(t *testing.T) {
	h := newHarness(t)
	h.close()
	h.routes = []dispatch.Route{{Receiver: "pd"}}
	h.capacity = 1
	h.open()
	h.db.set("shed", "z")
	h.steps(0, 90*time.Second)
	if got := h.pdEvents("z", "b"); strings.Join(got, ",") != "trigger:z" {
		t.Fatalf("first page: %v", got)
	}
	h.db.set("shed", "z", "b")
	h.steps(2*time.Minute, 3*time.Minute)
	h.setPagerDutyFailing(true)
	h.stepAt(3*time.Minute + 30*time.Second) // b's page fails and waits 1s
	h.waitBackoff()
	h.db.set("shed")
	h.clk.Set(h.start.Add(4*time.Minute + 30*time.Second)) // b's page fails again and waits 2s
	h.waitBackoff()
	h.stepAt(4*time.Minute + 30*time.Second) // b's resolve fills the queue, z's is dropped
	if v := testutil.ToFloat64(h.m.m.delivery.Dropped("pd")); v != 1 {
		t.Fatalf("notifications dropped for pd = %v, want z's resolve", v)
	}
	h.setPagerDutyFailing(false)
	h.clk.Advance(2 * time.Second)
	if err := h.m.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.pdEvents("z", "b"); strings.Join(got, ",") != "trigger:b,resolve:b" {
		t.Fatalf("pagerduty once back: %v", got)
	}
	h.steps(5*time.Minute, 5*time.Minute)
	if got := h.pdEvents("z", "b"); len(got) != 0 {
		t.Fatalf("pagerduty before the group interval: %v", got)
	}
	h.steps(5*time.Minute+30*time.Second, 10*time.Minute)
	if got := h.pdEvents("z", "b"); strings.Join(got, ",") != "resolve:z" {
		t.Fatalf("pagerduty after the drop: %v, want z's resolve once", got)
	}
	if pend, _ := h.st.Undelivered(context.Background()); len(pend) != 0 {
		t.Fatalf("log entries left open: %+v", pend)
	}
}

func TestRestartWithMoreUndeliveredThanQueueCapacitySQLite(t *testing.T) {
	testRestartWithMoreUndeliveredThanQueueCapacity(t, newHarness(t))
}

func TestRestartWithMoreUndeliveredThanQueueCapacityPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	testRestartWithMoreUndeliveredThanQueueCapacity(t, newHarnessOn(t, testenv.Postgres(t)))
}

// testRestartWithMoreUndeliveredThanQueueCapacity stops the manager with
// three pages to PagerDuty undelivered and restarts it with a queue of one:
// the pages the queue has no room for are taken back from their groups at
// the first step and sent at the group interval, so each page arrives once
// and no log entry stays open.
func testRestartWithMoreUndeliveredThanQueueCapacity(t *testing.T, h *harness) {
	h.close()
	h.routes = []dispatch.Route{{Receiver: "pd"}}
	h.open()
	h.setPagerDutyFailing(true)
	h.db.set("shed", "z", "b", "c")
	h.steps(0, time.Minute)
	h.stepAt(90 * time.Second) // three pages: one waits on its back-off, two queued
	h.waitBackoff()
	h.close()
	h.capacity = 1
	h.open()
	h.waitBackoff()
	if v := testutil.ToFloat64(h.m.m.delivery.Dropped("pd")); v < 1 {
		t.Fatalf("notifications dropped for pd = %v, want at least one of the three pages", v)
	}
	h.setPagerDutyFailing(false)
	h.clk.Advance(time.Second)
	if err := h.m.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.steps(2*time.Minute, 5*time.Minute)
	got := h.pdEvents("z", "b", "c")
	slices.Sort(got)
	if strings.Join(got, ",") != "trigger:b,trigger:c,trigger:z" {
		t.Fatalf("pagerduty after the restart: %v, want each page once", got)
	}
	if pend, _ := h.st.Undelivered(context.Background()); len(pend) != 0 {
		t.Fatalf("log entries left open: %+v", pend)
	}
}

func TestReceiverFailingAlertClearsAfterRestartSQLite(t *testing.T) {
	testReceiverFailingAlertClearsAfterRestart(t, newHarness(t))
}

func TestReceiverFailingAlertClearsAfterRestartPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	testReceiverFailingAlertClearsAfterRestart(t, newHarnessOn(t, testenv.Postgres(t)))
}

// receiverFailing returns the failing alert of receiver, if listed.
func (h *harness) receiverFailing(receiver string) (alerts.Alert, bool) {
	for _, s := range h.m.Alerts(h.clk.Now()) {
		if s.Labels["alertname"] == rule.ReceiverFailingRule && s.Labels["receiver"] == receiver {
			return s.Alert, true
		}
	}
	return alerts.Alert{}, false
}

// testReceiverFailingAlertClearsAfterRestart restarts the manager while
// PagerDuty's failing alert fires: the restarted manager knows PagerDuty
// was failing, so the alert resolves with PagerDuty's next delivery (the
// resolve given up on), not a day later at the rule's resolve_after, paging
// every hour meanwhile.
func testReceiverFailingAlertClearsAfterRestart(t *testing.T, h *harness) {
	pageThenLoseResolve(t, h)
	h.at(3 * time.Minute)
	if a, ok := h.receiverFailing("pd"); !ok || !a.EndsAt.IsZero() {
		t.Fatalf("pd failing alert before the restart: %+v (listed %v), want it firing", a, ok)
	}
	h.close()
	h.setPagerDutyFailing(false)
	h.open()
	h.steps(3*time.Minute+30*time.Second, 10*time.Minute)
	if got := h.pdInOrder(); strings.Join(got, ",") != "resolve" {
		t.Fatalf("pagerduty after the restart: %v, want the resolve given up on", got)
	}
	if a, ok := h.receiverFailing("pd"); ok && a.EndsAt.IsZero() {
		t.Fatalf("pd delivers again, yet its failing alert still fires: %+v", a)
	}
}

// A receiver removed from the configuration while its failing alert fires
// (across a restart) has that alert resolved at once, as Reconfigure does
// for a running manager: nothing could ever clear it otherwise.
func TestReceiverFailingAlertOfRemovedReceiverResolvesAtRestart(t *testing.T) {
	h := newHarness(t)
	pageThenLoseResolve(t, h)
	h.at(3 * time.Minute)
	h.close()
	h.withoutPD = true
	h.routes = []dispatch.Route{{Receiver: "hook"}}
	h.open()
	h.at(3*time.Minute + 30*time.Second)
	if a, ok := h.receiverFailing("pd"); ok && a.EndsAt.IsZero() {
		t.Fatalf("failing alert of a receiver no longer configured: %+v", a)
	}
}

func TestUndeliveredOfRemovedReceiverClosedAtStartSQLite(t *testing.T) {
	testUndeliveredOfRemovedReceiverClosedAtStart(t, newHarness(t))
}

func TestUndeliveredOfRemovedReceiverClosedAtStartPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	testUndeliveredOfRemovedReceiverClosedAtStart(t, newHarnessOn(t, testenv.Postgres(t)))
}

// testUndeliveredOfRemovedReceiverClosedAtStart stops the manager while a
// page to PagerDuty waits on its back-off, and restarts it without
// PagerDuty: nothing could ever send that page, so the start closes its
// log entry, unsent, counts it in
// governor_alerts_notifications_discarded_total and logs it, instead of
// loading it again at every start. A second start finds nothing to
// discard; PagerDuty, added back, is not sent the old page from the log.
func testUndeliveredOfRemovedReceiverClosedAtStart(t *testing.T, h *harness) {
	ctx := context.Background()
	h.setPagerDutyFailing(true)
	h.db.set("shed", "checkout")
	h.steps(0, time.Minute)
	h.stepAt(90 * time.Second) // the page fails and waits on its back-off
	h.waitBackoff()
	h.close()
	h.setPagerDutyFailing(false)
	h.withoutPD, h.routes = true, []dispatch.Route{{Receiver: "hook"}}
	h.open()
	openFor := func(receiver string) int {
		t.Helper()
		pend, err := h.st.Undelivered(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range pend {
			if p.Message.Receiver == receiver {
				n++
			}
		}
		return n
	}
	if n := openFor("pd"); n != 0 {
		t.Fatalf("%d log entries of the removed receiver pd left open after the start", n)
	}
	if v := testutil.ToFloat64(h.m.m.discarded); v != 1 {
		t.Fatalf("discarded notifications %v, want the page to pd", v)
	}
	h.close()
	h.open()
	if v := testutil.ToFloat64(h.m.m.discarded); v != 0 {
		t.Fatalf("discarded notifications at the second start %v, want none", v)
	}
	h.close()
	h.withoutPD, h.routes = false, nil
	h.open()
	if err := h.m.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.pdActions(); len(got) != 0 {
		t.Fatalf("pagerduty, added back, got %v from the log", got)
	}
}

// queueDepth reads governor_alerts_notification_queue_depth of receiver.
func (h *harness) queueDepth(receiver string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "governor_alerts_notification_queue_depth" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "receiver" && l.GetValue() == receiver {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	h.t.Fatalf("no queue depth for %s", receiver)
	return 0
}

// A P0 page reaching a receiver whose queue is full of P2 notifications
// (the receiver hangs) takes the place of the newest P2 one instead of
// being dropped, and goes out first once the receiver answers; the P2
// notification it displaced counts as not sent, as one dropped on a full
// queue: its group sends it again at the group interval after it (90s +
// 1m), once.
func TestP0PageTakesTheQueuePlaceOfAP2WhichIsSentAgainAtGroupInterval(t *testing.T) {
	h := newHarness(t)
	h.close()
	h.routes = []dispatch.Route{{Receiver: "hook"}}
	h.capacity = 1
	h.open()
	release := h.hook.hold()
	h.db.set("breaker", "a")
	h.stepAt(0)
	h.db.set("shed", "c")
	h.stepAt(30 * time.Second) // Breaker@a goes out and hangs in the receiver
	for h.queueDepth("hook") != 0 {
		waitBriefly()
	}
	h.db.set("breaker", "a", "b")
	h.stepAt(60 * time.Second)
	h.stepAt(90 * time.Second)  // Breaker@b fills the queue
	h.stepAt(120 * time.Second) // the P0 page finds it full
	if v := testutil.ToFloat64(h.m.m.delivery.Dropped("hook")); v != 1 {
		t.Fatalf("dropped %v, want 1", v)
	}
	release()
	h.at(120 * time.Second)
	h.expect(120*time.Second, "firing Breaker@a/firing", "firing Shed@c/firing")
	h.at(150 * time.Second)
	h.expect(150*time.Second, "firing Breaker@b/firing")
	h.at(180 * time.Second)
	h.expect(180 * time.Second)
}

// marksFail is a store whose closing writes of log entries fail while
// down is set: the database of a failover.
type marksFail struct {
	store.Store
	down *atomic.Bool
}

func (s marksFail) MarkDelivered(ctx context.Context, id string, at time.Time, attempts int, errText string) error {
	if s.down.Load() {
		return errors.New("connection refused")
	}
	return s.Store.MarkDelivered(ctx, id, at, attempts, errText)
}

// TestLogEntriesClosedWhileTheStoreWasDownAreWrittenAgain: notifications
// delivered while the store refused their closing write stayed open in the
// log, and the next leader or start (after a database failover, likely
// both) sent every one of them again. The writes are retried at the next
// steps, and a restart then sends nothing again.
func TestLogEntriesClosedWhileTheStoreWasDownAreWrittenAgain(t *testing.T) {
	h := newHarness(t)
	h.close()
	down := new(atomic.Bool)
	h.wrap = func(st store.Store) store.Store { return marksFail{Store: st, down: down} }
	h.open()
	ctx := context.Background()
	step := func(d time.Duration) error {
		h.clk.Set(h.start.Add(d))
		err := h.m.Step(ctx, h.clk.Now())
		if ierr := h.m.Idle(ctx); ierr != nil {
			t.Fatal(ierr)
		}
		return err
	}
	h.db.set("load", "search")
	down.Store(true)
	for d := time.Duration(0); d <= 90*time.Second; d += 30 * time.Second {
		_ = step(d)
	}
	if got := h.hook.webhooks(t); len(got) == 0 {
		t.Fatal("nothing delivered while the store was down")
	}
	if p, err := h.st.Undelivered(ctx); err != nil || len(p) == 0 {
		t.Fatalf("open log entries %d, %v: want the delivered ones open while the store is down", len(p), err)
	}
	down.Store(false)
	if err := step(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if p, err := h.st.Undelivered(ctx); err != nil || len(p) != 0 {
		t.Fatalf("open log entries after the store came back: %+v, %v", p, err)
	}
	h.close()
	h.wrap = nil
	h.open()
	h.at(150 * time.Second)
	if got := h.hook.webhooks(t); len(got) != 0 {
		t.Fatalf("sent again after the restart: %q", got)
	}
}

// logDown is a store whose notification log and group writes fail while
// down is set: the database of a failover, as the notification is sent.
type logDown struct {
	store.Store
	down *atomic.Bool
}

var errConnRefused = errors.New("connection refused")

func (s logDown) RecordNotification(ctx context.Context, g *dispatch.GroupState, m *notify.Message) (bool, error) {
	if s.down.Load() {
		return false, errConnRefused
	}
	return s.Store.RecordNotification(ctx, g, m)
}

func (s logDown) MarkDelivered(ctx context.Context, id string, at time.Time, attempts int, errText string) error {
	if s.down.Load() {
		return errConnRefused
	}
	return s.Store.MarkDelivered(ctx, id, at, attempts, errText)
}

func (s logDown) UpdateGroups(ctx context.Context, put []dispatch.GroupState, remove []dispatch.GroupRef) error {
	if s.down.Load() {
		return errConnRefused
	}
	return s.Store.UpdateGroups(ctx, put, remove)
}

// A page sent while the notification log could not be written (the
// database failing over) is sent all the same: a page matters more than
// its log entry, and a duplicate page is better than a late one. Its log
// entry and its group's state are written by the first step after the
// store is back, so that a leader taking over after that does not page
// again: the page goes out exactly once. A lead that changes before
// (while the store is down, or before that step) leaves the next leader
// unaware of the page, and it goes out twice, never more.
func TestPageSentWhileTheLogWasDownIsLoggedOnceTheStoreIsBack(t *testing.T) {
	tests := []struct {
		name string
		// stepAfter: the leader steps once the store is back, before
		// the lead changes.
		stepAfter bool
		want      int
	}{
		{"lead changes after a step with the store back", true, 1},
		{"lead changes while the store is down", false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t)
			h.close()
			down := new(atomic.Bool)
			a, ra, st := wrappedReplica(t, h, false, func(st store.Store) store.Store { return logDown{Store: st, down: down} })
			b, rb, _ := replica(t, h, true)

			h.db.set("load", "x")
			stepAt(t, h, a, 0)
			down.Store(true)
			h.clk.Set(t0.Add(30 * time.Second))
			if err := a.Step(ctx, h.clk.Now()); !errors.Is(err, errConnRefused) {
				t.Fatalf("a step that could not log its page: %v, want the store's error", err)
			}
			if err := a.Idle(ctx); err != nil {
				t.Fatal(err)
			}
			if got := ra.received(); !slices.Equal(got, []string{"firing Load@x"}) {
				t.Fatalf("sent while the log was down: %v, want the page", got)
			}
			if tt.stepAfter {
				down.Store(false)
				stepAt(t, h, a, 60*time.Second) // the log entry is written, then closed
				if err := a.Idle(ctx); err != nil {
					t.Fatal(err)
				}
				stepAt(t, h, a, 90*time.Second) // nothing is left to write
				if pending := undeliveredLines(t, st); len(pending) != 0 {
					t.Fatalf("open log entries after the store came back: %v", pending)
				}
			}
			a.Standby()
			down.Store(false)
			if err := b.Lead(ctx); err != nil {
				t.Fatal(err)
			}
			for d := 2 * time.Minute; d <= 10*time.Minute; d += 30 * time.Second {
				stepAt(t, h, b, d)
			}
			if err := b.Idle(ctx); err != nil {
				t.Fatal(err)
			}
			if n := len(ra.received()) + len(rb.received()); n != tt.want {
				t.Fatalf("paged %d times (%v, then %v), want %d", n, ra.received(), rb.received(), tt.want)
			}
		})
	}
}
