package sqlstore

import (
	"context"
	"fmt"
	"time"

	"governor.dev/governor/rules/versioning"
)

const failureColumns = `id, outbox_id, service, version, reason, error, size, max_size, relay, failed_at,
	superseded_by, superseded_at, requeued_at, requeued_by`

func scanFailure(r interface{ Scan(...any) error }) (versioning.OutboxFailure, error) {
	var f versioning.OutboxFailure
	var size, limit int64
	var by *int64
	var at, requeuedAt *time.Time
	var requeuedBy *string
	if err := r.Scan(&f.ID, &f.OutboxID, &f.Service, &f.Version, &f.Reason, &f.Error, &size, &limit, &f.Relay,
		&f.At, &by, &at, &requeuedAt, &requeuedBy); err != nil {
		return f, err
	}
	f.Size, f.Limit, f.At = int(size), int(limit), f.At.UTC()
	f.SupersededBy, f.SupersededAt = deref(by), utc(at)
	f.RequeuedAt, f.RequeuedBy = utc(requeuedAt), deref(requeuedBy)
	return f, nil
}

// MarkOutboxUndeliverable implements versioning.Outbox.
func (s *Store) MarkOutboxUndeliverable(ctx context.Context, id int64, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	return s.markOutboxUndeliverable(ctx, outboxRef{id: id}, f)
}

// MarkOutboxItemUndeliverable is MarkOutboxUndeliverable of the row of
// it.ID, only while that row still holds it.Service, it.Version and
// it.Checksum: the row a relay claimed. After the database was restored
// from a backup, the id can name another row; the store then fails with
// versioning.ErrNotFound and records nothing. The check is part of the
// row's locked lookup in the one transaction that records the failure. It
// returns, audits and measures as MarkOutboxUndeliverable (operation
// "mark_outbox_undeliverable"): the recorded failure, and whether this call
// recorded it.
func (s *Store) MarkOutboxItemUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	return s.markOutboxUndeliverable(ctx, itemRef(it), f)
}

