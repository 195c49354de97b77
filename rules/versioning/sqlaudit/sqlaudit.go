// Package sqlaudit records an entry in the rule store's hash-chained audit
// log (rule_audit) inside a database/sql transaction of another component
// that keeps its own tables in the rules database, so that its change and
// the entry describing it commit together or not at all. The entry is
// appended exactly as the rule store appends its own (the chain head row is
// locked, the hash links to the previous entry), so VerifyAudit keeps
// verifying the chain.
//
// The alerting configuration versions (alerts/configstore) use it.
package sqlaudit

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"governor.dev/governor/migrations"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/internal/sqlstore"
)

// Record appends r, dated at, to the audit chain inside tx, a transaction
// on the rules database of dialect d. r is checked as Auditor.RecordAudit
// checks it (a *versioning.InputError names the field); lifecycle actions
// are refused. The caller commits or rolls back tx.
func Record(ctx context.Context, tx *sql.Tx, d migrations.Dialect, at time.Time, r versioning.AuditRecord) (versioning.AuditEntry, error) {
	var sd sqlstore.Dialect
	switch d {
	case migrations.Postgres:
		sd.ForUpdate = " FOR UPDATE"
	case migrations.SQLite:
		// A write transaction locks the whole database.
	default:
		return versioning.AuditEntry{}, fmt.Errorf("%w: sqlaudit: dialect %q is not supported", versioning.ErrInvalid, d)
	}
	if tx == nil {
		return versioning.AuditEntry{}, fmt.Errorf("%w: sqlaudit: tx is required", versioning.ErrInvalid)
	}
	return sqlstore.RecordAuditTx(ctx, sqlstore.StdTx(tx), sd, at, r)
}
