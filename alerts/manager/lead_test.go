package manager

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

// replicaReceiver is one replica's receiver: it records "status
// alertname@service" per delivered message, in order; while held, an
// attempt waits until released or cancelled (and records nothing).
type replicaReceiver struct {
	mu   sync.Mutex
	got  []string
	hold chan struct{}
	in   chan string // each attempt as it starts
}

func (r *replicaReceiver) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	var lines []string
	for _, a := range m.Alerts {
		lines = append(lines, a.Status+" "+a.Labels["alertname"]+"@"+a.Labels["service"])
	}
	line := strings.Join(lines, ",")
	if m.Kind == notify.KindAcknowledge {
		line = "ack " + strings.TrimPrefix(line, notify.StatusFiring+" ")
	}
	r.in <- line
	r.mu.Lock()
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
	r.mu.Lock()
	r.got = append(r.got, line)
	r.mu.Unlock()
	return false, nil
}

func (r *replicaReceiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// held makes the receiver hold its attempts until the returned function
// is called.
func (r *replicaReceiver) held() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.hold = ch
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			r.hold = nil
			r.mu.Unlock()
			close(ch)
		})
	}
}

// replica starts a manager on the harness's database (its own store
// connection), as one engine replica does, grouping by service.
func replica(t *testing.T, h *harness, standby bool) (*Manager, *replicaReceiver, store.Store) {
	t.Helper()
	return wrappedReplica(t, h, standby, func(st store.Store) store.Store { return st })
}

// wrappedReplica is replica with the manager's store wrapped; it returns
// the store unwrapped.
func wrappedReplica(t *testing.T, h *harness, standby bool, wrap func(store.Store) store.Store) (*Manager, *replicaReceiver, store.Store) {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), h.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &replicaReceiver{in: make(chan string, 64)}
	m, err := New(context.Background(), Options{Rules: testRules, Query: h.db.query, Store: wrap(st), Clock: h.clk,
		Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"pd": rec},
		Routes: []dispatch.Route{{Receiver: "pd", GroupBy: []string{"service"}}},
		Timing: dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute},
		Queue:  notify.QueueOptions{InitialBackoff: time.Second, MaxAttempts: 3}, Standby: standby})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		_ = st.Close()
	})
	return m, rec, st
}

func stepAt(t *testing.T, h *harness, m *Manager, d time.Duration) {
	t.Helper()
	h.clk.Set(t0.Add(d))
	if err := m.Step(context.Background(), h.clk.Now()); err != nil {
		t.Fatalf("step at %s: %v", d, err)
	}
}

func undeliveredLines(t *testing.T, st store.Store) []string {
	t.Helper()
	ps, err := st.Undelivered(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		var lines []string
		for _, a := range p.Message.Alerts {
			lines = append(lines, a.Status+" "+a.Labels["alertname"]+"@"+a.Labels["service"])
		}
		out = append(out, strings.Join(lines, ","))
	}
	return out
}