func (s *Store) markOutboxUndeliverable(ctx context.Context, ref outboxRef, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	id := ref.id
	var out versioning.OutboxFailure
	var recorded bool
	err := s.op(ctx, "mark_outbox_undeliverable", func(ctx context.Context) error {
		if err := f.Validate(); err != nil {
			return err
		}
		return s.write(ctx, "mark_outbox_undeliverable", func(tx Tx) (bool, error) {
			recorded = false
			service, err := s.lockOutboxService(ctx, tx, ref)
			if err != nil {
				return false, err
			}
			var (
				version           int64
				attempts          int
				published, failed *time.Time
			)
			if err := s.lockOutboxRow(ctx, tx, ref, `version, attempts, published_at, failed_at`,
				&version, &attempts, &published, &failed); err != nil {
				return false, err
			}
			if published != nil || failed != nil {
				if failed != nil {
					out, err = scanFailure(tx.QueryRow(ctx, `SELECT `+failureColumns+` FROM rule_outbox_failures
						WHERE outbox_id = $1 ORDER BY id DESC LIMIT 1`, id))
				}
				return false, err
			}
			now := s.now()
			if _, err := tx.Exec(ctx, `UPDATE rule_outbox SET failed_at = $2 WHERE id = $1`, id, now); err != nil {
				return false, err
			}
			out = versioning.OutboxFailure{OutboxID: id, Service: service, Version: version, Reason: f.Reason,
				Error: f.Error, Size: f.Size, Limit: f.Limit, Relay: f.Relay, At: now}
			if err := tx.QueryRow(ctx, `INSERT INTO rule_outbox_failures (outbox_id, service, version, reason, error,
				size, max_size, relay, failed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
				id, service, version, f.Reason, f.Error, int64(f.Size), int64(f.Limit), f.Relay, now).Scan(&out.ID); err != nil {
				return false, err
			}
			if _, err := s.appendAudit(ctx, tx, RelayActor, versioning.ActionUndeliverable, service, version,
				map[string]any{"outbox_id": id, "failure_id": out.ID, "reason": f.Reason, "error": f.Error,
					"size": f.Size, "limit": f.Limit, "relay": f.Relay, "attempts": attempts}); err != nil {
				return false, err
			}
			recorded = true
			return false, nil
		})
	})
	if err != nil {
		return versioning.OutboxFailure{}, false, err
	}
	return out, recorded, nil
}

// supersedeFailures closes the open failures of versions of service up to
// version (a failed row marked done after all closes its own), in tx, and
// returns those versions, oldest first.
func (s *Store) supersedeFailures(ctx context.Context, tx Tx, service string, version int64, now time.Time) ([]int64, error) {
	rows, err := tx.Query(ctx, `SELECT version FROM rule_outbox_failures
		WHERE service = $1 AND version <= $2 AND superseded_at IS NULL AND requeued_at IS NULL ORDER BY version`, service, version)
	if err != nil {
		return nil, err
	}
	var versions []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		versions = append(versions, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(versions) == 0 {
		return nil, err
	}
	_, err = tx.Exec(ctx, `UPDATE rule_outbox_failures SET superseded_by = $2, superseded_at = $3
		WHERE service = $1 AND version <= $2 AND superseded_at IS NULL AND requeued_at IS NULL`, service, version, now)
	return versions, err
}

// failureWhere is the WHERE clause selecting the failures f matches (all
// but f.Limit), with its arguments numbered from $first.
func failureWhere(f versioning.FailureFilter, first int) (string, []any) {
	q := ` WHERE 1 = 1`
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		q += fmt.Sprintf(cond, first+len(args)-1)
	}
	if !f.History {
		q += ` AND superseded_at IS NULL AND requeued_at IS NULL`
	}
	if f.Service != "" {
		arg(` AND service = $%d`, f.Service)
	}
	if f.Reason != "" {
		arg(` AND reason = $%d`, f.Reason)
	}
	if f.MaxSize > 0 {
		arg(` AND size <= $%d`, int64(f.MaxSize))
	}
	return q, args
}

// OutboxFailures implements versioning.Outbox.
func (s *Store) OutboxFailures(ctx context.Context, f versioning.FailureFilter) ([]versioning.OutboxFailure, error) {
	var out []versioning.OutboxFailure
	err := s.op(ctx, "outbox_failures", func(ctx context.Context) error {
		if err := f.Validate(); err != nil {
			return err
		}
		limit := f.Limit
		if limit == 0 {
			limit = 100
		}
		where, args := failureWhere(f, 2)
		q := `SELECT ` + failureColumns + ` FROM rule_outbox_failures` + where + ` ORDER BY failed_at DESC, id DESC LIMIT $1`
		args = append([]any{limit}, args...)
		return s.db.Read(ctx, func(tx Tx) error {
			out = out[:0]
			rows, err := tx.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				fl, err := scanFailure(rows)
				if err != nil {
					return err
				}
				out = append(out, fl)
			}
			return rows.Err()
		})
	})
	return out, err
}

// CountOutboxFailures implements versioning.Outbox.
func (s *Store) CountOutboxFailures(ctx context.Context, f versioning.FailureFilter) (int, error) {
	var n int64
	err := s.op(ctx, "count_outbox_failures", func(ctx context.Context) error {
		f.Limit = 0 // every match counts
		if err := f.Validate(); err != nil {
			return err
		}
		where, args := failureWhere(f, 1)
		return s.db.Read(ctx, func(tx Tx) error {
			return tx.QueryRow(ctx, `SELECT count(*) FROM rule_outbox_failures`+where, args...).Scan(&n)
		})
	})
	return int(n), err
}

// RequeueOutbox implements versioning.Outbox.
func (s *Store) RequeueOutbox(ctx context.Context, id int64, relay string) (bool, error) {
	var requeued bool
	err := s.op(ctx, "requeue_outbox", func(ctx context.Context) error {
		if err := (versioning.OutboxFailure{Reason: "requeue", Error: "-", Relay: relay}).Validate(); err != nil {
			return err
		}
		return s.write(ctx, "requeue_outbox", func(tx Tx) (bool, error) {
			requeued = false
			ref := outboxRef{id: id}
			service, err := s.lockOutboxService(ctx, tx, ref)
			if err != nil {
				return false, err
			}
			var (
				version           int64
				published, failed *time.Time
			)
			if err := s.lockOutboxRow(ctx, tx, ref, `version, published_at, failed_at`,
				&version, &published, &failed); err != nil {
				return false, err
			}
			if published != nil || failed == nil {
				return false, nil
			}
			now := s.now()
			if _, err := tx.Exec(ctx, `UPDATE rule_outbox SET failed_at = NULL, lease_until = NULL WHERE id = $1`, id); err != nil {
				return false, err
			}
			var failure int64
			err = tx.QueryRow(ctx, `SELECT id FROM rule_outbox_failures
				WHERE outbox_id = $1 AND superseded_at IS NULL AND requeued_at IS NULL`, id).Scan(&failure)
			if err != nil && !s.noRows(err) {
				return false, err
			}
			if failure > 0 {
				if _, err := tx.Exec(ctx, `UPDATE rule_outbox_failures SET requeued_at = $2, requeued_by = $3 WHERE id = $1`,
					failure, now, relay); err != nil {
					return false, err
				}
			}
			if _, err := s.appendAudit(ctx, tx, RelayActor, versioning.ActionRequeue, service, version,
				map[string]any{"outbox_id": id, "failure_id": failure, "relay": relay}); err != nil {
				return false, err
			}
			if s.d.NotifyOutbox != "" {
				if _, err := tx.Exec(ctx, s.d.NotifyOutbox, service); err != nil {
					return false, err
				}
			}
			requeued = true
			return true, nil
		})
	})
	return requeued, err
}
