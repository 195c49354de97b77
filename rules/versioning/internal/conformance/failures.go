package conformance

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
	"governor.dev/governor/sdk/clock"
)

func tooLarge(relay string) versioning.OutboxFailure {
	return versioning.OutboxFailure{Reason: "too_large", Error: "checkout version 1 is 2000 bytes, at most 1000",
		Size: 2000, Limit: 1000, Relay: relay}
}

// testOutboxUndeliverable: a row given up on is recorded once, in the
// transaction that takes it out of the claims, with an audit entry; it is
// listed newest first until a newer version of the service is marked done,
// which supersedes it (kept as history); a requeued row is claimed again.
func testOutboxUndeliverable(t *testing.T, f Factory) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := f(t, Options{Clock: clk})
	s := h.Store
	v1 := live(t, s, "big", 1)
	items, err := s.ClaimOutbox(ctx, 10, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, items, 1)
	id := items[0].ID

	got, recorded, err := s.MarkOutboxUndeliverable(ctx, id, tooLarge("host-a/1"))
	require.NoError(t, err)
	require.True(t, recorded)
	require.Positive(t, got.ID)
	want := versioning.OutboxFailure{ID: got.ID, OutboxID: id, Service: "big", Version: v1.Number, Reason: "too_large",
		Error: tooLarge("").Error, Size: 2000, Limit: 1000, Relay: "host-a/1", At: clk.Now()}
	require.Equal(t, want, got)
	require.True(t, got.Open())

	// A second relay (or a retry) finds it recorded and writes nothing.
	before := auditCount(t, h)
	again, recorded, err := s.MarkOutboxUndeliverable(ctx, id, tooLarge("host-b/2"))
	require.NoError(t, err)
	require.False(t, recorded)
	require.Equal(t, want, again)
	require.Equal(t, before, auditCount(t, h))

	entries, err := s.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionUndeliverable})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, sqlstore.RelayActor.Name, entries[0].Actor)
	require.Equal(t, "big", entries[0].Service)
	require.Equal(t, v1.Number, entries[0].Version)
	var detail map[string]any
	require.NoError(t, json.Unmarshal(entries[0].Detail, &detail))
	require.Equal(t, map[string]any{"outbox_id": float64(id), "failure_id": float64(got.ID), "reason": "too_large",
		"error": want.Error, "size": 2000.0, "limit": 1000.0, "relay": "host-a/1", "attempts": 1.0}, detail)

	// Never claimed again, after any lease.
	clk.Advance(time.Hour)
	items, err = s.ClaimOutbox(ctx, 10, time.Second)
	require.NoError(t, err)
	require.Empty(t, items, "an undeliverable row is not claimed again")
	v, err := s.Get(ctx, "big", v1.Number)
	require.NoError(t, err)
	require.Equal(t, versioning.StateApproved, v.State, "not published")

	// Listed, per service, newest first.
	live(t, s, "other", 1)
	items, err = s.ClaimOutbox(ctx, 10, time.Second)
	require.NoError(t, err)
	require.Len(t, items, 1)
	clk.Advance(time.Second)
	other, recorded, err := s.MarkOutboxUndeliverable(ctx, items[0].ID, versioning.OutboxFailure{Reason: "invalid",
		Error: "payload is not the row's envelope", Relay: "host-b/2"})
	require.NoError(t, err)
	require.True(t, recorded)
	list, err := s.OutboxFailures(ctx, versioning.FailureFilter{})
	require.NoError(t, err)
	require.Equal(t, []versioning.OutboxFailure{other, want}, list, "newest first")
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{Service: "big"})
	require.NoError(t, err)
	require.Equal(t, []versioning.OutboxFailure{want}, list)
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{Service: "big", Limit: 1})
	require.NoError(t, err)
	require.Len(t, list, 1)

	// A newer version marked done supersedes it: no longer listed, kept
	// as history, named in the publish entry.
	clk.Advance(time.Second)
	v2 := live(t, s, "big", 2)
	items, err = s.ClaimOutbox(ctx, 10, time.Second)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, v2.Number, items[0].Version)
	require.NoError(t, s.MarkOutboxDone(ctx, items[0].ID))
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{Service: "big"})
	require.NoError(t, err)
	require.Empty(t, list, "superseded by v2")
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{Service: "big", History: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, v2.Number, list[0].SupersededBy)
	require.Equal(t, clk.Now(), list[0].SupersededAt)
	require.False(t, list[0].Open())
	pubs, err := s.Audit(ctx, versioning.AuditFilter{Service: "big", Action: versioning.ActionPublish})
	require.NoError(t, err)
	require.Len(t, pubs, 1)
	require.Contains(t, string(pubs[0].Detail), `"supersedes_undeliverable":[1]`)
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{})
	require.NoError(t, err)
	require.Equal(t, []versioning.OutboxFailure{other}, list, "the other service's failure stands")

	// A published row cannot be given up on afterwards.
	_, recorded, err = s.MarkOutboxUndeliverable(ctx, items[0].ID, tooLarge("host-a/1"))
	require.NoError(t, err)
	require.False(t, recorded)

	// Requeued: claimed again; given up on again, it is a new failure.
	ok, err := s.RequeueOutbox(ctx, other.OutboxID, "host-c/3")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.RequeueOutbox(ctx, other.OutboxID, "host-c/3")
	require.NoError(t, err)
	require.False(t, ok, "requeued once")
	ok, err = s.RequeueOutbox(ctx, items[0].ID, "host-c/3")
	require.NoError(t, err)
	require.False(t, ok, "a published row is not requeued")
	items, err = s.ClaimOutbox(ctx, 10, time.Second)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, other.OutboxID, items[0].ID)
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{Service: "other", History: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "host-c/3", list[0].RequeuedBy)
	require.Equal(t, clk.Now(), list[0].RequeuedAt)
	third, recorded, err := s.MarkOutboxUndeliverable(ctx, other.OutboxID, tooLarge("host-c/3"))
	require.NoError(t, err)
	require.True(t, recorded)
	require.NotEqual(t, other.ID, third.ID)
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{Service: "other", History: true})
	require.NoError(t, err)
	require.Len(t, list, 2)
	requeues, err := s.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionRequeue})
	require.NoError(t, err)
	require.Len(t, requeues, 1)

	// Bad input names the field and writes nothing.
	before = auditCount(t, h)
	_, _, err = s.MarkOutboxUndeliverable(ctx, id, versioning.OutboxFailure{Reason: "Too Large", Error: " ",
		Size: -1, Limit: -2, Relay: strings.Repeat("r", versioning.MaxFailureRelayBytes+1)})
	require.Equal(t, []string{"reason", "error", "relay", "size", "limit"}, fieldsOf(t, err))
	_, _, err = s.MarkOutboxUndeliverable(ctx, id, versioning.OutboxFailure{Reason: "invalid", Error: "x", Relay: "r",
		Size: 0, Limit: 0})
	require.NoError(t, err, "already recorded: a no-op")
	_, _, err = s.MarkOutboxUndeliverable(ctx, 999, tooLarge("r"))
	require.ErrorIs(t, err, versioning.ErrNotFound)
	_, err = s.RequeueOutbox(ctx, 999, "r")
	require.ErrorIs(t, err, versioning.ErrNotFound)
	_, err = s.RequeueOutbox(ctx, id, "")
	require.Equal(t, []string{"relay"}, fieldsOf(t, err))
	_, err = s.OutboxFailures(ctx, versioning.FailureFilter{Limit: 1001})
	require.Equal(t, []string{"limit"}, fieldsOf(t, err))
	_, err = s.OutboxFailures(ctx, versioning.FailureFilter{Service: "Bad Name"})
	require.Equal(t, []string{"service"}, fieldsOf(t, err))
	require.Equal(t, before, auditCount(t, h))
	_, err = s.RecordAudit(ctx, versioning.AuditRecord{Actor: root, Action: versioning.ActionUndeliverable})
	require.Equal(t, []string{"action"}, fieldsOf(t, err), "only the store records relay outcomes")

	rep, err := s.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Equal(t, auditCount(t, h), rep.Entries)
}