// A standby started beside the leader sends nothing, and refuses to step;
// when the leader dies it takes the lead and sends, once and in the order
// they were logged (a resolve after its trigger), the notifications the
// leader logged and did not deliver, those logged after the standby started
// included; it sends nothing the leader sent again (it takes over what each
// group notified), and the resolves the leader owed are sent.
func TestStandbyTakesOverWhatTheLeaderLeftUndelivered(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	b, rb, _ := replica(t, h, true)
	a, ra, st := replica(t, h, false)
	release := ra.held()
	defer release()
	h.db.set("load", "x", "y")
	stepAt(t, h, a, 0)
	stepAt(t, h, a, 30*time.Second) // Load@x and Load@y notified: the first in flight, held
	<-ra.in
	h.db.set("load", "y")
	stepAt(t, h, a, 60*time.Second)
	stepAt(t, h, a, 90*time.Second) // the resolve of Load@x, queued behind its trigger
	logged := undeliveredLines(t, st)
	if len(logged) != 3 {
		t.Fatalf("undelivered %v, want the two triggers and a resolve", logged)
	}

	if err := b.Step(ctx, h.clk.Now()); !errors.Is(err, ErrStandby) {
		t.Fatalf("a standby's step: %v, want ErrStandby", err)
	}
	if err := b.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rb.received(); len(got) != 0 || b.Leading() {
		t.Fatalf("a standby sent %v (leading %v)", got, b.Leading())
	}

	_ = a.Close() // the leader dies with its queue
	if err := b.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	got := rb.received()
	if !slices.Equal(got, logged) {
		t.Fatalf("the new leader sent %v, want what the log held, in its order: %v", got, logged)
	}
	if i, j := slices.Index(got, "firing Load@x"), slices.Index(got, "resolved Load@x"); i < 0 || j < i {
		t.Fatalf("the resolve of Load@x overtook its trigger: %v", got)
	}
	for d := 2 * time.Minute; d <= 30*time.Minute; d += 30 * time.Second {
		stepAt(t, h, b, d)
	}
	if err := b.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rb.received()[3:]; len(got) != 0 {
		t.Fatalf("the new leader sent again what the leader before it sent: %v", got)
	}
	h.db.set("load")
	for d := 30*time.Minute + 30*time.Second; d <= 32*time.Minute; d += 30 * time.Second {
		stepAt(t, h, b, d)
	}
	if err := b.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rb.received()[3:]; !slices.Equal(got, []string{"resolved Load@y"}) {
		t.Fatalf("after the takeover the new leader sent %v, want the resolve of Load@y alone", got)
	}
	if pending := undeliveredLines(t, st); len(pending) != 0 {
		t.Fatalf("still undelivered: %v", pending)
	}
}

// A leader that loses the lead stops sending at once: the delivery in
// flight is cancelled and what it queued stays undelivered in the log, for
// the next leader; it refuses to step until it leads again, and then sends
// them, in order.
func TestStandbyLeavesQueuedNotificationsInTheLog(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, ra, st := replica(t, h, false)
	release := ra.held()
	defer release()
	h.db.set("load", "x", "y")
	stepAt(t, h, a, 0)
	stepAt(t, h, a, 30*time.Second)
	first := <-ra.in
	a.Standby()
	release()
	if err := a.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ra.received(); len(got) != 0 {
		t.Fatalf("sent %v after standing by", got)
	}
	logged := undeliveredLines(t, st)
	if len(logged) != 2 || logged[0] != first {
		t.Fatalf("undelivered %v, want both notifications, %q first", logged, first)
	}
	h.clk.Set(t0.Add(time.Minute))
	if err := a.Step(ctx, h.clk.Now()); !errors.Is(err, ErrStandby) {
		t.Fatalf("step after Standby: %v, want ErrStandby", err)
	}
	if err := a.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ra.received(); !slices.Equal(got, logged) {
		t.Fatalf("leading again sent %v, want %v", got, logged)
	}
}

// A standby that takes the lead mutes what the leader silenced after the
// standby started, and no longer mutes what the leader expired meanwhile
// (a pending silence expired before it started included).
func TestLeadTakesOverSilences(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, _, _ := replica(t, h, false)
	ms, err := alerts.ParseMatchers(`service="y"`)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := a.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0.Add(time.Minute), EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "maintenance"})
	if err != nil {
		t.Fatal(err)
	}
	b, rb, _ := replica(t, h, true)
	mx, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddSilence(ctx, silence.Silence{Matchers: mx, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy"}); err != nil {
		t.Fatal(err)
	}
	if err := a.ExpireSilence(ctx, pending.ID, t0); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	if err := b.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	h.db.set("load", "x")
	for d := time.Duration(0); d <= 4*time.Minute; d += 30 * time.Second {
		if d == 2*time.Minute { // once the expired silence would have started
			h.db.set("load", "x", "y")
		}
		stepAt(t, h, b, d)
	}
	if err := b.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rb.received(); !slices.Equal(got, []string{"firing Load@y"}) {
		t.Fatalf("the new leader sent %v, want Load@y alone (x silenced, y's silence expired)", got)
	}
}
