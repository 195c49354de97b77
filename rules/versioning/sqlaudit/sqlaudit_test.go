package sqlaudit_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlaudit"
	"governor.dev/governor/rules/versioning/sqlite"
)

// TestRecord: an entry recorded in a caller's transaction joins the rule
// store's chain when it commits, and vanishes with a rollback; bad input
// is refused with the field named.
func TestRecord(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "g.db")
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := time.Date(2026, 3, 2, 10, 0, 0, 123456789, time.UTC)
	ada := versioning.Actor{Name: "ada", Roles: []versioning.Role{versioning.RoleAdmin}}
	record := func(r versioning.AuditRecord, commit bool) (versioning.AuditEntry, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		e, err := sqlaudit.Record(ctx, tx, migrations.SQLite, at, r)
		if err == nil && commit {
			err = tx.Commit()
		}
		return e, err
	}
	if _, err := st.RecordAudit(ctx, versioning.AuditRecord{Actor: ada, Action: versioning.ActionLogin}); err != nil {
		t.Fatal(err)
	}
	e, err := record(versioning.AuditRecord{Actor: ada, Action: "alert_config", Version: 3, Detail: []byte(`{"version": 3}`)}, true)
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 2 || !e.At.Equal(at.Truncate(time.Microsecond)) || string(e.Detail) != `{"version":3}` {
		t.Fatalf("entry %+v", e)
	}
	if _, err := record(versioning.AuditRecord{Actor: ada, Action: "alert_config", Version: 4}, false); err != nil {
		t.Fatal(err)
	}
	rep, err := st.VerifyAudit(ctx)
	if err != nil || rep.Entries != 2 || rep.Head != e.Hash {
		t.Fatalf("verify: %+v %v, want 2 entries up to %s", rep, err, e.Hash)
	}

	for _, tt := range []struct {
		r     versioning.AuditRecord
		field string
	}{
		{versioning.AuditRecord{Actor: versioning.Actor{Name: "a b"}, Action: "alert_config"}, "actor.name"},
		{versioning.AuditRecord{Actor: ada, Action: versioning.ActionApprove}, "action"},
		{versioning.AuditRecord{Actor: ada, Action: "Alert Config"}, "action"},
		{versioning.AuditRecord{Actor: ada, Action: "alert_config", Version: -1}, "version"},
		{versioning.AuditRecord{Actor: ada, Action: "alert_config", Detail: []byte(`[1]`)}, "detail"},
	} {
		_, err := record(tt.r, true)
		var ie *versioning.InputError
		if !errors.As(err, &ie) || !errors.Is(err, versioning.ErrInvalid) {
			t.Fatalf("%+v: error %v, want an input error naming %s", tt.r, err, tt.field)
		}
		if len(ie.Errors) == 0 || ie.Errors[0].Field != tt.field {
			t.Fatalf("%+v: error %v does not name %s", tt.r, err, tt.field)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := sqlaudit.Record(ctx, tx, "mysql", at, versioning.AuditRecord{Actor: ada, Action: "alert_config"}); !errors.Is(err, versioning.ErrInvalid) {
		t.Fatalf("unknown dialect: %v", err)
	}
	if _, err := sqlaudit.Record(ctx, nil, migrations.SQLite, at, versioning.AuditRecord{Actor: ada, Action: "alert_config"}); !errors.Is(err, versioning.ErrInvalid) {
		t.Fatalf("nil tx: %v", err)
	}
}