// testOutboxUndeliverableRace: relays racing to give up on the same row
// record it once.
func testOutboxUndeliverableRace(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	live(t, h.Store, "race", 1)
	items, err := h.Store.ClaimOutbox(ctx, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, items, 1)
	var mu sync.Mutex
	recorded := 0
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			_, ok, err := h.Store.MarkOutboxUndeliverable(ctx, items[0].ID, tooLarge("relay-"+string(rune('a'+i))))
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				recorded++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, recorded)
	require.Equal(t, int64(1), h.Count(ctx, `SELECT count(*) FROM rule_outbox_failures`))
	entries, err := h.Store.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionUndeliverable})
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

// testOutboxFailureCount: CountOutboxFailures counts what OutboxFailures
// lists (every match, whatever the limit), and both select by reason and by
// the largest size a transport accepts.
func testOutboxFailureCount(t *testing.T, f Factory) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := f(t, Options{Clock: clk})
	s := h.Store
	fail := func(service string, fl versioning.OutboxFailure) versioning.OutboxFailure {
		t.Helper()
		live(t, s, service, 1)
		items, err := s.ClaimOutbox(ctx, 10, 30*time.Second)
		require.NoError(t, err)
		require.Len(t, items, 1)
		clk.Advance(time.Second)
		got, recorded, err := s.MarkOutboxUndeliverable(ctx, items[0].ID, fl)
		require.NoError(t, err)
		require.True(t, recorded)
		return got
	}
	count := func(ff versioning.FailureFilter) int {
		t.Helper()
		n, err := s.CountOutboxFailures(ctx, ff)
		require.NoError(t, err)
		list, err := s.OutboxFailures(ctx, versioning.FailureFilter{Service: ff.Service, Reason: ff.Reason,
			MaxSize: ff.MaxSize, History: ff.History, Limit: 1000})
		require.NoError(t, err)
		require.Len(t, list, n, "the count agrees with the list for %+v", ff)
		return n
	}
	require.Zero(t, count(versioning.FailureFilter{}), "an empty store")

	big := fail("big", tooLarge("r"))
	small := versioning.OutboxFailure{Reason: "too_large", Error: "small is 1200 bytes, at most 1000", Size: 1200,
		Limit: 1000, Relay: "r"}
	small = fail("small", small)
	bad := fail("bad", versioning.OutboxFailure{Reason: "invalid", Error: "not the row's envelope", Relay: "r"})

	require.Equal(t, 3, count(versioning.FailureFilter{}))
	require.Equal(t, 2, count(versioning.FailureFilter{Reason: "too_large"}))
	require.Equal(t, 1, count(versioning.FailureFilter{Reason: "invalid"}))
	require.Equal(t, 1, count(versioning.FailureFilter{Service: "big"}))
	require.Zero(t, count(versioning.FailureFilter{Service: "nobody"}))
	require.Equal(t, 1, count(versioning.FailureFilter{Reason: "too_large", MaxSize: 1999}), "only small fits 1999")
	require.Equal(t, 1, count(versioning.FailureFilter{Reason: "too_large", MaxSize: 1200}), "a size equal to the limit fits")
	require.Zero(t, count(versioning.FailureFilter{Reason: "too_large", MaxSize: 1199}))
	require.Equal(t, 2, count(versioning.FailureFilter{Reason: "too_large", MaxSize: 2000}))
	list, err := s.OutboxFailures(ctx, versioning.FailureFilter{Reason: "too_large", MaxSize: 1999})
	require.NoError(t, err)
	require.Equal(t, []versioning.OutboxFailure{small}, list)
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []versioning.OutboxFailure{bad}, list, "the limit bounds the list, newest first")
	n, err := s.CountOutboxFailures(ctx, versioning.FailureFilter{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, 3, n, "the limit does not bound the count")

	// Closed failures count only with History.
	ok, err := s.RequeueOutbox(ctx, small.OutboxID, "r")
	require.NoError(t, err)
	require.True(t, ok)
	live(t, s, "big", 2)
	items, err := s.ClaimOutbox(ctx, 10, 30*time.Second)
	require.NoError(t, err)
	for _, it := range items {
		if it.Service == "big" {
			require.NoError(t, s.MarkOutboxDone(ctx, it.ID))
		}
	}
	require.Equal(t, 1, count(versioning.FailureFilter{}), "only bad is open")
	require.Equal(t, 3, count(versioning.FailureFilter{History: true}))
	require.Equal(t, 1, count(versioning.FailureFilter{Service: "big", History: true}))
	require.Zero(t, count(versioning.FailureFilter{Service: "big"}), "big v1 is superseded by v2")
	list, err = s.OutboxFailures(ctx, versioning.FailureFilter{Service: "big", History: true})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, big.ID, list[0].ID)

	// Bad input names the field.
	_, err = s.CountOutboxFailures(ctx, versioning.FailureFilter{Service: "Bad Name", Reason: "Too Large", MaxSize: -1,
		Limit: 1001})
	require.Equal(t, []string{"service", "reason", "max_size"}, fieldsOf(t, err), "the limit is ignored")
	_, err = s.OutboxFailures(ctx, versioning.FailureFilter{Reason: "Too Large", MaxSize: -1})
	require.Equal(t, []string{"reason", "max_size"}, fieldsOf(t, err))
}
