package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/rules/versioning/internal/conformance"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
)

// betweenReads wraps the store's database adapter: an armed hook runs
// once, just before the next read of approvals, i.e. after the read of the
// version they belong to.
type betweenReads struct {
	sqlstore.DB
	mu   sync.Mutex
	hook func()
}

func (b *betweenReads) arm(fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = fn
}

func (b *betweenReads) Read(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return b.DB.Read(ctx, func(tx sqlstore.Tx) error { return fn(hookedTx{tx, b}) })
}

func (b *betweenReads) Snapshot(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return b.DB.Snapshot(ctx, func(tx sqlstore.Tx) error { return fn(hookedTx{tx, b}) })
}

type hookedTx struct {
	sqlstore.Tx
	b *betweenReads
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

// TestReadsSeeAProposalWithItsOwnApprovals: Get and List read a version
// and its approvals in two statements. A revision and a new approval that
// commit between them (from another store on the file, as another process)
// must not show: the reader sees the proposal as it was, with the approvals
// of that ruleset, from the snapshot of one read transaction.
func TestReadsSeeAProposalWithItsOwnApprovals(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rules.db")
	writer, err := Open(ctx, Options{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = writer.Close() })
	sdb, err := sqlitedb.Open(path, sqlitedb.Options{ForeignKeys: true})
	require.NoError(t, err)
	hooked := &betweenReads{DB: &db{sdb}}
	reader, err := sqlstore.New(hooked, dialect(), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reader.Close() })
	conformance.ConsistentReads(t, reader, writer, hooked.arm)
}
