package conformance

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
)

// ConsistentReads checks that a read returns a version together with the
// approvals of that very state. reader is the store under test; arm makes
// its next read of approvals run fn first, between the read of the version
// and the read of its approvals (a hook the caller puts into the store's
// database adapter). writer is a second store on the same database whose
// changes fn makes, as another process would.
//
// The scenario: alice's proposal X has bob's approval (one of two). While a
// reader is between its two reads, alice revises the proposal to Y, which
// starts a new approval round, and carol approves Y. The reader must see X
// approved by bob or Y approved by carol, never X approved by carol, who
// never saw X.
func ConsistentReads(t *testing.T, reader, writer versioning.Store, arm func(fn func())) {
	reads := []struct {
		name string
		read func(ctx context.Context, service string) (versioning.Version, error)
	}{
		{"get", func(ctx context.Context, service string) (versioning.Version, error) {
			return reader.Get(ctx, service, 1)
		}},
		{"list", func(ctx context.Context, service string) (versioning.Version, error) {
			vs, err := reader.List(ctx, versioning.ListFilter{Service: service})
			if err != nil || len(vs) != 1 {
				return versioning.Version{}, err
			}
			return vs[0], nil
		}},
	}
	for _, tt := range reads {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			svc := "snap-" + tt.name
			_, err := writer.SetPolicy(ctx, versioning.Policy{Service: svc, ApprovalsRequired: 2}, root)
			require.NoError(t, err)
			x := propose(t, writer, svc, 0, 100)
			_, err = writer.Approve(ctx, svc, x.Number, bob, "x is fine")
			require.NoError(t, err)

			var y versioning.Version
			fired := false
			arm(func() {
				fired = true
				y, err = writer.Revise(ctx, svc, x.Number, versioning.Proposal{Ruleset: ruleset(svc, 200),
					Author: alice, Reason: "y instead"})
				require.NoError(t, err)
				y, err = writer.Approve(ctx, svc, x.Number, carol, "y is fine")
				require.NoError(t, err)
			})
			got, err := tt.read(ctx, svc)
			require.NoError(t, err)
			require.True(t, fired, "the hook between the reads did not run")
			require.NotEqual(t, x.Checksum, y.Checksum)
			approvers := make([]string, len(got.Approvals))
			for i, a := range got.Approvals {
				approvers[i] = a.Approver
			}
			switch got.Checksum {
			case x.Checksum:
				require.Equal(t, []string{"bob"}, approvers, "ruleset X shown with the approvals of Y")
				require.Equal(t, 0, got.Revision)
			case y.Checksum:
				require.Equal(t, []string{"carol"}, approvers, "ruleset Y shown with the approvals of X")
				require.Equal(t, 1, got.Revision)
			default:
				t.Fatalf("checksum %s is neither X's nor Y's", got.Checksum)
			}
		})
	}
}

// BetweenReads wraps a store's database adapter for ConsistentReads: an
// armed hook runs once, just before the next read of approvals, that is
// after the read of the version they belong to.
type BetweenReads struct {
	sqlstore.DB
	mu   sync.Mutex
	hook func()
}

// Arm makes the next read of approvals run fn first.
func (b *BetweenReads) Arm(fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = fn
}

// Read implements sqlstore.DB.
func (b *BetweenReads) Read(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return b.DB.Read(ctx, func(tx sqlstore.Tx) error { return fn(hookedTx{tx, b}) })
}

// Snapshot implements sqlstore.DB.
func (b *BetweenReads) Snapshot(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return b.DB.Snapshot(ctx, func(tx sqlstore.Tx) error { return fn(hookedTx{tx, b}) })
}

type hookedTx struct {
	sqlstore.Tx
	b *BetweenReads
}

func (t hookedTx) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	if strings.Contains(q, "FROM rule_approvals") {
		t.b.mu.Lock()
		fn := t.b.hook
		t.b.hook = nil
		t.b.mu.Unlock()
		if fn != nil {
			fn()
		}
	}
	return t.Tx.Query(ctx, q, args...)
}
