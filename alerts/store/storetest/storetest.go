// Package storetest is the conformance suite every alerts store passes.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/notifytest"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// Run runs the suite; open returns a fresh, empty store for each subtest.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		f    func(*testing.T, store.Store)
	}{
		{"States", testStates},
		{"History", testHistory},
		{"Silences", testSilences},
		{"Acks", testAcks},
		{"NotificationLog", testNotificationLog},
		{"UpdateGroups", testUpdateGroups},
		{"Prune", testPrune},
		{"ReplaceSilence", testReplaceSilence},
		{"ConcurrentReplaceSilence", testConcurrentReplaceSilence},
		{"PruneSilences", testPruneSilences},
		{"SilencesBeyond2262", testSilencesBeyond2262},
		{"StatesWithNonFiniteValues", testStatesWithNonFiniteValues},
		{"ConcurrentSaveStates", testConcurrentSaveStates},
		{"Events", testEvents},
		{"ConcurrentTakeEvents", testConcurrentTakeEvents},
		{"WritesBumpSharedVersions", testWritesBumpSharedVersions},
		{"ReadsAndOtherWritesLeaveSharedVersions", testReadsAndOtherWritesLeaveSharedVersions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tt.f(t, s)
		})
	}
}

func testStates(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := rule.Active{Rule: "High", Labels: alerts.Labels{"alertname": "High", "service": "a", "severity": "P1"},
		Annotations: map[string]string{"summary": "x"}, State: alerts.StateFiring, Value: 0.9, ActiveAt: t0, FiredAt: t0.Add(time.Minute)}
	b := rule.Active{Rule: "Low", Labels: alerts.Labels{"alertname": "Low", "severity": "P2"}, State: alerts.StatePending, ActiveAt: t0}
	if err := s.SaveStates(ctx, []rule.Active{a, b}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStates(ctx, []rule.Active{a}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Rule != "High" || got[0].State != alerts.StateFiring || !got[0].FiredAt.Equal(a.FiredAt) ||
		got[0].Labels["service"] != "a" || got[0].Value != 0.9 || got[0].Annotations["summary"] != "x" {
		t.Fatalf("states %+v", got)
	}
}

func testHistory(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := alerts.Labels{"alertname": "High", "severity": "P1"}
	other := alerts.Labels{"alertname": "Other", "severity": "P2"}
	ts := []rule.Transition{
		{Rule: "High", Fingerprint: l.Fingerprint(), Labels: l, From: alerts.StateInactive, To: alerts.StatePending, At: t0},
		{Rule: "Other", Fingerprint: other.Fingerprint(), Labels: other, From: alerts.StateInactive, To: alerts.StatePending, At: t0},
		{Rule: "High", Fingerprint: l.Fingerprint(), Labels: l, From: alerts.StatePending, To: alerts.StateFiring, At: t0.Add(time.Minute)},
	}
	if err := s.AppendHistory(ctx, ts); err != nil {
		t.Fatal(err)
	}
	h, err := s.History(ctx, l.Fingerprint(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].To != alerts.StatePending || h[1].To != alerts.StateFiring || !h[1].At.Equal(t0.Add(time.Minute)) || h[1].Labels["alertname"] != "High" {
		t.Fatalf("history %+v", h)
	}
	all, err := s.History(ctx, 0, 2)
	if err != nil || len(all) != 2 || all[1].Rule != "High" || all[0].Rule != "Other" {
		t.Fatalf("newest two, oldest first: %+v %v", all, err)
	}
}

func testSilences(t *testing.T, s store.Store) {
	ctx := context.Background()
	m, _ := alerts.ParseMatchers(`{service="a", severity=~"P1|P2"}`)
	sl := silence.Silence{ID: "s1", Matchers: m, StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy", CreatedAt: t0}
	if err := s.PutSilence(ctx, sl); err != nil {
		t.Fatal(err)
	}
	sl.EndsAt = t0.Add(time.Minute)
	if err := s.PutSilence(ctx, sl); err != nil {
		t.Fatal(err)
	}
	got, err := s.Silences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].EndsAt.Equal(sl.EndsAt) || got[0].Matchers.String() != m.String() || got[0].CreatedBy != "ops" {
		t.Fatalf("silences %+v", got)
	}
	if !got[0].Mutes(alerts.Labels{"service": "a", "severity": "P1"}, t0) {
		t.Fatal("loaded silence lost its matchers")
	}
	if err := s.PutSilence(ctx, silence.Silence{}); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("silence without id: %v", err)
	}
}

func testAcks(t *testing.T, s store.Store) {
	ctx := context.Background()
	fp := alerts.Labels{"alertname": "High"}.Fingerprint()
	a := alerts.Ack{Fingerprint: fp, StartsAt: t0, By: "ops", Comment: "looking", At: t0.Add(time.Minute)}
	if err := s.PutAck(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := s.Acks(ctx)
	if err != nil || len(got) != 1 || got[0] != a {
		t.Fatalf("acks %+v %v", got, err)
	}
	if err := s.DeleteAck(ctx, fp); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Acks(ctx); len(got) != 0 {
		t.Fatalf("ack not deleted: %+v", got)
	}
	if err := s.PutAck(ctx, alerts.Ack{Fingerprint: fp}); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("ack without author: %v", err)
	}
}

func testNotificationLog(t *testing.T, s store.Store) {
	ctx := context.Background()
	m := notifytest.Sample(notify.KindNotify)
	g := &dispatch.GroupState{Receiver: m.Receiver, Key: m.GroupKey, Labels: m.GroupLabels, SentAt: t0, Seq: 1,
		Notified: map[string]alerts.Alert{m.Alerts[0].Fingerprint: m.Alerts[0].Alert}}
	ok, err := s.RecordNotification(ctx, g, m)
	if err != nil || !ok {
		t.Fatalf("record: %v %v", ok, err)
	}
	g2 := *g
	g2.Seq = 99
	if ok, err := s.RecordNotification(ctx, &g2, m); err != nil || ok {
		t.Fatalf("same message recorded twice: %v %v", ok, err)
	}
	groups, err := s.Groups(ctx)
	if err != nil || len(groups) != 1 || groups[0].Seq != 1 || !groups[0].SentAt.Equal(t0) || len(groups[0].Notified) != 1 {
		t.Fatalf("groups %+v %v (the duplicate must not change the group)", groups, err)
	}
	pend, err := s.Undelivered(ctx)
	if err != nil || len(pend) != 1 || pend[0].Message.ID != m.ID || len(pend[0].Message.Alerts) != 2 || pend[0].Message.Alerts[0].Status != notify.StatusFiring {
		t.Fatalf("undelivered %+v %v", pend, err)
	}
	if _, ok, err := s.Delivered(ctx, m.ID); ok || err != nil {
		t.Fatalf("delivered before marking: %v %v", ok, err)
	}
	if err := s.MarkDelivered(ctx, m.ID, t0.Add(time.Second), 2, ""); err != nil {
		t.Fatal(err)
	}
	if at, ok, err := s.Delivered(ctx, m.ID); !ok || err != nil || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("delivered: %v %v %v", at, ok, err)
	}
	if pend, _ := s.Undelivered(ctx); len(pend) != 0 {
		t.Fatalf("still undelivered: %+v", pend)
	}
	if err := s.MarkDelivered(ctx, "nope", t0, 1, ""); !errors.Is(err, alerts.ErrNotFound) {
		t.Fatalf("mark unknown: %v", err)
	}
	// A notification given up is closed but not delivered.
	m2 := notifytest.Sample(notify.KindNotify)
	m2.ID = "n2"
	if _, err := s.RecordNotification(ctx, nil, m2); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDelivered(ctx, m2.ID, t0, 8, "receiver down"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Delivered(ctx, m2.ID); ok {
		t.Fatal("given-up notification reported delivered")
	}
	if pend, _ := s.Undelivered(ctx); len(pend) != 0 {
		t.Fatal("given-up notification still pending")
	}
}

// testUpdateGroups: UpdateGroups stores and removes group states at once,
// leaving the notification log alone.
func testUpdateGroups(t *testing.T, s store.Store) {
	ctx := context.Background()
	m := notifytest.Sample(notify.KindNotify)
	a := m.Alerts[0].Alert
	old := &dispatch.GroupState{Receiver: m.Receiver, Key: m.GroupKey, Labels: m.GroupLabels, SentAt: t0, Seq: 3,
		Notified: map[string]alerts.Alert{m.Alerts[0].Fingerprint: a}}
	if ok, err := s.RecordNotification(ctx, old, m); err != nil || !ok {
		t.Fatalf("record: %v %v", ok, err)
	}
	other := dispatch.GroupState{Receiver: "other", Key: "k", SentAt: t0, Seq: 1, Notified: map[string]alerts.Alert{}}
	if err := s.UpdateGroups(ctx, []dispatch.GroupState{other}, nil); err != nil {
		t.Fatal(err)
	}
	// The alert moves to a new group of the same receiver.
	moved := dispatch.GroupState{Receiver: m.Receiver, Key: `{alertname="x"}`, Labels: alerts.Labels{"alertname": "x"},
		SentAt: t0, Seq: 3, Notified: map[string]alerts.Alert{m.Alerts[0].Fingerprint: a}}
	if err := s.UpdateGroups(ctx, []dispatch.GroupState{moved},
		[]dispatch.GroupRef{{Receiver: old.Receiver, Key: old.Key}, {Receiver: "never", Key: "stored"}}); err != nil {
		t.Fatal(err)
	}
	groups, err := s.Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, g := range groups {
		keys = append(keys, g.Receiver+"/"+g.Key)
	}
	want := []string{"other/k", m.Receiver + `/{alertname="x"}`} // by receiver, then key
	if strings.Join(keys, " ") != strings.Join(want, " ") || groups[1].Seq != 3 || !groups[1].SentAt.Equal(t0) ||
		len(groups[1].Notified) != 1 {
		t.Fatalf("groups %v (%+v), want %v with the moved alert", keys, groups, want)
	}
	// Put again: replaced, not added.
	moved.Seq, moved.Notified = 4, map[string]alerts.Alert{}
	if err := s.UpdateGroups(ctx, []dispatch.GroupState{moved}, nil); err != nil {
		t.Fatal(err)
	}
	if groups, err := s.Groups(ctx); err != nil || len(groups) != 2 || groups[1].Seq != 4 || len(groups[1].Notified) != 0 {
		t.Fatalf("groups %+v %v", groups, err)
	}
	if pend, err := s.Undelivered(ctx); err != nil || len(pend) != 1 || pend[0].Message.ID != m.ID {
		t.Fatalf("the notification log changed: %+v %v", pend, err)
	}
	if err := s.UpdateGroups(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func testPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := alerts.Labels{"alertname": "High", "severity": "P1"}
	if err := s.AppendHistory(ctx, []rule.Transition{
		{Rule: "High", Fingerprint: l.Fingerprint(), Labels: l, From: alerts.StateInactive, To: alerts.StatePending, At: t0},
		{Rule: "High", Fingerprint: l.Fingerprint(), Labels: l, From: alerts.StatePending, To: alerts.StateFiring, At: t0.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	old, open, recent := notifytest.Sample(notify.KindNotify), notifytest.Sample(notify.KindNotify), notifytest.Sample(notify.KindNotify)
	old.ID, open.ID, recent.ID = "old", "open", "recent"
	recent.CreatedAt = t0.Add(time.Hour)
	for _, m := range []*notify.Message{old, open, recent} {
		if _, err := s.RecordNotification(ctx, nil, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"old", "recent"} {
		if err := s.MarkDelivered(ctx, id, t0.Add(2*time.Hour), 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Prune(ctx, t0.Add(time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d rows (%v), want 2: the old transition and the old delivered message", n, err)
	}
	if h, _ := s.History(ctx, 0, 10); len(h) != 1 || h[0].To != alerts.StateFiring {
		t.Fatalf("history after prune %+v", h)
	}
	if _, _, err := s.Delivered(ctx, "old"); !errors.Is(err, alerts.ErrNotFound) {
		t.Fatalf("old delivered message kept: %v", err)
	}
	if pend, _ := s.Undelivered(ctx); len(pend) != 1 || pend[0].Message.ID != "open" {
		t.Fatalf("an undelivered message must survive pruning: %+v", pend)
	}
}

// testReplaceSilence: ReplaceSilence writes over the silence as the caller
// read it, and refuses, writing nothing, with a conflict naming the
// silence, when the store holds another version or none.
func testReplaceSilence(t *testing.T, s store.Store) {
	ctx := context.Background()
	m, _ := alerts.ParseMatchers(`{service="a"}`)
	// In another zone than the store's UTC: compared as instants.
	zone := time.FixedZone("UTC+2", 2*60*60)
	v1 := silence.Silence{ID: "s1", Matchers: m, StartsAt: t0.In(zone), EndsAt: t0.Add(time.Hour), CreatedBy: "ops",
		Comment: "deploy", CreatedAt: t0}
	if err := s.PutSilence(ctx, v1); err != nil {
		t.Fatal(err)
	}
	read := v1
	read.StartsAt = t0
	v2 := v1
	v2.EndsAt, v2.Comment = t0.Add(2*time.Hour), "deploy, longer"
	if err := s.ReplaceSilence(ctx, read, v2); err != nil {
		t.Fatalf("replace of the stored version: %v", err)
	}
	stale := v1
	stale.Comment = "stale edit"
	tests := []struct {
		name       string
		prev, next silence.Silence
	}{
		{"stale version", v1, stale},
		{"not stored", silence.Silence{ID: "gone", Matchers: m, StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "x"},
			silence.Silence{ID: "gone", Matchers: m, StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "y"}},
	}
	for _, tt := range tests {
		err := s.ReplaceSilence(ctx, tt.prev, tt.next)
		if !errors.Is(err, alerts.ErrConflict) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.next.ID)) {
			t.Fatalf("%s: got %v, want a conflict naming %q", tt.name, err, tt.next.ID)
		}
	}
	got, err := s.Silences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Comment != v2.Comment || !got[0].EndsAt.Equal(v2.EndsAt) {
		t.Fatalf("silences %+v, want only v2", got)
	}
	// The version read back is the stored one.
	v3 := got[0]
	v3.Comment = "deploy, read back"
	if err := s.ReplaceSilence(ctx, got[0], v3); err != nil {
		t.Fatalf("replace of the version read back: %v", err)
	}
	if err := s.ReplaceSilence(ctx, v3, silence.Silence{ID: "other"}); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("replace under another id: got %v, want ErrInvalid", err)
	}
}

// testConcurrentReplaceSilence: of concurrent edits based on the same
// version of a silence, one is stored and the others are refused as
// conflicts; none overwrites another.
func testConcurrentReplaceSilence(t *testing.T, s store.Store) {
	ctx := context.Background()
	m, _ := alerts.ParseMatchers(`{service="a"}`)
	base := silence.Silence{ID: "s1", Matchers: m, StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops",
		Comment: "deploy", CreatedAt: t0}
	if err := s.PutSilence(ctx, base); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := base
			next.Comment = fmt.Sprintf("edit %d", i)
			errs[i] = s.ReplaceSilence(ctx, base, next)
		}()
	}
	wg.Wait()
	stored := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if stored >= 0 {
				t.Fatalf("edits %d and %d both stored over the same version", stored, i)
			}
			stored = i
		case !errors.Is(err, alerts.ErrConflict):
			t.Fatalf("edit %d: got %v, want a conflict or success", i, err)
		}
	}
	if stored < 0 {
		t.Fatal("no edit stored")
	}
	got, err := s.Silences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("edit %d", stored); len(got) != 1 || got[0].Comment != want {
		t.Fatalf("silences %+v, want the one stored edit %q", got, want)
	}
}

// testPruneSilences: PruneSilences deletes the silences that ended before
// the time given, and only those.
func testPruneSilences(t *testing.T, s store.Store) {
	ctx := context.Background()
	m, _ := alerts.ParseMatchers(`{service="a"}`)
	for id, end := range map[string]time.Time{"ended": t0.Add(time.Hour), "at-cutoff": t0.Add(2 * time.Hour), "active": t0.Add(200 * time.Hour)} {
		if err := s.PutSilence(ctx, silence.Silence{ID: id, Matchers: m, StartsAt: t0, EndsAt: end, CreatedBy: "ops",
			Comment: "x", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.PruneSilences(ctx, t0.Add(2*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d silences (%v), want 1: the one ended before the cutoff", n, err)
	}
	got, err := s.Silences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sl := range got {
		ids = append(ids, sl.ID)
	}
	if strings.Join(ids, ",") != "at-cutoff,active" && strings.Join(ids, ",") != "active,at-cutoff" {
		t.Fatalf("silences after the prune: %v, want at-cutoff and active", ids)
	}
	if n, err := s.PruneSilences(ctx, t0.Add(2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("second prune: %d %v", n, err)
	}
}

// testSilencesBeyond2262: a silence "until 9999-12-31" (a common way to
// say forever) or starting after 2262, past what Unix nanoseconds hold in
// an int64, is neither pruned as ended nor listed out of order: it is still
// there after a restart.
func testSilencesBeyond2262(t *testing.T, s store.Store) {
	ctx := context.Background()
	m, _ := alerts.ParseMatchers(`{service="a"}`)
	put := func(id string, start, end time.Time) {
		t.Helper()
		if err := s.PutSilence(ctx, silence.Silence{ID: id, Matchers: m, StartsAt: start, EndsAt: end, CreatedBy: "ops",
			Comment: "forever", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	put("forever", t0, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	put("year-2300", t0.Add(time.Minute), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
	put("far-start", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(3001, 1, 1, 0, 0, 0, 0, time.UTC))
	put("ended", t0, t0.Add(time.Hour))
	n, err := s.PruneSilences(ctx, t0.Add(2*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d silences (%v), want 1: only the one that ended", n, err)
	}
	got, err := s.Silences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sl := range got {
		ids = append(ids, sl.ID)
	}
	if strings.Join(ids, ",") != "forever,year-2300,far-start" {
		t.Fatalf("silences %v, want forever, year-2300, far-start (oldest start first)", ids)
	}
	if !got[0].EndsAt.Equal(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)) || !got[0].Mutes(alerts.Labels{"service": "a"}, t0.Add(24*time.Hour)) {
		t.Fatalf("forever silence loaded as %+v", got[0])
	}
}

// testStatesWithNonFiniteValues: an alert whose value is +Inf or NaN (a
// ratio over zero requests) is saved and loaded like any other.
func testStatesWithNonFiniteValues(t *testing.T, s store.Store) {
	ctx := context.Background()
	inf := rule.Active{Rule: "Inf", Labels: alerts.Labels{"alertname": "Inf"}, State: alerts.StateFiring, Value: math.Inf(1), ActiveAt: t0}
	nan := rule.Active{Rule: "NaN", Labels: alerts.Labels{"alertname": "NaN"}, State: alerts.StatePending, Value: math.NaN(), ActiveAt: t0}
	if err := s.SaveStates(ctx, []rule.Active{inf, nan}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadStates(ctx)
	if err != nil || len(got) != 2 || got[0].Rule != "Inf" || !math.IsInf(got[0].Value, 1) || !math.IsNaN(got[1].Value) {
		t.Fatalf("states %+v %v", got, err)
	}
}

// testConcurrentSaveStates: concurrent SaveStates calls (a leader and a
// replica taking over) all succeed, and the states stored are one call's
// whole set, not a mix.
func testConcurrentSaveStates(t *testing.T, s store.Store) {
	ctx := context.Background()
	const writers, saves, rules = 4, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range saves {
				var st []rule.Active
				for k := range rules {
					n := fmt.Sprintf("R%d", k)
					st = append(st, rule.Active{Rule: n, Labels: alerts.Labels{"alertname": n}, State: alerts.StateFiring,
						Value: float64(w*100 + i), ActiveAt: t0})
				}
				if err := s.SaveStates(ctx, st); err != nil {
					errs <- fmt.Errorf("writer %d, save %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := s.LoadStates(ctx)
	if err != nil || len(got) != rules {
		t.Fatalf("%d states (%v), want %d", len(got), err, rules)
	}
	for _, a := range got[1:] {
		if a.Value != got[0].Value {
			t.Fatalf("states mix two saves: %+v", got)
		}
	}
}

func testEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	evs := []rule.Event{
		{Kind: rule.EventLeaderLost, Service: "engine", Severity: alerts.P0, At: t0},
		{Kind: rule.EventInstanceStale, Service: "a", Labels: map[string]string{"instance": "i-1"}, At: t0.Add(time.Second)},
		{Kind: rule.EventLeaderLost, Service: "engine", At: t0.Add(2 * time.Second), Resolved: true},
	}
	if err := s.PutEvents(ctx, evs[:2]); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEvents(ctx, evs[2:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeEvents(ctx, 0); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("take with limit 0: %v, want ErrInvalid", err)
	}
	got, err := s.TakeEvents(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	rest, err := s.TakeEvents(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, rest...)
	if len(got) != len(evs) {
		t.Fatalf("took %d events, want %d: %+v", len(got), len(evs), got)
	}
	for i := range evs {
		g, w := got[i], evs[i]
		if g.Kind != w.Kind || g.Service != w.Service || g.Severity != w.Severity || !g.At.Equal(w.At) ||
			g.Resolved != w.Resolved || fmt.Sprint(g.Labels) != fmt.Sprint(w.Labels) {
			t.Fatalf("event %d: got %+v, want %+v", i, g, w)
		}
	}
	if again, err := s.TakeEvents(ctx, 10); err != nil || len(again) != 0 {
		t.Fatalf("events taken twice: %+v, %v", again, err)
	}
}

// testConcurrentTakeEvents: replicas taking at once each get distinct
// events, and together all of them.
func testConcurrentTakeEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 200
	var evs []rule.Event
	for i := range n {
		evs = append(evs, rule.Event{Kind: rule.EventAutoRollback, Service: fmt.Sprint(i), At: t0})
	}
	if err := s.PutEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.TakeEvents(ctx, 7)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, ev := range got {
					seen[ev.Service]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// SQLite may refuse a concurrent writer as busy; what matters is
		// that no event is taken twice.
		if !errors.Is(err, alerts.ErrStore) {
			t.Fatal(err)
		}
	}
	rest, err := s.TakeEvents(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range rest {
		seen[ev.Service]++
	}
	if len(seen) != n {
		t.Fatalf("%d distinct events taken, want %d", len(seen), n)
	}
	for svc, k := range seen {
		if k != 1 {
			t.Fatalf("event %s taken %d times", svc, k)
		}
	}
}

// testWritesBumpSharedVersions: every write of the silences, the
// acknowledgements or the alert states moves its counter, and only its
// own; a prune or an ack deletion that deletes nothing, a refused
// replacement and a refused write move none.
func testWritesBumpSharedVersions(t *testing.T, s store.Store) {
	ctx := context.Background()
	m, _ := alerts.ParseMatchers(`{service="a"}`)
	sl := silence.Silence{ID: "s1", Matchers: m, StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "x", CreatedAt: t0}
	edited := sl
	edited.Comment = "edited"
	fp := alerts.Labels{"alertname": "High"}.Fingerprint()
	ack := alerts.Ack{Fingerprint: fp, StartsAt: t0, By: "ops", Comment: "looking", At: t0}
	active := rule.Active{Rule: "R", Labels: alerts.Labels{"alertname": "R"}, State: alerts.StateFiring, ActiveAt: t0}
	tests := []struct {
		name  string
		write func() error
		want  store.SharedVersions // the moves
	}{
		{"PutSilence", func() error { return s.PutSilence(ctx, sl) }, store.SharedVersions{Silences: 1}},
		{"PutSilence again", func() error { return s.PutSilence(ctx, sl) }, store.SharedVersions{Silences: 1}},
		{"ReplaceSilence", func() error { return s.ReplaceSilence(ctx, sl, edited) }, store.SharedVersions{Silences: 1}},
		{"ReplaceSilence refused", func() error {
			if err := s.ReplaceSilence(ctx, sl, edited); !errors.Is(err, alerts.ErrConflict) {
				return fmt.Errorf("stale replace: %v, want a conflict", err)
			}
			return nil
		}, store.SharedVersions{}},
		{"PutSilence refused", func() error {
			if err := s.PutSilence(ctx, silence.Silence{}); !errors.Is(err, alerts.ErrInvalid) {
				return fmt.Errorf("silence without id: %v, want refused", err)
			}
			return nil
		}, store.SharedVersions{}},
		{"PruneSilences deleting nothing", func() error { return pruneSilences(ctx, s, t0, 0) }, store.SharedVersions{}},
		{"PruneSilences deleting", func() error { return pruneSilences(ctx, s, t0.Add(2*time.Hour), 1) }, store.SharedVersions{Silences: 1}},
		{"PutAck", func() error { return s.PutAck(ctx, ack) }, store.SharedVersions{Acks: 1}},
		{"DeleteAck", func() error { return s.DeleteAck(ctx, fp) }, store.SharedVersions{Acks: 1}},
		{"DeleteAck deleting nothing", func() error { return s.DeleteAck(ctx, fp) }, store.SharedVersions{}},
		{"SaveStates", func() error { return s.SaveStates(ctx, []rule.Active{active}) }, store.SharedVersions{States: 1}},
		{"SaveStates empty", func() error { return s.SaveStates(ctx, nil) }, store.SharedVersions{States: 1}},
	}
	for _, tt := range tests {
		before, err := s.SharedVersions(ctx)
		if err != nil {
			t.Fatalf("%s: shared versions: %v", tt.name, err)
		}
		if err := tt.write(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		after, err := s.SharedVersions(ctx)
		if err != nil {
			t.Fatalf("%s: shared versions: %v", tt.name, err)
		}
		moved := store.SharedVersions{Silences: after.Silences - before.Silences, Acks: after.Acks - before.Acks,
			States: after.States - before.States}
		if moved != tt.want {
			t.Fatalf("%s moved the counters by %+v, want %+v", tt.name, moved, tt.want)
		}
	}
}

func pruneSilences(ctx context.Context, s store.Store, before time.Time, want int64) error {
	n, err := s.PruneSilences(ctx, before)
	if err == nil && n != want {
		err = fmt.Errorf("pruned %d silences, want %d", n, want)
	}
	return err
}

// testReadsAndOtherWritesLeaveSharedVersions: reads and the writes of the
// other tables (history, groups, the notification log, events, prune)
// move no counter.
func testReadsAndOtherWritesLeaveSharedVersions(t *testing.T, s store.Store) {
	ctx := context.Background()
	before, err := s.SharedVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := alerts.Labels{"alertname": "High"}
	g := &dispatch.GroupState{Receiver: "r", Key: "k", Seq: 1}
	msg := &notify.Message{ID: "m1", Receiver: "r", GroupKey: "k", Kind: notify.KindNotify, CreatedAt: t0}
	for name, f := range map[string]func() error{
		"AppendHistory": func() error {
			return s.AppendHistory(ctx, []rule.Transition{{Fingerprint: l.Fingerprint(), Rule: "High", Labels: l,
				From: alerts.StatePending, To: alerts.StateFiring, At: t0}})
		},
		"RecordNotification": func() error { _, err := s.RecordNotification(ctx, g, msg); return err },
		"UpdateGroups":       func() error { return s.UpdateGroups(ctx, []dispatch.GroupState{*g}, nil) },
		"PutEvents":          func() error { return s.PutEvents(ctx, []rule.Event{{Kind: "e", At: t0}}) },
		"Prune":              func() error { _, err := s.Prune(ctx, t0.Add(time.Hour)); return err },
		"reads": func() error {
			_, err1 := s.Silences(ctx)
			_, err2 := s.Acks(ctx)
			_, err3 := s.LoadStates(ctx)
			return errors.Join(err1, err2, err3)
		},
	} {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	after, err := s.SharedVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("counters moved from %+v to %+v by writes of other tables and reads", before, after)
	}
}
