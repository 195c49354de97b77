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
//
// Concurrent appends, from other transactions or from the rule store, are
// ordered: on PostgreSQL the chain head row is locked (under repeatable
// read or serializable isolation a concurrent append makes this one fail
// with a serialization error, never fork the chain); on SQLite Record
// first takes the database's write lock, waiting up to the connection's
// busy timeout. A SQLite tx that read before it wrote cannot wait for that
// lock if another connection wrote since: write first (or call Record
// first) in such a transaction.
func Record(ctx context.Context, tx *sql.Tx, d migrations.Dialect, at time.Time, r versioning.AuditRecord) (versioning.AuditEntry, error) {
	var sd sqlstore.Dialect
	switch d {
	case migrations.Postgres:
		sd.ForUpdate = " FOR UPDATE"
	case migrations.SQLite:
		// A write transaction locks the whole database; see below.
	default:
		return versioning.AuditEntry{}, fmt.Errorf("%w: sqlaudit: dialect %q is not supported", versioning.ErrInvalid, d)
	}
	if tx == nil {
		return versioning.AuditEntry{}, fmt.Errorf("%w: sqlaudit: tx is required", versioning.ErrInvalid)
	}
	if d == migrations.SQLite {
		// Take the write lock before reading the chain head. A deferred
		// transaction that reads first cannot become a writer once another
		// connection has written (SQLITE_BUSY at once, the busy timeout
		// does not wait), so concurrent appends failed.
		if _, err := tx.ExecContext(ctx, `UPDATE rule_audit_head SET seq = seq WHERE id = 1`); err != nil {
			return versioning.AuditEntry{}, fmt.Errorf("sqlaudit: lock the chain head: %w", err)
		}
	}
	return sqlstore.RecordAuditTx(ctx, sqlstore.StdTx(tx), sd, at, r)
}
