package conformance

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
	"governor.dev/governor/sdk/clock"
)

// itemMarker marks an outbox row only while the row of the item's id still
// holds the item's service, version and checksum: the shape of
// distribution.ItemMarker, which the relay uses whenever its Outbox has it.
type itemMarker interface {
	MarkOutboxItemDone(ctx context.Context, it versioning.OutboxItem) error
	MarkOutboxItemUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error)
}

// testOutboxItemMark: a claimed row marked by its item is marked as
// MarkOutboxDone and MarkOutboxUndeliverable mark it (same audit entries,
// same returned failure, same no-ops); an item whose id names a row with
// another service, version or checksum is refused with ErrNotFound and
// the row is left untouched.
func testOutboxItemMark(t *testing.T, f Factory) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := f(t, Options{Clock: clk})
	s := h.Store
	m, ok := s.(itemMarker)
	require.True(t, ok, "%T must mark outbox rows by item", s)
	live(t, s, "item-a", 1)
	live(t, s, "item-b", 2)
	items, err := s.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, items, 2)
	done, failed := items[0], items[1]
	require.NotEqual(t, done.Checksum, failed.Checksum)

	// Items whose id names a row holding something else, and an unknown id.
	others := func(it, other versioning.OutboxItem) map[string]versioning.OutboxItem {
		service, version, checksum, unknown := it, it, it, it
		service.Service = other.Service
		version.Version++
		checksum.Checksum = other.Checksum
		unknown.ID = 999
		return map[string]versioning.OutboxItem{"service": service, "version": version, "checksum": checksum, "id": unknown}
	}
	before := auditCount(t, h)
	for _, pair := range [][2]versioning.OutboxItem{{done, failed}, {failed, done}} {
		for name, other := range others(pair[0], pair[1]) {
			err := m.MarkOutboxItemDone(ctx, other)
			require.ErrorIs(t, err, versioning.ErrNotFound, "done, other %s", name)
			fl, recorded, err := m.MarkOutboxItemUndeliverable(ctx, other, tooLarge("host-a/1"))
			require.ErrorIs(t, err, versioning.ErrNotFound, "undeliverable, other %s", name)
			require.False(t, recorded)
			require.Zero(t, fl)
		}
	}
	require.Equal(t, before, auditCount(t, h), "a refused mark audits nothing")
	require.Equal(t, int64(2), h.Count(ctx, `SELECT count(*) FROM rule_outbox WHERE published_at IS NULL AND failed_at IS NULL`),
		"a refused mark leaves the row untouched")
	require.Zero(t, h.Count(ctx, `SELECT count(*) FROM rule_outbox_failures`))

	// Bad input names the field, as MarkOutboxUndeliverable does.
	_, _, err = m.MarkOutboxItemUndeliverable(ctx, failed, versioning.OutboxFailure{Reason: "Too Large", Error: "x", Relay: "r"})
	require.Equal(t, []string{"reason"}, fieldsOf(t, err))

	// The claimed row is marked done: published, audited as by id.
	clk.Advance(time.Second)
	require.NoError(t, m.MarkOutboxItemDone(ctx, done))
	require.NoError(t, m.MarkOutboxItemDone(ctx, done), "marking twice is a no-op")
	require.NoError(t, s.MarkOutboxDone(ctx, done.ID), "as it is by id")
	v, err := s.Get(ctx, done.Service, done.Version)
	require.NoError(t, err)
	require.Equal(t, versioning.StatePublished, v.State)
	require.Equal(t, clk.Now(), v.PublishedAt)
	pubs, err := s.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionPublish})
	require.NoError(t, err)
	require.Len(t, pubs, 1, "one publish entry despite three marks")
	require.Equal(t, sqlstore.RelayActor.Name, pubs[0].Actor)
	require.Equal(t, done.Service, pubs[0].Service)
	var detail map[string]any
	require.NoError(t, json.Unmarshal(pubs[0].Detail, &detail))
	require.Equal(t, map[string]any{"outbox_id": float64(done.ID), "kind": "approved", "attempts": 1.0}, detail)

	// The other is given up on: the recorded failure, once, as by id.
	got, recorded, err := m.MarkOutboxItemUndeliverable(ctx, failed, tooLarge("host-a/1"))
	require.NoError(t, err)
	require.True(t, recorded)
	want := versioning.OutboxFailure{ID: got.ID, OutboxID: failed.ID, Service: failed.Service, Version: failed.Version,
		Reason: "too_large", Error: tooLarge("").Error, Size: 2000, Limit: 1000, Relay: "host-a/1", At: clk.Now()}
	require.Equal(t, want, got)
	before = auditCount(t, h)
	again, recorded, err := m.MarkOutboxItemUndeliverable(ctx, failed, tooLarge("host-b/2"))
	require.NoError(t, err)
	require.False(t, recorded, "already recorded")
	require.Equal(t, want, again, "the recorded failure, as by id")
	byID, recorded, err := s.MarkOutboxUndeliverable(ctx, failed.ID, tooLarge("host-b/2"))
	require.NoError(t, err)
	require.False(t, recorded)
	require.Equal(t, want, byID)
	require.Equal(t, before, auditCount(t, h))
	entries, err := s.Audit(ctx, versioning.AuditFilter{Action: versioning.ActionUndeliverable})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, sqlstore.RelayActor.Name, entries[0].Actor)
	detail = nil
	require.NoError(t, json.Unmarshal(entries[0].Detail, &detail))
	require.Equal(t, map[string]any{"outbox_id": float64(failed.ID), "failure_id": float64(got.ID), "reason": "too_large",
		"error": want.Error, "size": 2000.0, "limit": 1000.0, "relay": "host-a/1", "attempts": 1.0}, detail)

	// A published row is not given up on afterwards, as by id.
	fl, recorded, err := m.MarkOutboxItemUndeliverable(ctx, done, tooLarge("host-a/1"))
	require.NoError(t, err)
	require.False(t, recorded)
	require.Zero(t, fl)

	// Marked rows are still refused under another identity.
	for name, other := range others(done, failed) {
		require.ErrorIs(t, m.MarkOutboxItemDone(ctx, other), versioning.ErrNotFound, name)
	}
	rep, err := s.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Equal(t, auditCount(t, h), rep.Entries)
}

