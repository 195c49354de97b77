package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/rules/versioning/internal/conformance"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
)

// TestReadsSeeAProposalWithItsOwnApprovals: Get and List read a version
// and its approvals in two statements. A revision and a new approval that
// commit between them (from another store on the database, as another
// process) must not show: the reader sees the proposal as it was, with the
// approvals of that ruleset, from one REPEATABLE READ snapshot.
func TestReadsSeeAProposalWithItsOwnApprovals(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test: skipped with -short")
	}
	ctx := context.Background()
	url := testenv.Postgres(t)
	writer, err := Open(ctx, Options{URL: url})
	require.NoError(t, err)
	t.Cleanup(func() { _ = writer.Close() })
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	hooked := &conformance.BetweenReads{DB: &db{pool: pool}}
	reader, err := sqlstore.New(hooked, dialect(), sqlstore.Options{})
	require.NoError(t, err)
	conformance.ConsistentReads(t, reader, writer, hooked.Arm)
}
