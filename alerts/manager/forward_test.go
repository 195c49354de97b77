package manager

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"governor.dev/governor/alerts"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/engine/events"
	"governor.dev/governor/sdk/clock"
)

// eventReplica starts a manager with the built-in event rules, and
// GovernorLeaderLost as a configuration may declare it, on the SQLite file
// path, as one engine replica does.
func eventReplica(t *testing.T, path string, clk *clock.Fake, standby bool) *Manager {
	t.Helper()
	m, _ := eventReplicaSignalling(t, path, clk, standby)
	return m
}

// eventReplicaSignalling is eventReplica with a channel that signals each
// store attempt of the forward writer (signalPuts).
func eventReplicaSignalling(t *testing.T, path string, clk *clock.Fake, standby bool) (*Manager, <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	sqlite, err := store.OpenSQLite(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := signalPuts{Store: sqlite, put: make(chan struct{}, 1)}
	var eventRules []rule.Rule
	for _, r := range rule.Builtin() {
		if r.Event != "" {
			eventRules = append(eventRules, r)
		}
	}
	eventRules = append(eventRules, leaderLostRule)
	m, err := New(ctx, Options{Rules: eventRules, Store: st, Clock: clk, Registerer: prometheus.NewRegistry(),
		Receivers: map[string]notify.Notifier{"discard": discardNotifier{}}, Standby: standby})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		_ = st.Close()
	})
	return m, st.put
}

// signalPuts signals on put, without blocking, each PutEvents that
// returned, whatever its outcome.
type signalPuts struct {
	store.Store
	put chan struct{} // capacity 1
}

func (s signalPuts) PutEvents(ctx context.Context, evs []rule.Event) error {
	err := s.Store.PutEvents(ctx, evs)
	select {
	case s.put <- struct{}{}:
	default:
	}
	return err
}

// waitForwarded waits until m holds no event for the leader, looking again
// after each store attempt that put (signalPuts) signals, or until ctx
// ends.
func waitForwarded(ctx context.Context, m *Manager, put <-chan struct{}) error {
	for {
		// Under fwdMu no store attempt is halfway: the events it stored
		// are no longer held.
		m.fwdMu.Lock()
		n := m.heldForward()
		m.fwdMu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-put:
		case <-ctx.Done():
			return fmt.Errorf("%d events still held: %w", n, ctx.Err())
		}
	}
}

func firingNames(m *Manager, now time.Time) map[string]bool {
	out := map[string]bool{}
	for _, s := range m.Alerts(now) {
		if s.EndsAt.IsZero() {
			out[s.Labels["alertname"]+"@"+s.Labels["service"]] = true
		}
	}
	return out
}

// TestStandbyEventReachesLeader: an engine event observed on a standby is
// stored by its step and evaluated by the leader at its next step.
func TestStandbyEventReachesLeader(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	clk := clock.NewFake(t0)
	leader := eventReplica(t, path, clk, false)
	standby := eventReplica(t, path, clk, true)

	EngineSink{M: standby}.Emit(ctx, events.Event{Kind: events.LeaderLost, Service: "engine", At: clk.Now(), Severity: events.Critical})
	clk.Advance(15 * time.Second)
	_ = standby.Step(ctx, clk.Now()) // standby: forwards what it observed
	if err := leader.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if !firingNames(leader, clk.Now())["GovernorLeaderLost@engine"] {
		t.Fatalf("leader does not fire the standby's leader_lost: %v", firingNames(leader, clk.Now()))
	}
}

