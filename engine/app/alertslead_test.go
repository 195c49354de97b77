package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	alertsconfig "governor.dev/governor/alerts/config"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/leader"
)

// hookRecorder is a webhook receiver recording the alert names of what it
// got, in order; while held, requests wait (their sender's context ends
// them) and record nothing.
type hookRecorder struct {
	mu   sync.Mutex
	got  []string
	hold chan struct{}
	in   chan string // the alert name of each request, as it arrives
}

func newHookRecorder(t *testing.T) (*hookRecorder, *httptest.Server) {
	h := &hookRecorder{in: make(chan string, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
			} `json:"alerts"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || len(p.Alerts) == 0 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		name := p.Alerts[0].Labels["alertname"]
		h.in <- name
		h.mu.Lock()
		hold := h.hold
		h.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		h.mu.Lock()
		h.got = append(h.got, name)
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hookRecorder) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// logNotification writes an undelivered notification of the hook receiver
// to the alerts store on db, as the leader does before queueing it.
func logNotification(t *testing.T, a *App, id, name string, at time.Time) {
	t.Helper()
	st, err := store.New(context.Background(), a.ledgerDB, a.dialect(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	al := notify.Alert{Alert: alerts.Alert{Labels: alerts.Labels{"alertname": name, "severity": "P1"}, StartsAt: at}, Status: notify.StatusFiring}
	m := notify.NewMessage(notify.KindNotify, "hook", "{}:{alertname=\""+name+"\"}", alerts.Labels{"alertname": name}, []notify.Alert{al}, at)
	m.ID = id
	if _, err := st.RecordNotification(context.Background(), nil, m); err != nil {
		t.Fatal(err)
	}
}

// TestUndeliveredAlertNotificationsFollowTheLead: the notifications the
// log holds undelivered are sent by the replica that leads, once: a
// standby started beside a live leader sends none of them (it used to
// queue and send them at its start, beside the leader sending them too),
// and a standby taking the lead sends those the old leader logged after the
// standby started too (it used to load them only at its start, so they
// waited for its next restart), in the order they were logged.
func TestUndeliveredAlertNotificationsFollowTheLead(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	// The leader logged a notification it is still sending; the standby
	// starts beside it.
	a, hook, e := alertsReplica(t, func(before *App) { logNotification(t, before, "n1", "Before", t0) })
	a.stepAlerts(ctx, a.alerts)
	if err := a.alerts.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hook.received(); len(got) != 0 {
		t.Errorf("a standby sent %v beside the leader", got)
	}

	// The leader logs another one, then dies: the standby takes the lead.
	logNotification(t, a, "n2", "After", t0.Add(time.Second))
	e.setLead(true)
	a.stepAlerts(ctx, a.alerts)
	if err := a.alerts.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := hook.received(), []string{"Before", "After"}; !slices.Equal(got, want) {
		t.Errorf("the new leader sent %v, want %v", got, want)
	}
}

// TestReplicaLosingTheLeadLeavesItsQueuedAlertNotificationsToTheNext: a
// replica whose lead ends stops sending at once, the notification in flight
// included, and leaves what it had queued undelivered in the log, for the
// next leader to send (it used to go on sending its queue beside the next
// leader, which sends the same notifications).
func TestReplicaLosingTheLeadLeavesItsQueuedAlertNotificationsToTheNext(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a, hook, e := alertsReplica(t, func(before *App) {
		logNotification(t, before, "n1", "InFlight", t0)
		logNotification(t, before, "n2", "Queued", t0.Add(time.Second))
	})
	hold := make(chan struct{})
	hook.mu.Lock()
	hook.hold = hold
	hook.mu.Unlock()
	e.setLead(true)
	a.stepAlerts(ctx, a.alerts)
	if got := <-hook.in; got != "InFlight" {
		t.Fatalf("first delivery %q, want InFlight", got)
	}
	e.setLead(false)
	a.stepAlerts(ctx, a.alerts) // waits for the manager to stand by
	close(hold)
	if err := a.alerts.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hook.received(); len(got) != 0 {
		t.Fatalf("after its lead ended the replica delivered %v", got)
	}
	pending, err := undelivered(t, a)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"n1", "n2"}; !slices.Equal(pending, want) {
		t.Fatalf("undelivered in the log %v, want %v for the next leader", pending, want)
	}
}

// alertsReplica starts an engine whose alerts go to a recording webhook,
// led by the test (not leading at first), on a database where logged
// wrote what the replica that led before it logged.
func alertsReplica(t *testing.T, logged func(before *App)) (*App, *hookRecorder, *termsElector) {
	t.Helper()
	hook, srv := newHookRecorder(t)
	ac, err := alertsconfig.Parse([]byte(`{"receivers": [{"name": "hook", "webhook": {"url": "` + srv.URL + `"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "b"
	before, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry(), Alerts: ac})
	if err != nil {
		t.Fatal(err)
	}
	before.elector = &termsElector{Local: leader.Local{ID: "a"}}
	logged(before)
	before.close()
	a, err := New(context.Background(), Options{Config: cfg, Registry: prometheus.NewRegistry(), Alerts: ac})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	e := &termsElector{Local: leader.Local{ID: "b"}}
	a.elector = e
	return a, hook, e
}

func undelivered(t *testing.T, a *App) ([]string, error) {
	st, err := store.New(context.Background(), a.ledgerDB, a.dialect(), store.Options{})
	if err != nil {
		return nil, err
	}
	ps, err := st.Undelivered(context.Background())
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.Message.ID)
	}
	return ids, err
}
