package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

// eventLog is a receiver of dedup events: it records "status
// alertname@service" per alert of each delivered message, holds back the
// first attempt at the trigger of hold (not attempted, for 5 minutes) and
// reports each delivered message's lines on delivered.
type eventLog struct {
	f         *clock.Fake
	hold      string
	mu        sync.Mutex
	held      bool
	got       []string
	delivered chan string
}

func (e *eventLog) Notify(_ context.Context, m *notify.Message) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var lines []string
	for _, a := range m.Alerts {
		lines = append(lines, a.Status+" "+a.Labels["alertname"]+"@"+a.Labels["service"])
	}
	if !e.held && slices.Contains(lines, "firing "+e.hold) {
		e.held = true
		return true, fmt.Errorf("paced: %w: %w", notify.ErrNotAttempted,
			&notify.StatusError{StatusCode: 429, RetryAt: e.f.Now().Add(5 * time.Minute)})
	}
	e.got = append(e.got, lines...)
	e.delivered <- strings.Join(lines, ",")
	return false, nil
}

// A trigger still waiting in the queue that Reconfigure retired (held
// back by the receiver's pacing) is not overtaken by the resolve of the
// same alert that the new queue of the receiver gets: the new queue holds
// the resolve back, delivers the unrelated trigger meanwhile, and sends
// the resolve after the retired queue delivered the trigger.
func TestResolveThroughTheNewQueueWaitsForTheTriggerTheRetiringQueueHolds(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	st, err := store.OpenSQLite(ctx, h.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := &eventLog{f: h.clk, hold: "Load@a", delivered: make(chan string, 16)}
	routes := []dispatch.Route{{Receiver: "pd", GroupBy: []string{"service"}}}
	timing := dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute}
	m, err := New(ctx, Options{Rules: testRules, Query: h.db.query, Store: st, Clock: h.clk,
		Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"pd": rec}, Routes: routes,
		Timing: timing, Queue: notify.QueueOptions{InitialBackoff: time.Second, MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	step := func(d time.Duration) {
		t.Helper()
		h.clk.Set(t0.Add(d))
		if err := m.Step(ctx, h.clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	h.db.set("load", "a")
	step(0)
	step(30 * time.Second) // the trigger of Load@a, held back by the receiver for 5 minutes
	for h.clk.Pending() == 0 {
		waitBriefly()
	}
	if err := m.Reconfigure(Routing{Routes: routes, Timing: timing, Receivers: map[string]notify.Notifier{"pd": rec}}); err != nil {
		t.Fatal(err)
	}
	h.db.set("load", "a", "b")
	step(60 * time.Second)
	h.db.set("load", "b")
	step(90 * time.Second) // the resolve of Load@a, then the trigger of Load@b, on the new queue
	if got := <-rec.delivered; got != "firing Load@b" {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		t.Fatalf("first delivery %q (all: %v), want the trigger of Load@b while the resolve of Load@a waits for its trigger", got, rec.got)
	}
	h.clk.Advance(5 * time.Minute)
	if err := m.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []string{"firing Load@b", "firing Load@a", "resolved Load@a"}; !slices.Equal(rec.got, want) {
		t.Fatalf("receiver got %v, want %v", rec.got, want)
	}
}