// TestEventsQueuedAtLostLeadGoToNextLeader: events a leader observed and
// had not evaluated when its lead ended go to the next leader, and do not
// fire, stale, when the old leader leads again.
func TestEventsQueuedAtLostLeadGoToNextLeader(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	clk := clock.NewFake(t0)
	a := eventReplica(t, path, clk, false)
	b := eventReplica(t, path, clk, true)

	// a observes an event, then loses the lead before its next step.
	EngineSink{M: a}.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", At: clk.Now(), Severity: events.Warning})
	a.Standby()
	clk.Advance(15 * time.Second)
	_ = a.Step(ctx, clk.Now())
	if err := b.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if !firingNames(b, clk.Now())["GovernorAutoRollback@checkout"] {
		t.Fatalf("new leader does not fire the event the old one queued: %v", firingNames(b, clk.Now()))
	}
	// The alert resolves on b; a, leading again later, must not raise it
	// once more from what it had queued.
	clk.Advance(2 * time.Hour)
	if err := b.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	b.Standby()
	if err := a.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	if err := a.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if firingNames(a, clk.Now())["GovernorAutoRollback@checkout"] {
		t.Fatal("the old leader fires, stale, the event it had queued before losing the lead")
	}
}

// TestLeadForgetsAlertsTheLastLeaderResolvedAndDropped: a replica taking
// the lead again replaces its alert states with the store's; it used to
// keep one the last leader had resolved and dropped, and resolve it again.
func TestLeadForgetsAlertsTheLastLeaderResolvedAndDropped(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	clk := clock.NewFake(t0)
	a := eventReplica(t, path, clk, false)
	b := eventReplica(t, path, clk, true)
	EngineSink{M: a}.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", At: clk.Now(), Severity: events.Warning})
	if err := a.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	a.Standby()
	if err := b.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{2 * time.Hour, 20 * time.Minute} {
		clk.Advance(d)
		if err := b.Step(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Alerts(clk.Now()); len(got) != 0 {
		t.Fatalf("b still shows %+v", got)
	}
	b.Standby()
	if err := a.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	if err := a.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if got := a.Alerts(clk.Now()); len(got) != 0 {
		t.Fatalf("a, leading again, shows the alert the last leader resolved and dropped: %+v", got)
	}
}

// TestForwardedEventOlderThanMaxAgeIsDropped: a forwarded event older than
// EventMaxAge when the leader takes it is dropped and counted.
func TestForwardedEventOlderThanMaxAgeIsDropped(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	clk := clock.NewFake(t0)
	leader := eventReplica(t, path, clk, false)
	standby := eventReplica(t, path, clk, true)
	EngineSink{M: standby}.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", At: clk.Now(), Severity: events.Warning})
	_ = standby.Step(ctx, clk.Now())
	clk.Advance(DefaultEventMaxAge + time.Second)
	if err := leader.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if got := firingNames(leader, clk.Now()); len(got) != 0 {
		t.Fatalf("a stale forwarded event fires: %v", got)
	}
	if got := testutil.ToFloat64(leader.m.eventsDrop.WithLabelValues("stale")); got != 1 {
		t.Fatalf("stale drops counted %v, want 1", got)
	}
}

func TestNegativeEventMaxAgeIsRefused(t *testing.T) {
	st, err := store.OpenSQLite(context.Background(), ":memory:", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = New(context.Background(), Options{Store: st, Receivers: map[string]notify.Notifier{"d": discardNotifier{}}, EventMaxAge: -time.Second})
	if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "EventMaxAge") {
		t.Fatalf("got %v, want ErrInvalid naming EventMaxAge", err)
	}
}

// TestStandbyStoresObservedEventWithoutWaitingForItsStep: an event
// observed on a standby reaches the store at once, so the leader's next
// step evaluates it even though the standby has not stepped.
func TestStandbyStoresObservedEventWithoutWaitingForItsStep(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	clk := clock.NewFake(t0)
	leader := eventReplica(t, path, clk, false)
	standby, put := eventReplicaSignalling(t, path, clk, true)

	EngineSink{M: standby}.Emit(ctx, events.Event{Kind: events.LeaderLost, Service: "engine", At: clk.Now(), Severity: events.Critical})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := waitForwarded(wctx, standby, put); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	if err := leader.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if !firingNames(leader, clk.Now())["GovernorLeaderLost@engine"] {
		t.Fatalf("leader does not fire the standby's leader_lost: %v", firingNames(leader, clk.Now()))
	}
}

// TestCloseStoresEventsHeldOnStandby: events a standby observed just
// before shutting down are in the store for the leader after Close.
func TestCloseStoresEventsHeldOnStandby(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	clk := clock.NewFake(t0)
	leader := eventReplica(t, path, clk, false)
	standby := eventReplica(t, path, clk, true)

	EngineSink{M: standby}.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", At: clk.Now(), Severity: events.Warning})
	if err := standby.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	if err := leader.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if !firingNames(leader, clk.Now())["GovernorAutoRollback@checkout"] {
		t.Fatalf("leader does not fire the event the closed standby observed: %v", firingNames(leader, clk.Now()))
	}
}

// TestStandbyStoresUnevaluatedEventsAtOnce: events a leader had not
// evaluated when its lead ended are in the store when Standby returns,
// without waiting for the old leader's next step.
func TestStandbyStoresUnevaluatedEventsAtOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	clk := clock.NewFake(t0)
	a := eventReplica(t, path, clk, false)
	b := eventReplica(t, path, clk, true)

	EngineSink{M: a}.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", At: clk.Now(), Severity: events.Warning})
	a.Standby()
	if err := b.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	if err := b.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if !firingNames(b, clk.Now())["GovernorAutoRollback@checkout"] {
		t.Fatalf("new leader does not fire the event the old one held: %v", firingNames(b, clk.Now()))
	}
}

// stallingStore holds every PutEvents until release is closed.
type stallingStore struct {
	store.Store
	release chan struct{}
}

func (s stallingStore) PutEvents(ctx context.Context, evs []rule.Event) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.PutEvents(ctx, evs)
}

