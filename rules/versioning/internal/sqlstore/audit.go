package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"governor.dev/governor/rules/versioning"
)

// appendAudit adds one entry to the chain inside tx. Locking the head row
// orders appends by commit, so sequence numbers and links never fork.
func (s *Store) appendAudit(ctx context.Context, tx Tx, a versioning.Actor, action versioning.Action,
	service string, version int64, detail any) (versioning.AuditEntry, error) {
	return appendAuditEntry(ctx, tx, s.d.ForUpdate, s.now(), a, action, service, version, detail)
}

// RecordAuditTx appends r to the chain inside tx, a transaction of another
// component on the rules database that must record its change atomically
// with it (rules/versioning/sqlaudit). r is checked as RecordAudit checks
// it; at is the entry's time.
func RecordAuditTx(ctx context.Context, tx Tx, d Dialect, at time.Time, r versioning.AuditRecord) (versioning.AuditEntry, error) {
	detail, err := checkRecord(r)
	if err != nil {
		return versioning.AuditEntry{}, err
	}
	return appendAuditEntry(ctx, tx, d.ForUpdate, at.UTC().Truncate(time.Microsecond), r.Actor, r.Action, r.Service, r.Version, detail)
}

func appendAuditEntry(ctx context.Context, tx Tx, forUpdate string, at time.Time, a versioning.Actor, action versioning.Action,
	service string, version int64, detail any) (versioning.AuditEntry, error) {
	raw, ok := detail.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(detail); err != nil {
			return versioning.AuditEntry{}, fmt.Errorf("audit detail: %w", err)
		}
	}
	e := versioning.AuditEntry{At: at, Actor: a.Name, Roles: a.Roles, Action: action,
		Service: service, Version: version, Detail: raw}
	if e.Roles == nil {
		e.Roles = []versioning.Role{}
	}
	var head int64
	if err := tx.QueryRow(ctx, `SELECT seq, hash FROM rule_audit_head WHERE id = 1`+forUpdate).
		Scan(&head, &e.PrevHash); err != nil {
		return e, fmt.Errorf("audit head: %w", err)
	}
	e.Seq = head + 1
	e.Hash = e.ComputeHash()
	if _, err := tx.Exec(ctx, `INSERT INTO rule_audit (seq, at, actor, roles, action, service, version,
		detail, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		e.Seq, e.At, e.Actor, versioning.JoinRoles(e.Roles), string(e.Action), e.Service, e.Version,
		string(e.Detail), e.PrevHash, e.Hash); err != nil {
		return e, err
	}
	if _, err := tx.Exec(ctx, `UPDATE rule_audit_head SET seq = $1, hash = $2 WHERE id = 1`, e.Seq, e.Hash); err != nil {
		return e, err
	}
	return e, nil
}

const auditColumns = `seq, at, actor, roles, action, service, version, detail, prev_hash, hash`

func scanAudit(r interface{ Scan(...any) error }) (versioning.AuditEntry, error) {
	var e versioning.AuditEntry
	var roles, action, detail string
	if err := r.Scan(&e.Seq, &e.At, &e.Actor, &roles, &action, &e.Service, &e.Version, &detail,
		&e.PrevHash, &e.Hash); err != nil {
		return e, err
	}
	e.At = e.At.UTC()
	e.Roles = versioning.SplitRoles(roles)
	e.Action = versioning.Action(action)
	e.Detail = json.RawMessage(detail)
	return e, nil
}

// Audit implements versioning.Auditor.
func (s *Store) Audit(ctx context.Context, f versioning.AuditFilter) ([]versioning.AuditEntry, error) {
	var out []versioning.AuditEntry
	err := s.op(ctx, "audit", func(ctx context.Context) error {
		if err := f.Validate(); err != nil {
			return err
		}
		limit := f.Limit
		if limit <= 0 {
			limit = 100
		}
		limit = min(limit, 1000)
		var where []string
		var args []any
		add := func(cond string, v any) {
			args = append(args, v)
			where = append(where, fmt.Sprintf(cond, len(args)))
		}
		add("seq > $%d", f.AfterSeq)
		if f.BeforeSeq > 0 {
			add("seq < $%d", f.BeforeSeq)
		}
		if f.Service != "" {
			add("service = $%d", f.Service)
		}
		if f.Actor != "" {
			add("lower(actor) = lower($%d)", f.Actor) // rule_audit_actor_ci (migration 00302): one person, any case
		}
		if f.Action != "" {
			add("action = $%d", string(f.Action))
		}
		order := "seq"
		if f.Newest {
			order = "seq DESC"
		}
		args = append(args, limit)
		q := `SELECT ` + auditColumns + ` FROM rule_audit WHERE ` + strings.Join(where, " AND ") +
			fmt.Sprintf(" ORDER BY %s LIMIT $%d", order, len(args))
		var err error
		out, err = s.auditPage(ctx, q, args...)
		return err
	})
	return out, err
}

func (s *Store) auditPage(ctx context.Context, q string, args ...any) ([]versioning.AuditEntry, error) {
	var out []versioning.AuditEntry
	err := s.db.Read(ctx, func(tx Tx) error {
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanAudit(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

const verifyPage = 1000

// VerifyAudit implements versioning.Auditor. It checks the chain up to the
// head as read at the start, so appends during the walk do not disturb it.
// An entry past that head in the same snapshot was not appended through the
// chain (an append moves the head in the transaction that inserts the
// entry), and Audit would list it as the newest: it is reported too.
// The walk as a whole is bounded by ctx only (a long log takes a while); each
// page read is bounded by the store's timeout.
func (s *Store) VerifyAudit(ctx context.Context) (versioning.AuditReport, error) {
	return s.verifyFrom(ctx, versioning.AuditReport{})
}

// VerifyAuditFrom implements versioning.AuditSpanVerifier: VerifyAudit's
// walk, started after entry from.Entries once that entry is read back and
// found stored with hash from.Head and hashing to it.
func (s *Store) VerifyAuditFrom(ctx context.Context, from versioning.AuditReport) (versioning.AuditReport, error) {
	return s.verifyFrom(ctx, from)
}

func (s *Store) verifyFrom(ctx context.Context, from versioning.AuditReport) (versioning.AuditReport, error) {
	var rep versioning.AuditReport
	err := s.timed(ctx, "verify_audit", func(ctx context.Context) error {
		var headSeq, lastSeq int64
		var headHash string
		if err := s.bounded(ctx, func(ctx context.Context) error {
			return s.db.Read(ctx, func(tx Tx) error {
				// One statement, one snapshot: the head and the log's last entry.
				return tx.QueryRow(ctx, `SELECT h.seq, h.hash, (SELECT coalesce(max(a.seq), 0) FROM rule_audit a)
					FROM rule_audit_head h WHERE h.id = 1`).Scan(&headSeq, &headHash, &lastSeq)
			})
		}); err != nil {
			return err
		}
		if lastSeq > headSeq {
			return &versioning.ChainError{Seq: headSeq + 1, Problem: fmt.Sprintf(
				"entry past the chain head (not chained): the head records %d entries, the log holds entries up to %d", headSeq, lastSeq)}
		}
		seq, hash := int64(0), versioning.GenesisHash
		if from.Entries > 0 {
			if err := s.checkMark(ctx, from, headSeq); err != nil {
				return err
			}
			seq, hash = from.Entries, from.Head
		}
		for seq < headSeq {
			var page []versioning.AuditEntry
			err := s.bounded(ctx, func(ctx context.Context) error {
				var err error
				page, err = s.auditPage(ctx, `SELECT `+auditColumns+` FROM rule_audit
					WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3`, seq, headSeq, verifyPage)
				return err
			})
			if err != nil {
				return err
			}
			if len(page) == 0 {
				return &versioning.ChainError{Seq: seq + 1, Problem: fmt.Sprintf(
					"entry is missing (the chain head records %d entries)", headSeq)}
			}
			if seq, hash, err = versioning.VerifyChain(seq, hash, page); err != nil {
				return err
			}
		}
		if hash != headHash {
			return &versioning.ChainError{Seq: headSeq, Problem: fmt.Sprintf(
				"hash %s differs from the chain head's %s", hash, headHash)}
		}
		rep = versioning.AuditReport{Entries: seq, Head: hash}
		return nil
	})
	return rep, err
}

// checkMark reads back the last entry of a verified prefix: it must still
// be there, below the head, stored with the hash it was verified with, and
// hash to it.
func (s *Store) checkMark(ctx context.Context, from versioning.AuditReport, headSeq int64) error {
	if headSeq < from.Entries {
		return &versioning.ChainError{Seq: headSeq + 1, Problem: fmt.Sprintf(
			"the chain head records %d entries, %d were verified before (entries removed)", headSeq, from.Entries)}
	}
	var page []versioning.AuditEntry
	if err := s.bounded(ctx, func(ctx context.Context) error {
		var err error
		page, err = s.auditPage(ctx, `SELECT `+auditColumns+` FROM rule_audit WHERE seq = $1`, from.Entries)
		return err
	}); err != nil {
		return err
	}
	switch {
	case len(page) == 0:
		return &versioning.ChainError{Seq: from.Entries, Problem: "entry verified before is missing"}
	case page[0].Hash != from.Head:
		return &versioning.ChainError{Seq: from.Entries, Problem: fmt.Sprintf(
			"stored hash %s differs from the %s it was verified with", page[0].Hash, from.Head)}
	}
	if h := page[0].ComputeHash(); h != from.Head {
		return &versioning.ChainError{Seq: from.Entries, Problem: fmt.Sprintf(
			"content does not match its hash (stored %s, computed %s)", from.Head, h)}
	}
	return nil
}

// RecordAudit implements versioning.Auditor.
func (s *Store) RecordAudit(ctx context.Context, r versioning.AuditRecord) (versioning.AuditEntry, error) {
	var out versioning.AuditEntry
	err := s.op(ctx, "record_audit", func(ctx context.Context) error {
		detail, err := checkRecord(r)
		if err != nil {
			return err
		}
		return s.write(ctx, "record_audit", func(tx Tx) (bool, error) {
			var err error
			out, err = s.appendAudit(ctx, tx, r.Actor, r.Action, r.Service, r.Version, detail)
			return false, err
		})
	})
	return out, err
}

// checkRecord checks an entry recorded by another component and returns
// its compact detail.
func checkRecord(r versioning.AuditRecord) ([]byte, error) {
	if err := versioning.ValidateActor("actor", r.Actor); err != nil {
		return nil, err
	}
	switch {
	case !r.Action.WellFormed():
		return nil, &versioning.InputError{Errors: fieldErr("action",
			"must be 1 to 64 lower-case letters, digits, _ or ., starting with a letter, got %q", r.Action)}
	case r.Action.Lifecycle():
		return nil, &versioning.InputError{Errors: fieldErr("action",
			"%q is recorded by the rule store itself", r.Action)}
	}
	if r.Service != "" {
		if err := versioning.ValidateService(r.Service); err != nil {
			return nil, err
		}
	}
	if r.Version < 0 {
		return nil, &versioning.InputError{Errors: fieldErr("version", "must not be negative, got %d", r.Version)}
	}
	return versioning.CompactDetail(r.Detail)
}

var _ versioning.AuditSpanVerifier = (*Store)(nil)
