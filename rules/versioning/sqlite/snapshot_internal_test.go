package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/rules/versioning/internal/conformance"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
)

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
	hooked := &conformance.BetweenReads{DB: &db{sdb}}
	reader, err := sqlstore.New(hooked, dialect(), sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reader.Close() })
	conformance.ConsistentReads(t, reader, writer, hooked.Arm)
}
