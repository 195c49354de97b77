package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// relay is a system component raising the numbering, with no role.
var relay = versioning.Actor{Name: "system:outbox-relay"}

// numbering returns the store's versioning.Numbering.
func numbering(t *testing.T, s versioning.Store) versioning.Numbering {
	t.Helper()
	n, ok := s.(versioning.Numbering)
	require.True(t, ok, "%T does not implement versioning.Numbering", s)
	return n
}

// testRaiseNumbering: a store restored to v3 while the bucket holds v5
// numbers its next versions above 5 once the floor is raised, without
// touching the versions it has or the audit chain.
func testRaiseNumbering(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	n := numbering(t, s)
	var before []versioning.Version
	for i := 1; i <= 3; i++ {
		before = append(before, live(t, s, "pay", float64(i)))
	}
	audits := auditCount(t, h)

	last, raised, err := n.RaiseNumbering(ctx, "pay", 5, relay, "the bucket holds version 5")
	require.NoError(t, err)
	require.True(t, raised)
	require.Equal(t, int64(5), last)
	require.Equal(t, audits+1, auditCount(t, h))
	es, err := s.Audit(ctx, versioning.AuditFilter{Service: "pay", Action: versioning.ActionRenumber})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, relay.Name, es[0].Actor)
	require.JSONEq(t, `{"from":3,"to":5,"reason":"the bucket holds version 5"}`, string(es[0].Detail))
	_, err = s.VerifyAudit(ctx)
	require.NoError(t, err)

	// Nothing renumbered: the versions and the active pointer are as they were.
	for _, b := range before {
		got, err := s.Get(ctx, "pay", b.Number)
		require.NoError(t, err)
		require.Equal(t, b.Checksum, got.Checksum)
	}
	a, err := s.Active(ctx, "pay")
	require.NoError(t, err)
	require.Equal(t, int64(3), a.Number)
	svcs, err := s.Services(ctx)
	require.NoError(t, err)
	require.Equal(t, []versioning.ServiceInfo{{Name: "pay", Active: 3, Latest: 3}}, svcs,
		"Latest is the highest version the store has, not the floor")

	// A floor at or below the numbering changes nothing.
	for _, floor := range []int64{5, 4, 1} {
		last, raised, err = n.RaiseNumbering(ctx, "pay", floor, relay, "again")
		require.NoError(t, err)
		require.False(t, raised)
		require.Equal(t, int64(5), last)
	}
	require.Equal(t, audits+1, auditCount(t, h))

	// The next proposal, and a rollback, number above the floor.
	v := live(t, s, "pay", 9)
	require.Equal(t, int64(6), v.Number)
	require.Equal(t, int64(3), v.Parent)
	require.Equal(t, int64(1), outboxCount(t, h, "pay", 6))
	r, err := s.Rollback(ctx, "pay", 2, alice, "back to 2")
	require.NoError(t, err)
	require.Equal(t, int64(7), r.Number)

	// A service the store does not know yet is created with the floor.
	last, raised, err = n.RaiseNumbering(ctx, "cart", 9, relay, "the bucket holds version 9")
	require.NoError(t, err)
	require.True(t, raised)
	require.Equal(t, int64(9), last)
	svcs, err = s.Services(ctx)
	require.NoError(t, err)
	require.Contains(t, svcs, versioning.ServiceInfo{Name: "cart"})
	_, err = s.Active(ctx, "cart")
	require.ErrorIs(t, err, versioning.ErrNotFound)
	require.Equal(t, int64(10), propose(t, s, "cart", 0, 1).Number)
	_, err = s.VerifyAudit(ctx)
	require.NoError(t, err)
}

// testRaiseNumberingBadInput names every bad argument and writes nothing.
func testRaiseNumberingBadInput(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	n := numbering(t, h.Store)
	live(t, h.Store, "pay", 1)
	audits := auditCount(t, h)
	tests := []struct {
		name    string
		service string
		floor   int64
		by      versioning.Actor
		reason  string
		fields  []string
	}{
		{"all bad", "", 0, versioning.Actor{}, " ", []string{"service", "actor.name", "reason", "floor"}},
		{"negative floor", "pay", -1, relay, "x", []string{"floor"}},
		{"floor without a next number", "pay", 1<<63 - 1, relay, "x", []string{"floor"}},
		{"bad role", "pay", 5, versioning.Actor{Name: "x", Roles: []versioning.Role{"root"}}, "x", []string{"actor.roles[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := n.RaiseNumbering(ctx, tt.service, tt.floor, tt.by, tt.reason)
			require.Equal(t, tt.fields, fieldsOf(t, err))
		})
	}
	require.Equal(t, audits, auditCount(t, h))
	require.Equal(t, int64(2), propose(t, h.Store, "pay", 1, 2).Number)

	// Only the store records a renumbering.
	_, err := h.Store.RecordAudit(ctx, versioning.AuditRecord{Actor: root, Action: versioning.ActionRenumber, Service: "pay"})
	require.Equal(t, []string{"action"}, fieldsOf(t, err))
}
