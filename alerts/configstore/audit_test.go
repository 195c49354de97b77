package configstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/alerts/configstore"
	"governor.dev/governor/internal/sqlitedb"
	"governor.dev/governor/internal/testenv"
	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/postgres"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
)

// shared is a configstore and the rule store on one database, with a
// connection to break it (refuseAudit).
type shared struct {
	cs          *configstore.Store
	rules       versioning.Store
	db          *sql.DB
	refuseAudit string // DDL that makes every insert into rule_audit fail
}

func sharedSQLite(t *testing.T, clk clock.Clock) shared {
	t.Helper()
	path := filepath.Join(t.TempDir(), "g.db")
	rs, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rs.Close() })
	// As the engine opens its ledger pool on the rules store's file.
	db, err := sqlitedb.Open(path, sqlitedb.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	cs, err := configstore.New(context.Background(), db, migrations.SQLite, configstore.Options{Clock: clk})
	require.NoError(t, err)
	return shared{cs: cs, rules: rs, db: db,
		refuseAudit: `CREATE TRIGGER refuse_audit BEFORE INSERT ON rule_audit BEGIN SELECT RAISE(ABORT, 'audit refused'); END`}
}

func sharedPostgres(t *testing.T, clk clock.Clock) shared {
	t.Helper()
	url := testenv.Postgres(t)
	rs, err := postgres.Open(context.Background(), postgres.Options{URL: url, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rs.Close() })
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	cs, err := configstore.New(context.Background(), db, migrations.Postgres, configstore.Options{Clock: clk})
	require.NoError(t, err)
	return shared{cs: cs, rules: rs, db: db, refuseAudit: `CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'audit refused'; END $$;
		CREATE TRIGGER refuse_audit BEFORE INSERT ON rule_audit FOR EACH ROW EXECUTE FUNCTION refuse_audit()`}
}

func TestSaveAuditedSQLite(t *testing.T) { testSaveAudited(t, sharedSQLite) }

func TestSaveAuditedPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL integration test")
	}
	testSaveAudited(t, sharedPostgres)
}

// testSaveAudited: every saved version has its alert_config entry in the
// rule store's audit log, written in the save's transaction, with the
// author's roles; the chain, interleaved with the rule store's own
// entries, still verifies; and when the entry cannot be written the
// version is not saved either.
func testSaveAudited(t *testing.T, open func(*testing.T, clock.Clock) shared) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	s := open(t, clk)
	admin := []versioning.Role{versioning.RoleAdmin}

	v1, err := s.cs.Save(ctx, configstore.SaveRequest{Document: docV1, Author: "ada", Roles: admin, Comment: "first routing"})
	require.NoError(t, err)
	_, err = s.rules.RecordAudit(ctx, versioning.AuditRecord{Actor: versioning.Actor{Name: "bob"}, Action: versioning.ActionLogin})
	require.NoError(t, err)
	clk.Advance(time.Minute)
	v2, err := s.cs.Save(ctx, configstore.SaveRequest{Document: docV1, Base: 1, Author: "bob", Comment: "again"})
	require.NoError(t, err)

	entries, err := s.rules.Audit(ctx, versioning.AuditFilter{Action: configstore.AuditAction})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	for i, tt := range []struct {
		v     configstore.Version
		roles []versioning.Role
	}{{v1, admin}, {v2, []versioning.Role{}}} {
		e := entries[i]
		require.Equal(t, tt.v.Number, e.Version)
		require.Equal(t, tt.v.Author, e.Actor)
		require.Equal(t, tt.roles, e.Roles)
		require.True(t, e.At.Equal(tt.v.CreatedAt), "entry at %v, version created %v", e.At, tt.v.CreatedAt)
		var detail struct {
			Version int64  `json:"version"`
			Comment string `json:"comment"`
		}
		require.NoError(t, json.Unmarshal(e.Detail, &detail))
		require.Equal(t, tt.v.Number, detail.Version)
		require.Equal(t, tt.v.Comment, detail.Comment)
	}
	rep, err := s.rules.VerifyAudit(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), rep.Entries)

	// The audit entry cannot be written: the version is not saved.
	_, err = s.db.ExecContext(ctx, s.refuseAudit)
	require.NoError(t, err)
	_, err = s.cs.Save(ctx, configstore.SaveRequest{Document: docV1, Base: 2, Author: "ada", Comment: "unaudited"})
	require.ErrorContains(t, err, "audit refused")
	latest, err := s.cs.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), latest.Number, "a version was saved without its audit entry")

	// An author the audit log cannot name is refused before anything is written.
	_, err = s.cs.Save(ctx, configstore.SaveRequest{Document: docV1, Base: 2, Author: "a b", Comment: "c"})
	require.ErrorContains(t, err, "author.name")
}
