package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/pagerduty"
	"governor.dev/governor/alerts/notify/webhook"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/internal/testenv"
)

// TestReconfigureSwapsReceiversAndRoutes: a notification being retried when
// the routing changes finishes on the receiver that accepted it; what is
// decided afterwards goes by the new routes; a receiver still routed to
// keeps its groups, so it is not paged again before its repeat interval.
func TestReconfigureSwapsReceiversAndRoutes(t *testing.T) {
	h := newHarness(t)
	team := newReceiver(t)
	h.db.set("shed", "checkout")
	h.at(0)
	h.at(time.Minute)
	h.at(90 * time.Second)
	h.expect(90*time.Second, "firing Shed@checkout/firing")
	if got := h.pdActions(); strings.Join(got, ",") != "trigger" {
		t.Fatalf("pagerduty actions %v", got)
	}

	// The webhook starts failing; the Load page is in its retry back-off
	// when the routing changes.
	h.hook.mu.Lock()
	h.hook.fail = true
	h.hook.mu.Unlock()
	h.db.set("load", "search") // another service: the P0 does not inhibit it
	h.at(2 * time.Minute)
	h.clk.Set(t0.Add(150 * time.Second))
	if err := h.m.Step(context.Background(), h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	for i := 0; h.clk.Pending() == 0; i++ { // the hook queue waits for its back-off
		if i == 1e6 {
			st, _ := h.st.Groups(context.Background())
			t.Fatalf("no retry pending; alerts %+v groups %+v", h.m.Alerts(h.clk.Now()), st)
		}
		waitBriefly()
	}

	teamHook, err := webhook.New(webhook.Config{URL: team.srv.URL}, team.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	pd, err := pagerduty.New(pagerduty.Config{RoutingKey: "rk2", URL: h.pd.srv.URL}, h.pd.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.m.Reconfigure(Routing{
		Receivers: map[string]notify.Notifier{"pd": pd, "team": teamHook},
		Routes: []dispatch.Route{
			{Receiver: "pd", Severities: []alerts.Severity{alerts.P0}, Continue: true},
			{Receiver: "team"},
		},
		Timing: dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute},
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.m.Receivers(), ","); got != "pd,team" {
		t.Fatalf("receivers %s", got)
	}

	// The old webhook recovers: its retry delivers the page it accepted.
	h.hook.mu.Lock()
	h.hook.fail = false
	h.hook.mu.Unlock()
	h.clk.Advance(time.Second)
	if err := h.m.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.expect(150*time.Second, "firing Load@search/firing")

	// New decisions go to team (its own group wait) and never to the old
	// webhook; PagerDuty keeps its group and repeats on its own schedule.
	h.at(3 * time.Minute)
	h.at(210 * time.Second)
	if got := team.webhooks(t); strings.Join(got, "|") != "firing Load@search/firing|firing Shed@checkout/firing" {
		t.Fatalf("team got %v", got)
	}
	h.expect(210 * time.Second)
	if got := h.pdActions(); len(got) != 0 {
		t.Fatalf("pagerduty paged again after the swap: %v", got)
	}
	h.at(6*time.Minute + 30*time.Second)
	if got := h.pdActions(); strings.Join(got, ",") != "trigger" {
		t.Fatalf("pagerduty repeat %v", got)
	}
	h.expect(6*time.Minute + 30*time.Second)
}

// TestReconfigureRefusesBadRoutingAndKeepsOld: a routing naming an unknown
// receiver is refused whole; the old one keeps working.
func TestReconfigureRefusesBadRoutingAndKeepsOld(t *testing.T) {
	h := newHarness(t)
	hook, err := webhook.New(webhook.Config{URL: h.hook.srv.URL}, h.hook.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Routing{
		{},
		{Receivers: map[string]notify.Notifier{"a": hook, "b": hook}},
		{Receivers: map[string]notify.Notifier{"a": hook}, Routes: []dispatch.Route{{Receiver: "nobody"}}},
		{Receivers: map[string]notify.Notifier{"a": hook}, Routes: []dispatch.Route{{Receiver: "a", GroupBy: []string{"bad label"}}}},
	} {
		if err := h.m.Reconfigure(r); !errors.Is(err, alerts.ErrInvalid) {
			t.Fatalf("Reconfigure(%+v) = %v, want ErrInvalid", r, err)
		}
	}
	if got := strings.Join(h.m.Receivers(), ","); got != "hook,pd" {
		t.Fatalf("receivers after refusals %s", got)
	}
	h.db.set("load", "checkout")
	h.at(0)
	h.at(30 * time.Second)
	h.expect(30*time.Second, "firing Load@checkout/firing")
}

// TestReconfigureReplacedReceiverGivingUpRaisesNothing: a receiver removed
// by Reconfigure that gives up on its last queued message raises no
// GovernorAlertReceiverFailing, which nothing could resolve any more.
func TestReconfigureReplacedReceiverGivingUpRaisesNothing(t *testing.T) {
	h := newHarness(t)
	h.hook.mu.Lock()
	h.hook.fail = true
	h.hook.mu.Unlock()
	h.db.set("load", "checkout")
	h.at(0)
	h.clk.Set(t0.Add(30 * time.Second))
	if err := h.m.Step(context.Background(), h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	for h.clk.Pending() == 0 {
		waitBriefly()
	}
	team := newReceiver(t)
	teamHook, err := webhook.New(webhook.Config{URL: team.srv.URL}, team.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.m.Reconfigure(Routing{Receivers: map[string]notify.Notifier{"team": teamHook}}); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(time.Second) // attempt 2
	for h.clk.Pending() == 0 {
		waitBriefly()
	}
	h.clk.Advance(2 * time.Second) // attempt 3, the last
	if err := h.m.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.at(time.Minute)
	for _, s := range h.m.Alerts(h.clk.Now()) {
		if s.Labels["alertname"] == "GovernorAlertReceiverFailing" {
			t.Fatalf("a replaced receiver raised %v", s.Labels)
		}
	}
}

// TestReconfigureGroupByKeepsFiringAlerts: a new group_by for a receiver
// that stays routed to regroups its alerts without a notification: none
// is reported resolved, none is paged again before its repeat interval
// (Alertmanager's behaviour on reload); a real resolve still arrives, from
// the new group.
func TestReconfigureGroupByKeepsFiringAlerts(t *testing.T) {
	h := newHarness(t)
	h.db.set("load", "checkout", "search")
	h.at(0)
	h.at(30 * time.Second)
	h.expect(30*time.Second, "firing Load@checkout/firing", "firing Load@search/firing") // one group per service

	hook, err := webhook.New(webhook.Config{URL: h.hook.srv.URL}, h.hook.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	pd, err := pagerduty.New(pagerduty.Config{RoutingKey: "rk", URL: h.pd.srv.URL}, h.pd.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.m.Reconfigure(Routing{
		Receivers: map[string]notify.Notifier{"hook": hook, "pd": pd},
		Routes: []dispatch.Route{
			{Receiver: "pd", Severities: []alerts.Severity{alerts.P0}, Continue: true},
			{Receiver: "hook", GroupBy: []string{"alertname"}},
		},
		Timing: dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute},
	}); err != nil {
		t.Fatal(err)
	}
	h.timeline(time.Minute, 5*time.Minute, nil)

	h.db.set("load", "search")
	h.at(6 * time.Minute)
	h.expect(6*time.Minute, "firing Load@checkout/resolved,Load@search/firing")
	groups, err := h.st.Groups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.Key == `{alertname="Load"}` && (len(g.Notified) != 1 || g.Receiver != "hook") {
			t.Fatalf("the new group logged %+v", g)
		}
	}
}

// hookGroups returns the keys of the hook receiver's stored groups, sorted,
// each with the number of alerts it holds as notified.
func hookGroups(t *testing.T, h *harness) []string {
	t.Helper()
	groups, err := h.st.Groups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range groups {
		if g.Receiver == "hook" {
			out = append(out, fmt.Sprintf("%s:%d", g.Key, len(g.Notified)))
		}
	}
	sort.Strings(out)
	return out
}

// TestGroupByChangeRemovesOldGroupRows: after a receiver's group_by
// changes, the next step stores the new group, holding the alerts moved to
// it, and removes the old groups' rows, in one transaction, without a
// notification; a restart then neither pages again nor loses the resolve.
// Once everything resolved, no row is left.
func TestGroupByChangeRemovesOldGroupRowsSQLite(t *testing.T) { testGroupByChange(t, newHarness(t)) }

func TestGroupByChangeRemovesOldGroupRowsPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	testGroupByChange(t, newHarnessOn(t, testenv.Postgres(t)))
}

func testGroupByChange(t *testing.T, h *harness) {
	h.db.set("load", "checkout", "search")
	h.at(0)
	h.at(30 * time.Second)
	h.expect(30*time.Second, "firing Load@checkout/firing", "firing Load@search/firing")
	byService := []string{`{alertname="Load", service="checkout"}:1`, `{alertname="Load", service="search"}:1`}
	if got := hookGroups(t, h); !slices.Equal(got, byService) {
		t.Fatalf("stored groups %v, want %v", got, byService)
	}

	byName := []dispatch.Route{
		{Receiver: "pd", Severities: []alerts.Severity{alerts.P0}, Continue: true},
		{Receiver: "hook", GroupBy: []string{"alertname"}},
	}
	hook, err := webhook.New(webhook.Config{URL: h.hook.srv.URL}, h.hook.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.m.Reconfigure(Routing{Receivers: map[string]notify.Notifier{"hook": hook}, Routes: byName[1:],
		Timing: dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	h.at(time.Minute)
	h.expect(time.Minute)
	moved := []string{`{alertname="Load"}:2`}
	if got := hookGroups(t, h); !slices.Equal(got, moved) {
		t.Fatalf("stored groups after the regroup %v, want %v (the old groups' rows removed)", got, moved)
	}

	// A restart with the new grouping: nothing paged again, and the real
	// resolve comes from the new group.
	h.close()
	h.routes = byName
	h.open()
	h.timeline(90*time.Second, 5*time.Minute, nil)
	h.db.set("load", "search")
	h.at(6 * time.Minute)
	h.expect(6*time.Minute, "firing Load@checkout/resolved,Load@search/firing")
	if got, want := hookGroups(t, h), []string{`{alertname="Load"}:1`}; !slices.Equal(got, want) {
		t.Fatalf("stored groups %v, want %v", got, want)
	}
	h.db.set("load")
	h.at(7 * time.Minute)
	h.expect(7*time.Minute, "resolved Load@search/resolved")
	if got, want := hookGroups(t, h), []string{`{alertname="Load"}:0`}; !slices.Equal(got, want) {
		t.Fatalf("stored groups %v, want %v", got, want)
	}
	// Once the resolved alerts are no longer reported, the group is gone,
	// and so is its row.
	h.at(7*time.Minute + rule.ResolvedRetention + time.Minute)
	h.expect(7*time.Minute + rule.ResolvedRetention + time.Minute)
	if got := hookGroups(t, h); len(got) != 0 {
		t.Fatalf("stored groups %v once everything resolved, want none", got)
	}
	// History and the notification log are kept.
	if hist, err := h.m.History(context.Background(), 0, 100); err != nil || len(hist) == 0 {
		t.Fatalf("history %d entries, %v", len(hist), err)
	}
}

// Routes that no alert can fall through to a receiver from (here: only the
// P0 pager) would drop every other alert silently. New and Reconfigure
// refuse them, naming the routes, as Alertmanager requires a root route;
// the routing in force stays.
func TestRoutesThatLeaveAlertsUnroutedRefused(t *testing.T) {
	h := newHarness(t)
	pd, err := pagerduty.New(pagerduty.Config{RoutingKey: "rk", URL: h.pd.srv.URL}, h.pd.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	pagerOnly := []dispatch.Route{{Receiver: "pd", Severities: []alerts.Severity{alerts.P0}}}
	err = h.m.Reconfigure(Routing{Receivers: map[string]notify.Notifier{"pd": pd}, Routes: pagerOnly})
	if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "routes: no route catches every alert") {
		t.Fatalf("Reconfigure: %v, want an invalid-input error naming routes", err)
	}
	if got := strings.Join(h.m.Receivers(), ","); got != "hook,pd" {
		t.Fatalf("receivers after the refusal %s", got)
	}
	m, err := New(context.Background(), Options{Store: h.st, Receivers: map[string]notify.Notifier{"pd": pd}, Routes: pagerOnly})
	if err == nil {
		_ = m.Close()
	}
	if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "routes: no route catches every alert") {
		t.Fatalf("New: %v, want an invalid-input error naming routes", err)
	}
}

func TestGroupsOfRemovedReceiverDroppedSQLite(t *testing.T) {
	testGroupsOfRemovedReceiverDropped(t, func() *harness { return newHarness(t) })
}

func TestGroupsOfRemovedReceiverDroppedPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	testGroupsOfRemovedReceiverDropped(t, func() *harness { return newHarnessOn(t, testenv.Postgres(t)) })
}

// testGroupsOfRemovedReceiverDropped pages PagerDuty, then removes it, by
// Reconfigure or across a restart, while the page's alert fires: the next
// step removes PagerDuty's group rows. The alert resolves; PagerDuty is
// added back and the manager restarted: PagerDuty gets nothing, where the
// old rows, restored, made it send a resolve for an alert it was no longer
// routed, days later as well as minutes.
func testGroupsOfRemovedReceiverDropped(t *testing.T, newH func() *harness) {
	tests := []struct {
		name   string
		remove func(*harness)
	}{
		{"reconfigure", func(h *harness) {
			hook, err := webhook.New(webhook.Config{URL: h.hook.srv.URL}, h.hook.srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			if err := h.m.Reconfigure(Routing{Receivers: map[string]notify.Notifier{"hook": hook},
				Timing: dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute}}); err != nil {
				t.Fatal(err)
			}
		}},
		{"restart", func(h *harness) {
			h.close()
			h.withoutPD, h.routes = true, []dispatch.Route{{Receiver: "hook"}}
			h.open()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newH()
			h.db.set("shed", "checkout")
			h.steps(0, 90*time.Second)
			if got := h.pdActions(); strings.Join(got, ",") != "trigger" {
				t.Fatalf("first page %v", got)
			}
			tt.remove(h)
			h.at(2 * time.Minute)
			groups, err := h.st.Groups(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range groups {
				if g.Receiver == "pd" {
					t.Fatalf("row of the removed receiver pd kept: %+v", g)
				}
			}
			h.db.set("shed")
			h.steps(150*time.Second, 5*time.Minute)
			h.close()
			h.withoutPD, h.routes = false, nil
			h.open()
			h.steps(330*time.Second, 10*time.Minute)
			if got := h.pdActions(); len(got) != 0 {
				t.Fatalf("pagerduty, added back, got %v for an alert resolved while it was removed, want nothing", got)
			}
		})
	}
}