// TestObserveOnStandbyNeverBlocksOnAStalledStore: with the store stalled,
// Observe on a standby returns at once, holds at most maxForward events
// and counts what it drops; the held events are stored once the store
// answers again.
func TestObserveOnStandbyNeverBlocksOnAStalledStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "alerts.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewFake(t0)
	stalled := stallingStore{Store: st, release: make(chan struct{})}
	signalling := signalPuts{Store: stalled, put: make(chan struct{}, 1)}
	m, err := New(ctx, Options{Store: signalling, Clock: clk, Registerer: prometheus.NewRegistry(),
		Receivers: map[string]notify.Notifier{"discard": discardNotifier{}}, Standby: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const extra = 10
	for i := range maxForward + extra {
		ev := rule.Event{Kind: string(events.AutoRollback), Service: fmt.Sprintf("svc-%d", i), At: clk.Now()}
		if err := m.Observe(ev); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.m.eventsDrop.WithLabelValues("full")); got != extra {
		t.Fatalf("full drops counted %v, want %d", got, extra)
	}
	close(stalled.release)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := waitForwarded(wctx, m, signalling.put); err != nil {
		t.Fatalf("after the store answered: %v", err)
	}
}

// TestLeaderCloseHandsUnevaluatedEventsToNextLeader: events a leader
// observed after its last step are stored by its Close, without Standby,
// for the next leader to evaluate.
func TestLeaderCloseHandsUnevaluatedEventsToNextLeader(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "alerts.db")
	clk := clock.NewFake(t0)
	a := eventReplica(t, path, clk, false)
	b := eventReplica(t, path, clk, true)

	EngineSink{M: a}.Emit(ctx, events.Event{Kind: events.AutoRollback, Service: "checkout", At: clk.Now(), Severity: events.Warning})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	if err := b.Step(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if !firingNames(b, clk.Now())["GovernorAutoRollback@checkout"] {
		t.Fatalf("new leader does not fire the event the closed leader had not evaluated: %v", firingNames(b, clk.Now()))
	}
}
