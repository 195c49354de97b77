package manager

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

func loadFP(svc string) alerts.Fingerprint {
	return alerts.Labels{"alertname": "Load", "service": svc, "severity": "P1"}.Fingerprint()
}

func idle(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A silence added through a standby mutes the leader's alerts from the
// leader's next step, without a takeover.
func TestStandbySilenceMutesTheLeaderAtItsNextStep(t *testing.T) {
	h := newHarness(t)
	h.close()
	a, ra, _ := replica(t, h, false)
	b, _, _ := replica(t, h, true)
	deploySilence(t, b)
	h.db.set("load", "x", "y")
	for d := time.Duration(0); d <= 2*time.Minute; d += 30 * time.Second {
		stepAt(t, h, a, d)
	}
	idle(t, a)
	if got := ra.received(); !slices.Equal(got, []string{"firing Load@y"}) {
		t.Fatalf("the leader sent %v, want Load@y alone (Load@x silenced through the standby)", got)
	}
	if got := a.Alerts(h.clk.Now()); len(got) != 2 || len(got[0].SilencedBy)+len(got[1].SilencedBy) != 1 {
		t.Fatalf("the leader's alerts %+v, want one of two silenced", got)
	}
}

// An alert acknowledged through a standby (which never stepped since the
// alert fired) is acknowledged on the leader at its next step: the
// receivers are told once, and it is not repeated.
func TestStandbyAcknowledgementReachesTheLeaderAtItsNextStep(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, ra, _ := replica(t, h, false)
	b, rb, _ := replica(t, h, true)
	h.db.set("load", "x")
	stepAt(t, h, a, 0)
	stepAt(t, h, a, 30*time.Second)
	idle(t, a)
	if _, err := b.Acknowledge(ctx, loadFP("x"), "ops", "on it", h.clk.Now()); err != nil {
		t.Fatalf("acknowledge through the standby: %v", err)
	}
	stepAt(t, h, a, time.Minute)
	stepAt(t, h, a, 61*time.Minute) // past the P1 repeat
	stepAt(t, h, a, 122*time.Minute)
	idle(t, a)
	if got := ra.received(); !slices.Equal(got, []string{"firing Load@x", "ack Load@x"}) {
		t.Fatalf("the leader sent %v, want the trigger, then the acknowledgement once, no repeat", got)
	}
	idle(t, b)
	if got := rb.received(); len(got) != 0 {
		t.Fatalf("the standby sent %v", got)
	}
}

// An acknowledgement stored through a standby while no replica steps is
// announced by whichever replica leads next, once.
func TestStandbyAcknowledgementSurvivesALeaderChange(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, ra, _ := replica(t, h, false)
	b, rb, _ := replica(t, h, true)
	h.db.set("load", "x")
	stepAt(t, h, a, 0)
	stepAt(t, h, a, 30*time.Second)
	idle(t, a)
	if _, err := b.Acknowledge(ctx, loadFP("x"), "ops", "on it", h.clk.Now()); err != nil {
		t.Fatalf("acknowledge through the standby: %v", err)
	}
	_ = a.Close() // the leader dies before its next step
	if err := b.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	stepAt(t, h, b, time.Minute)
	stepAt(t, h, b, 90*time.Second)
	stepAt(t, h, b, 61*time.Minute)
	idle(t, b)
	if got := ra.received(); !slices.Equal(got, []string{"firing Load@x"}) {
		t.Fatalf("the old leader sent %v", got)
	}
	if got := rb.received(); !slices.Equal(got, []string{"ack Load@x"}) {
		t.Fatalf("the new leader sent %v, want the acknowledgement once, no repeat", got)
	}
}

// A silence the leader added can be expired through a standby, and the
// leader notifies the alert at its next step.
func TestStandbyExpiresALeaderSilence(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, ra, _ := replica(t, h, false)
	b, _, _ := replica(t, h, true)
	sil := deploySilence(t, a)
	h.db.set("load", "x")
	stepAt(t, h, a, 0)
	stepAt(t, h, a, 30*time.Second)
	h.clk.Set(t0.Add(40 * time.Second))
	if err := b.ExpireSilence(ctx, sil.ID, h.clk.Now()); err != nil {
		t.Fatalf("expire through the standby: %v", err)
	}
	stepAt(t, h, a, time.Minute)
	stepAt(t, h, a, 90*time.Second)
	idle(t, a)
	if got := ra.received(); !slices.Equal(got, []string{"firing Load@x"}) {
		t.Fatalf("the leader sent %v, want Load@x once its silence expired through the standby", got)
	}
}

// A standby's Step sends nothing but brings what the web UI shows up to
// date: the alerts the leader evaluated, its silences and acknowledgements.
func TestStandbyStepShowsTheLeadersAlertsAndSilences(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, _, _ := replica(t, h, false)
	b, rb, _ := replica(t, h, true)
	h.db.set("load", "x")
	stepAt(t, h, a, 0)
	sil := deploySilence(t, a)
	if err := b.Step(ctx, h.clk.Now()); !errors.Is(err, ErrStandby) {
		t.Fatalf("a standby's step: %v, want ErrStandby", err)
	}
	got := b.Alerts(h.clk.Now())
	if len(got) != 1 || got[0].Labels["service"] != "x" || !slices.Equal(got[0].SilencedBy, []string{sil.ID}) {
		t.Fatalf("the standby shows %+v, want Load@x silenced by %s", got, sil.ID)
	}
	if l := b.Silences(); len(l) != 1 || l[0].ID != sil.ID {
		t.Fatalf("the standby lists %v", l)
	}
	idle(t, b)
	if len(rb.received()) != 0 {
		t.Fatal("the standby sent")
	}
}

// failingAcks is a store whose Acks fails while fail is set.
type failingAcks struct {
	store.Store
	fail atomic.Bool
}

func (f *failingAcks) Acks(ctx context.Context) ([]alerts.Ack, error) {
	if f.fail.Load() {
		return nil, fmt.Errorf("%w: acks: connection refused", alerts.ErrStore)
	}
	return f.Store.Acks(ctx)
}

// A step whose read of the store fails goes on with the silences and
// acknowledgements of the last read, whole: a silenced alert stays quiet
// while the database is unreachable.
func TestStepKeepsSilencesWhenTheStoreCannotBeRead(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	sq, err := store.OpenSQLite(ctx, h.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &failingAcks{Store: sq}
	rec := &replicaReceiver{in: make(chan string, 64)}
	m, err := New(ctx, Options{Rules: testRules, Query: h.db.query, Store: st, Clock: h.clk,
		Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"pd": rec},
		Routes: []dispatch.Route{{Receiver: "pd", GroupBy: []string{"service"}}},
		Timing: dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		_ = sq.Close()
	})
	deploySilence(t, m)
	st.fail.Store(true)
	h.db.set("load", "x")
	for d := time.Duration(0); d <= 2*time.Minute; d += 30 * time.Second {
		h.clk.Set(t0.Add(d))
		if err := m.Step(ctx, h.clk.Now()); !errors.Is(err, alerts.ErrStore) {
			t.Fatalf("step at %s: %v, want the store's error", d, err)
		}
	}
	idle(t, m)
	if got := rec.received(); len(got) != 0 {
		t.Fatalf("sent %v while the silence could not be read again", got)
	}
	if l := m.Silences(); len(l) != 1 {
		t.Fatalf("silences %v, want the one added", l)
	}
}

// A new leader does not tell the receivers again of an acknowledgement the
// last leader delivered.
func TestLeadDoesNotRepeatDeliveredAcknowledgements(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, ra, _ := replica(t, h, false)
	b, rb, _ := replica(t, h, true)
	h.db.set("load", "x")
	stepAt(t, h, a, 0)
	stepAt(t, h, a, 30*time.Second)
	idle(t, a)
	if _, err := a.Acknowledge(ctx, loadFP("x"), "ops", "on it", h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	stepAt(t, h, a, time.Minute)
	idle(t, a)
	if got := ra.received(); !slices.Equal(got, []string{"firing Load@x", "ack Load@x"}) {
		t.Fatalf("the leader sent %v", got)
	}
	_ = a.Close()
	if err := b.Lead(ctx); err != nil {
		t.Fatal(err)
	}
	stepAt(t, h, b, 90*time.Second)
	stepAt(t, h, b, 61*time.Minute)
	idle(t, b)
	if got := rb.received(); len(got) != 0 {
		t.Fatalf("the new leader sent %v, want nothing: the acknowledgement was delivered", got)
	}
}

// expiredAfterStandbyRead makes a leader a and a standby b on one store,
// a silence added through a and read by b (returned as b read it), then
// expired through a one minute later, which b has not read.
func expiredAfterStandbyRead(t *testing.T) (*harness, *Manager, *Manager, silence.Silence) {
	t.Helper()
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, _, _ := replica(t, h, false)
	b, _, _ := replica(t, h, true)
	sil := deploySilence(t, a)
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	read, err := b.sils().Get(sil.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.clk.Set(t0.Add(time.Minute))
	if err := a.ExpireSilence(ctx, sil.ID, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	return h, a, b, read
}

// TestSilenceEditOverAnotherReplicasChangeIsRefused: an in-place edit
// based on a silence another replica expired since this one read it is
// refused with a conflict naming the silence, and the expiry stands; it
// used to bring the expired silence back silently.
func TestSilenceEditOverAnotherReplicasChangeIsRefused(t *testing.T) {
	ctx := context.Background()
	h, a, b, sil := expiredAfterStandbyRead(t)
	var err error
	// b edits the silence as it read it, before a's expiry.
	edit := sil
	edit.EndsAt, edit.Comment = t0.Add(2*time.Hour), "deploy, longer"
	_, err = b.AddSilence(ctx, edit)
	if !errors.Is(err, alerts.ErrConflict) || !strings.Contains(err.Error(), sil.ID) {
		t.Fatalf("stale edit: got %v, want a conflict naming %s", err, sil.ID)
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := a.sils().Get(sil.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State(h.clk.Now()) != silence.StateExpired || got.Comment != "deploy" {
		t.Fatalf("after the refused edit the store holds %+v, want the expired silence", got)
	}
}

// TestEditSilenceIsJudgedAgainstTheVersionTheCallerRead: an edit based on
// a version read before another replica's expiry is refused even when a
// step of this replica read that expiry in between (AddSilence would take
// the version this replica read last as the base, and pass).
func TestEditSilenceIsJudgedAgainstTheVersionTheCallerRead(t *testing.T) {
	ctx := context.Background()
	_, _, b, read := expiredAfterStandbyRead(t) // read: what the caller on b read
	sil := read
	if err := b.Sync(ctx); err != nil { // b's step reads the expiry
		t.Fatal(err)
	}
	edit := read
	edit.EndsAt, edit.Comment = t0.Add(2*time.Hour), "deploy, longer"
	if _, err := b.EditSilence(ctx, read, edit); !errors.Is(err, alerts.ErrConflict) || !strings.Contains(err.Error(), sil.ID) {
		t.Fatalf("edit over an expiry b has since read: got %v, want a conflict naming %s", err, sil.ID)
	}
	if _, err := b.EditSilence(ctx, read, silence.Silence{ID: "other"}); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("an edit changing the id: got %v, want ErrInvalid", err)
	}
}

// unreadableSilences is a store whose silences cannot be read.
type unreadableSilences struct{ store.Store }

func (unreadableSilences) Silences(context.Context) ([]silence.Silence, error) {
	return nil, errors.New("connection refused")
}

// TestFollowReportsOnlyWhatFailed: a standby's Follow syncs like its Step
// (a silence another replica made is listed) and answers nil, not
// ErrStandby; a store that fails is reported, still without ErrStandby;
// on a manager that leads, Follow steps.
func TestFollowReportsOnlyWhatFailed(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, _, _ := replica(t, h, false)
	b, _, _ := replica(t, h, true)
	sil := deploySilence(t, a)
	if err := b.Follow(ctx, h.clk.Now()); err != nil {
		t.Fatalf("standby Follow = %v, want nil", err)
	}
	if got := b.Silences(); len(got) != 1 {
		t.Fatalf("standby lists %d silences after Follow, want the leader's 1", len(got))
	}
	if err := a.Follow(ctx, h.clk.Now()); err != nil {
		t.Fatalf("leader Follow = %v, want a step without error", err)
	}

	// Another silence, which b reads at its next Follow, and cannot.
	if _, err := a.AddSilence(ctx, silence.Silence{Matchers: sil.Matchers, StartsAt: t0, EndsAt: t0.Add(2 * time.Hour),
		CreatedBy: "ops", Comment: "longer"}); err != nil {
		t.Fatal(err)
	}
	b.o.Store = unreadableSilences{b.o.Store}
	err := b.Follow(ctx, h.clk.Now())
	if err == nil || errors.Is(err, ErrStandby) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Follow over a failing store = %v, want its error without ErrStandby", err)
	}
}

// countingReads counts the reads of the shared tables; SharedVersions
// fails while failVersions is set.
type countingReads struct {
	store.Store
	silences, acks, states atomic.Int64
	failVersions           atomic.Bool
}

func (c *countingReads) Silences(ctx context.Context) ([]silence.Silence, error) {
	c.silences.Add(1)
	return c.Store.Silences(ctx)
}

func (c *countingReads) Acks(ctx context.Context) ([]alerts.Ack, error) {
	c.acks.Add(1)
	return c.Store.Acks(ctx)
}

func (c *countingReads) LoadStates(ctx context.Context) ([]rule.Active, error) {
	c.states.Add(1)
	return c.Store.LoadStates(ctx)
}

func (c *countingReads) SharedVersions(ctx context.Context) (store.SharedVersions, error) {
	if c.failVersions.Load() {
		return store.SharedVersions{}, errors.New("connection refused")
	}
	return c.Store.SharedVersions(ctx)
}

func (c *countingReads) reads() [3]int64 {
	return [3]int64{c.silences.Load(), c.acks.Load(), c.states.Load()}
}

// countingReplica starts a manager on the harness's database whose store
// counts its reads of the shared tables.
func countingReplica(t *testing.T, h *harness, standby bool) (*Manager, *countingReads) {
	t.Helper()
	sq, err := store.OpenSQLite(context.Background(), h.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &countingReads{Store: sq}
	m, err := New(context.Background(), Options{Rules: testRules, Query: h.db.query, Store: st, Clock: h.clk,
		Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"pd": &replicaReceiver{in: make(chan string, 64)}},
		Routes: []dispatch.Route{{Receiver: "pd", GroupBy: []string{"service"}}},
		Timing: dispatch.Timing{GroupWait: 30 * time.Second, GroupInterval: time.Minute}, Standby: standby})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		_ = sq.Close()
	})
	return m, st
}

func testSilence(t *testing.T, comment string) silence.Silence {
	t.Helper()
	ms, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	return silence.Silence{ID: comment, Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: comment, CreatedAt: t0}
}

// TestStepsReadTheSharedTablesOnlyWhenTheyChanged: five steps of a leader
// with nothing changed read the silences and acknowledgements once; a
// silence stored through another replica's store is read at the next step.
func TestStepsReadTheSharedTablesOnlyWhenTheyChanged(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	m, st := countingReplica(t, h, false)
	start := st.reads()
	for i := range 5 {
		stepAt(t, h, m, time.Duration(i)*30*time.Second)
	}
	if got := st.reads(); got[0]-start[0] != 1 || got[1]-start[1] != 1 {
		t.Fatalf("5 steps with nothing changed read the silences %d times and the acks %d times, want once each",
			got[0]-start[0], got[1]-start[1])
	}
	_, _, other := replica(t, h, true)
	if err := other.PutSilence(ctx, testSilence(t, "made-elsewhere")); err != nil {
		t.Fatal(err)
	}
	before := st.reads()
	stepAt(t, h, m, 3*time.Minute)
	if got := st.reads(); got[0]-before[0] != 1 || got[1] != before[1] {
		t.Fatalf("the step after another replica's silence read the silences %d times and the acks %d times, want 1 and 0",
			got[0]-before[0], got[1]-before[1])
	}
	if l := m.Silences(); len(l) != 1 || l[0].ID != "made-elsewhere" {
		t.Fatalf("the leader lists %v, want the silence made through the other replica", l)
	}
}

// TestStandbyReadsTheStatesOnlyWhenTheLeaderSavedThem: a standby's steps
// read the alert states again only after the leader stored new ones.
func TestStandbyReadsTheStatesOnlyWhenTheLeaderSavedThem(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, _, _ := replica(t, h, false)
	b, st := countingReplica(t, h, true)
	h.db.set("load", "x")
	stepAt(t, h, a, 0)
	start := st.reads()
	for range 5 {
		if err := b.Follow(ctx, h.clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.reads(); got != [3]int64{start[0] + 1, start[1] + 1, start[2] + 1} {
		t.Fatalf("5 standby steps read %v (silences, acks, states) after %v, want each once", got, start)
	}
	if got := b.Alerts(h.clk.Now()); len(got) != 1 {
		t.Fatalf("the standby shows %+v, want the leader's Load@x", got)
	}
	h.db.set("load", "x", "y")
	stepAt(t, h, a, 30*time.Second)
	if err := b.Follow(ctx, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if got := b.Alerts(h.clk.Now()); len(got) != 2 {
		t.Fatalf("the standby shows %+v after the leader saved new states, want Load@x and Load@y", got)
	}
}

// TestSyncReadsEverythingAtLeastEvery20Syncs: a write that moves no
// counter (an older version's, during a rolling upgrade) is read within
// 20 syncs.
func TestSyncReadsEverythingAtLeastEvery20Syncs(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	m, st := countingReplica(t, h, false)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `INSERT INTO alert_silences (id, starts_at, ends_at, created_by, comment, body)
		VALUES ('old', 0, 9000000000000000000, 'ops', 'c', '{"id":"old","matchers":"service=\"x\"","starts_at":"2026-01-01T00:00:00Z","ends_at":"2036-01-01T00:00:00Z","created_by":"ops","comment":"c"}')`); err != nil {
		t.Fatal(err)
	}
	start := st.reads()
	for i := 1; i <= 20; i++ {
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if len(m.Silences()) == 1 {
			if n := st.reads()[0] - start[0]; n != 1 {
				t.Fatalf("the silences were read %d times in %d syncs, want once", n, i)
			}
			return
		}
	}
	t.Fatal("a silence stored without moving its counter is not read in 20 syncs")
}

// TestSyncReadsEverythingWhenTheCountersCannotBeRead: with the counters
// unreadable every sync reads the tables, and succeeds.
func TestSyncReadsEverythingWhenTheCountersCannotBeRead(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	m, st := countingReplica(t, h, false)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st.failVersions.Store(true)
	start := st.reads()
	for range 3 {
		if err := m.Sync(ctx); err != nil {
			t.Fatalf("sync with the counters unreadable: %v, want nil", err)
		}
	}
	if got := st.reads(); got[0]-start[0] != 3 || got[1]-start[1] != 3 {
		t.Fatalf("3 syncs read the silences %d and the acks %d times, want 3 each", got[0]-start[0], got[1]-start[1])
	}
}

// TestSyncAfterAFailedReadReadsEverything: the sync after one whose read
// of the acknowledgements failed reads the silences too, though their
// counter did not move.
func TestSyncAfterAFailedReadReadsEverything(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	m, st := countingReplica(t, h, false)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, other := replica(t, h, true)
	ack := alerts.Ack{Fingerprint: loadFP("x"), StartsAt: t0, By: "ops", Comment: "on it", At: t0}
	if err := other.PutAck(ctx, ack); err != nil {
		t.Fatal(err)
	}
	fa := &failingAcks{Store: st}
	m.o.Store = fa
	fa.fail.Store(true)
	if err := m.Sync(ctx); !errors.Is(err, alerts.ErrStore) {
		t.Fatalf("sync with the acks unreadable: %v, want the store's error", err)
	}
	fa.fail.Store(false)
	start := st.reads()
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.reads(); got[0]-start[0] != 1 || got[1]-start[1] != 1 {
		t.Fatalf("the sync after a failed one read the silences %d and the acks %d times, want once each",
			got[0]-start[0], got[1]-start[1])
	}
	m.mu.Lock()
	_, held := m.acks[ack.Fingerprint]
	m.mu.Unlock()
	if !held {
		t.Fatal("the acknowledgement stored through the other replica is not held")
	}
}

// deploySilence adds, through m, an hour's silence of service x from t0
// ("deploy" by ops) and returns it.
func deploySilence(t *testing.T, m *Manager) silence.Silence {
	t.Helper()
	ms, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	sil, err := m.AddSilence(context.Background(), silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	return sil
}