// testOutboxItemMarkAfterRestore: after the database was restored, the id a
// relay holds names a row of another version (here: the row of its id now
// holds version 2 of the service, as a restored sequence hands the id out
// again). Marking the held item is refused with ErrNotFound, and the row
// of that id is neither published nor given up on.
func testOutboxItemMarkAfterRestore(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	m, ok := s.(itemMarker)
	require.True(t, ok, "%T must mark outbox rows by item", s)
	live(t, s, "restored", 1)
	items, err := s.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, items, 1)
	held := items[0]
	v2 := propose(t, s, "restored", 1, 2)
	require.NoError(t, h.Exec(ctx, `UPDATE rule_outbox SET version = $1, checksum = $2 WHERE id = $3`,
		v2.Number, v2.Checksum, held.ID))

	before := auditCount(t, h)
	require.ErrorIs(t, m.MarkOutboxItemDone(ctx, held), versioning.ErrNotFound)
	_, recorded, err := m.MarkOutboxItemUndeliverable(ctx, held, tooLarge("host-a/1"))
	require.ErrorIs(t, err, versioning.ErrNotFound)
	require.False(t, recorded)
	require.Equal(t, before, auditCount(t, h))
	require.Equal(t, int64(1), h.Count(ctx, `SELECT count(*) FROM rule_outbox
		WHERE id = $1 AND published_at IS NULL AND failed_at IS NULL`, held.ID), "the row of the id is untouched")
	for _, n := range []int64{1, v2.Number} {
		v, err := s.Get(ctx, "restored", n)
		require.NoError(t, err)
		require.True(t, v.PublishedAt.IsZero(), "version %d is not published", n)
	}
}
