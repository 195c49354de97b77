package notify

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/sdk/clock"
)

// oldestAge reads governor_alerts_notification_oldest_seconds of receiver
// from reg; ok is false when the receiver has no such series.
func oldestAge(t *testing.T, reg *prometheus.Registry, receiver string) (seconds float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "governor_alerts_notification_oldest_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "receiver" && l.GetValue() == receiver {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func wantOldest(t *testing.T, reg *prometheus.Registry, receiver string, want time.Duration) {
	t.Helper()
	got, ok := oldestAge(t, reg, receiver)
	if !ok {
		t.Fatalf("no oldest_seconds series for %s, want %s", receiver, want)
	}
	if got != want.Seconds() {
		t.Fatalf("oldest_seconds{receiver=%q} %v, want %v", receiver, got, want.Seconds())
	}
}

// A P0 page that the receiver's own pacing holds back is in no queue
// depth and no failure count; the age of the oldest undelivered message
// shows it: 12 minutes after it was queued the gauge says 12 minutes, and
// 0 once it is delivered.
func TestPageHeldBackByTheReceiverShowsInTheOldestUndeliveredAge(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	p := &paced{f: f, script: map[string][]time.Duration{"g": repeat(4*time.Minute, 3)}, calls: map[string]int{}}
	q := NewQueue("pd", p, QueueOptions{Clock: f, Metrics: met})
	defer q.Close()
	wantOldest(t, reg, "pd", 0)
	q.Enqueue(&Message{GroupKey: "g", Severity: alerts.P0})
	for range 2 {
		waitTimer(t, f)
		f.Advance(4 * time.Minute)
	}
	waitTimer(t, f)
	f.Advance(4*time.Minute - time.Millisecond)
	wantOldest(t, reg, "pd", 12*time.Minute-time.Millisecond)
	if got := queueDepth(t, reg, "pd"); got != 0 {
		t.Fatalf("queue depth %v, want 0: the message being delivered is not queued", got)
	}
	f.Advance(time.Millisecond)
	if err := q.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantOldest(t, reg, "pd", 0)
}

// gated reports each attempt's message on started when it begins, and
// ends it with success when release yields.
type gated struct{ started, release chan string }

func (g *gated) Notify(ctx context.Context, m *Message) (bool, error) {
	select {
	case g.started <- m.ID:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	select {
	case <-g.release:
		return false, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// The age covers the message in the worker's hands and the queued ones,
// from when each was queued.
func TestOldestUndeliveredAgeCoversQueuedAndInFlightMessages(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	reg := prometheus.NewRegistry()
	g := &gated{started: make(chan string), release: make(chan string)}
	q := NewQueue("hook", g, QueueOptions{Clock: f, Metrics: NewMetrics(reg)})
	defer q.Close()
	q.Enqueue(&Message{ID: "a"})
	if id := <-g.started; id != "a" {
		t.Fatalf("first attempt at %s, want a", id)
	}
	f.Advance(2 * time.Minute)
	q.Enqueue(&Message{ID: "b"})
	f.Advance(3 * time.Minute)
	wantOldest(t, reg, "hook", 5*time.Minute) // a, being delivered
	g.release <- "a"
	if id := <-g.started; id != "b" {
		t.Fatalf("second attempt at %s, want b", id)
	}
	wantOldest(t, reg, "hook", 3*time.Minute) // b, a delivered
	g.release <- "b"
	if err := q.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantOldest(t, reg, "hook", 0)
}

// A receiver replaced by a new configuration keeps showing what its
// retiring queue still holds, beside the new queue of the same name; once
// no queue of the receiver runs, its series is gone.
func TestOldestUndeliveredAgeFollowsTheReceiversRunningQueues(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	p := &paced{f: f, script: map[string][]time.Duration{"g": {2 * time.Minute}}, calls: map[string]int{}}
	old := NewQueue("pd", p, QueueOptions{Clock: f, Metrics: met})
	defer old.Close()
	old.Enqueue(&Message{GroupKey: "g", Severity: alerts.P0})
	waitTimer(t, f)
	cur := NewQueue("pd", &scripted{}, QueueOptions{Clock: f, Metrics: met})
	defer cur.Close()
	done := old.Retire()
	f.Advance(time.Minute)
	wantOldest(t, reg, "pd", time.Minute)
	f.Advance(time.Minute)
	<-done
	wantOldest(t, reg, "pd", 0)
	cur.Close()
	if v, ok := oldestAge(t, reg, "pd"); ok {
		t.Fatalf("oldest_seconds{receiver=\"pd\"} %v after its last queue stopped, want no series", v)
	}
}

func queueDepth(t *testing.T, reg *prometheus.Registry, receiver string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
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
	t.Fatalf("no queue depth for %s", receiver)
	return 0
}

// While a receiver's retiring queue and its new one both run, its queue
// depth is the sum of theirs; the series is gone once neither runs.
func TestQueueDepthSumsTheReceiversRunningQueues(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	g1 := &gated{started: make(chan string), release: make(chan string)}
	old := NewQueue("hook", g1, QueueOptions{Clock: f, Metrics: met})
	defer old.Close()
	old.Enqueue(&Message{ID: "a1", GroupKey: "a1"})
	<-g1.started
	old.Enqueue(&Message{ID: "a2", GroupKey: "a2"})
	old.Enqueue(&Message{ID: "a3", GroupKey: "a3"})
	done := old.Retire()
	g2 := &gated{started: make(chan string), release: make(chan string)}
	cur := NewQueue("hook", g2, QueueOptions{Clock: f, Metrics: met})
	defer cur.Close()
	cur.Enqueue(&Message{ID: "b1", GroupKey: "b1"})
	<-g2.started
	cur.Enqueue(&Message{ID: "b2", GroupKey: "b2"})
	if got := queueDepth(t, reg, "hook"); got != 3 {
		t.Fatalf("queue depth %v with 2 queued on the retiring queue and 1 on the new one, want 3", got)
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		g1.release <- id
		if id != "a3" {
			<-g1.started
		}
	}
	<-done
	if got := queueDepth(t, reg, "hook"); got != 1 {
		t.Fatalf("queue depth %v after the retiring queue stopped, want the new queue's 1", got)
	}
	cur.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "governor_alerts_notification_queue_depth" && len(mf.GetMetric()) > 0 {
			t.Fatalf("queue depth series %v after every queue of the receiver stopped, want none", mf.GetMetric())
		}
	}
}
