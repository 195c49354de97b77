package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
)

// writes counts what a refused write must not have added.
func writes(t *testing.T, h Harness) [3]int64 {
	t.Helper()
	ctx := context.Background()
	return [3]int64{h.Count(ctx, `SELECT count(*) FROM rule_versions`), auditCount(t, h),
		h.Count(ctx, `SELECT count(*) FROM rule_outbox`)}
}

func testRollbackFrom(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	for i := 1; i <= 3; i++ {
		live(t, s, "pay", float64(i))
	}

	// Decided against v3, which is still active: rolled back.
	r, err := s.RollbackFrom(ctx, "pay", 3, 1, alice, "v3 is slower")
	require.NoError(t, err)
	require.Equal(t, int64(4), r.Number)
	require.Equal(t, int64(3), r.Parent)
	require.Equal(t, int64(1), r.RollbackOf)
	require.Equal(t, versioning.SourceRollback, r.Source)
	require.True(t, r.Active)
	require.Equal(t, int64(1), outboxCount(t, h, "pay", 4))

	// Decided against v3 again, but v4 is active now: refused, nothing
	// written.
	before := writes(t, h)
	_, err = s.RollbackFrom(ctx, "pay", 3, 2, carol, "v3 is slower")
	require.ErrorIs(t, err, versioning.ErrConflict)
	var ce *versioning.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, versioning.ConflictError{Service: "pay", Action: "roll back pay to version 2", Expected: 3, Active: 4}, *ce)
	require.EqualError(t, err, "versioning: conflict: roll back pay to version 2: version 4 is active, not the expected version 3")
	require.Equal(t, before, writes(t, h), "a refused rollback writes no version, audit entry or outbox row")
	a, err := s.Active(ctx, "pay")
	require.NoError(t, err)
	require.Equal(t, int64(4), a.Number)

	// The active version is checked before the target: a stale caller hears
	// about the conflict even when its target is now the active one.
	_, err = s.RollbackFrom(ctx, "pay", 3, 4, carol, "x")
	require.ErrorAs(t, err, &ce)
	_, err = s.RollbackFrom(ctx, "pay", 4, 4, carol, "x")
	require.ErrorIs(t, err, versioning.ErrInvalidState)
	_, err = s.RollbackFrom(ctx, "pay", 4, 9, carol, "x")
	require.ErrorIs(t, err, versioning.ErrNotFound)
	_, err = s.RollbackFrom(ctx, "nope", 1, 1, carol, "x")
	require.ErrorIs(t, err, versioning.ErrNotFound)
	_, err = s.RollbackFrom(ctx, "pay", 4, 1, viewer, "x")
	require.ErrorIs(t, err, versioning.ErrForbidden)
	_, err = s.RollbackFrom(ctx, "pay", 0, 0, carol, " ")
	require.Equal(t, []string{"reason", "from", "to"}, fieldsOf(t, err))
	require.Equal(t, before, writes(t, h))

	// Decided against the active v4: rolled back, its parent v4.
	r, err = s.RollbackFrom(ctx, "pay", 4, 2, carol, "v2 was the good one")
	require.NoError(t, err)
	require.Equal(t, int64(5), r.Number)
	require.Equal(t, int64(4), r.Parent)
	require.Equal(t, int64(2), r.RollbackOf)
	entries, err := s.Audit(ctx, versioning.AuditFilter{Service: "pay", Action: versioning.ActionRollback})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	_, err = s.VerifyAudit(ctx)
	require.NoError(t, err)
}

// testRollbackFromRace: two callers decided against the same active version
// and roll back at once (a person and the guardrail); exactly one rollback
// goes live, the other is refused naming it.
func testRollbackFromRace(t *testing.T, f Factory) {
	ctx := context.Background()
	h := f(t, Options{})
	s := h.Store
	const n = 12
	for i := range n {
		svc := fmt.Sprintf("rb%d", i)
		for rate := 1; rate <= 3; rate++ {
			live(t, s, svc, float64(rate))
		}
	}
	errs := make([][2]error, n)
	won := make([][2]int64, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		svc := fmt.Sprintf("rb%d", i)
		for j, to := range []int64{1, 2} {
			wg.Go(func() {
				<-start
				var v versioning.Version
				v, errs[i][j] = s.RollbackFrom(ctx, svc, 3, to, alice, fmt.Sprintf("back to %d", to))
				won[i][j] = v.Number
			})
		}
	}
	close(start)
	wg.Wait()
	for i := range n {
		svc := fmt.Sprintf("rb%d", i)
		require.Equal(t, int64(4), h.Count(ctx, `SELECT count(*) FROM rule_versions WHERE service = $1`, svc),
			"%s: exactly one rollback was written", svc)
		a, err := s.Active(ctx, svc)
		require.NoError(t, err)
		require.Equal(t, int64(4), a.Number, svc)
		require.Equal(t, int64(3), a.Parent, svc)
		var ok int
		for j := range 2 {
			if errs[i][j] == nil {
				ok++
				require.Equal(t, int64(4), won[i][j], svc)
				continue
			}
			var ce *versioning.ConflictError
			require.ErrorAs(t, errs[i][j], &ce, svc)
			require.Equal(t, int64(3), ce.Expected, svc)
			require.Equal(t, int64(4), ce.Active, svc)
		}
		require.Equal(t, 1, ok, "%s: exactly one caller wins: %v", svc, errs[i])
		require.Equal(t, int64(1), h.Count(ctx, `SELECT count(*) FROM rule_outbox WHERE service = $1 AND kind = 'rollback'`, svc), svc)
	}
	_, err := s.VerifyAudit(ctx)
	require.NoError(t, err)
}
