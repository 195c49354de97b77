package manager

import (
	"context"
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
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, ra, _ := replica(t, h, false)
	b, _, _ := replica(t, h, true)
	ms, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy"}); err != nil {
		t.Fatal(err)
	}
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
	ms, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	sil, err := a.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
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
	ms, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	sil, err := a.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
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
	ms, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy"}); err != nil {
		t.Fatal(err)
	}
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

// TestSilenceEditOverAnotherReplicasChangeIsRefused: an in-place edit
// based on a silence another replica expired since this one read it is
// refused with a conflict naming the silence, and the expiry stands; it
// used to bring the expired silence back silently.
func TestSilenceEditOverAnotherReplicasChangeIsRefused(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.close()
	a, _, _ := replica(t, h, false)
	b, _, _ := replica(t, h, true)
	ms, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	sil, err := a.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	h.clk.Set(t0.Add(time.Minute))
	if err := a.ExpireSilence(ctx, sil.ID, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	// b edits the silence as it read it, before a's expiry.
	edit := sil
	edit.EndsAt, edit.Comment = t0.Add(2*time.Hour), "deploy, longer"
	_, err = b.AddSilence(ctx, edit)
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), sil.ID) {
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
	ms, err := alerts.ParseMatchers(`service="x"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Follow(ctx, h.clk.Now()); err != nil {
		t.Fatalf("standby Follow = %v, want nil", err)
	}
	if got := b.Silences(); len(got) != 1 {
		t.Fatalf("standby lists %d silences after Follow, want the leader's 1", len(got))
	}
	if err := a.Follow(ctx, h.clk.Now()); err != nil {
		t.Fatalf("leader Follow = %v, want a step without error", err)
	}

	b.o.Store = unreadableSilences{b.o.Store}
	err = b.Follow(ctx, h.clk.Now())
	if err == nil || errors.Is(err, ErrStandby) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Follow over a failing store = %v, want its error without ErrStandby", err)
	}
}
