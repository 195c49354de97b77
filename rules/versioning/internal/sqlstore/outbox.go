package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"governor.dev/governor/rules/versioning"
)

// RelayActor is the audit actor of MarkOutboxDone and MarkOutboxUndeliverable.
var RelayActor = versioning.Actor{Name: "system:outbox-relay", Roles: []versioning.Role{}}

// activate makes version n the service's live version: the previous one is
// superseded, the pointer moves, an outbox row with the envelope is written
// and the audit entry recorded, all in tx. The payload is a rules.Envelope
// (the canonical ruleset with its version and checksum).
func (s *Store) activate(ctx context.Context, tx Tx, svc *serviceRow, n int64, canonical []byte, checksum string,
	kind versioning.OutboxKind, by versioning.Actor, action versioning.Action, detail map[string]any) error {
	now := s.now()
	previous := svc.active
	if previous > 0 {
		if _, err := tx.Exec(ctx, `UPDATE rule_versions SET state = 'superseded', superseded_at = $3
			WHERE service = $1 AND number = $2`, svc.name, previous, now); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE rule_versions SET activated_at = $3 WHERE service = $1 AND number = $2`,
		svc.name, n, now); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE rule_services SET active_number = $2 WHERE name = $1`, svc.name, n); err != nil {
		return err
	}
	svc.active = n
	payload, err := json.Marshal(struct {
		Service  string          `json:"service"`
		Version  int64           `json:"version"`
		Checksum string          `json:"checksum"`
		Ruleset  json.RawMessage `json:"ruleset"`
	}{svc.name, n, checksum, canonical})
	if err != nil {
		return err
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO rule_outbox (service, version, kind, checksum, payload, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, svc.name, n, string(kind), checksum, string(payload), now).Scan(&id); err != nil {
		return err
	}
	if s.d.NotifyOutbox != "" {
		if _, err := tx.Exec(ctx, s.d.NotifyOutbox, svc.name); err != nil {
			return err
		}
	}
	if detail == nil {
		detail = map[string]any{}
	}
	detail["checksum"], detail["previous"], detail["outbox_id"] = checksum, previous, id
	_, err = s.appendAudit(ctx, tx, by, action, svc.name, n, detail)
	return err
}

// ClaimOutbox implements versioning.Outbox.
func (s *Store) ClaimOutbox(ctx context.Context, limit int, lease time.Duration) ([]versioning.OutboxItem, error) {
	var out []versioning.OutboxItem
	err := s.op(ctx, "claim_outbox", func(ctx context.Context) error {
		switch {
		case limit < 1 || limit > 1000:
			return &versioning.InputError{Errors: fieldErr("limit", "must be between 1 and 1000, got %d", limit)}
		case lease < time.Millisecond || lease > time.Hour:
			return &versioning.InputError{Errors: fieldErr("lease", "must be between 1ms and 1h, got %s", lease)}
		}
		return s.write(ctx, "claim_outbox", func(tx Tx) (bool, error) {
			out = out[:0]
			now := s.now()
			rows, err := tx.Query(ctx, `UPDATE rule_outbox SET lease_until = $1, attempts = attempts + 1
				WHERE id IN (SELECT id FROM rule_outbox WHERE published_at IS NULL AND failed_at IS NULL
					AND (lease_until IS NULL OR lease_until <= $2) ORDER BY id LIMIT $3`+s.d.SkipLocked+`)
				RETURNING id, service, version, kind, checksum, payload, created_at, attempts, lease_until`,
				now.Add(lease), now, limit)
			if err != nil {
				return false, err
			}
			defer rows.Close()
			for rows.Next() {
				var it versioning.OutboxItem
				var kind, payload string
				if err := rows.Scan(&it.ID, &it.Service, &it.Version, &kind, &it.Checksum, &payload,
					&it.CreatedAt, &it.Attempts, &it.LeaseUntil); err != nil {
					return false, err
				}
				it.Kind, it.Payload = versioning.OutboxKind(kind), json.RawMessage(payload)
				it.CreatedAt, it.LeaseUntil = it.CreatedAt.UTC(), it.LeaseUntil.UTC()
				out = append(out, it)
			}
			return false, rows.Err()
		})
	})
	slices.SortFunc(out, func(a, b versioning.OutboxItem) int { return int(a.ID - b.ID) })
	return out, err
}

// MarkOutboxDone implements versioning.Outbox.
func (s *Store) MarkOutboxDone(ctx context.Context, id int64) error {
	return s.markOutboxDone(ctx, outboxRef{id: id})
}

// MarkOutboxItemDone is MarkOutboxDone of the row of it.ID, only while that
// row still holds it.Service, it.Version and it.Checksum: the row a relay
// claimed. After the database was restored from a backup, the id can name
// another row (ids are given again from the backup's sequence); the store
// then fails with versioning.ErrNotFound and leaves that row untouched.
// The check is part of the row's locked lookup in the one transaction that
// marks it. It is audited and measured as MarkOutboxDone (operation
// "mark_outbox_done").
func (s *Store) MarkOutboxItemDone(ctx context.Context, it versioning.OutboxItem) error {
	return s.markOutboxDone(ctx, itemRef(it))
}

func (s *Store) markOutboxDone(ctx context.Context, ref outboxRef) error {
	return s.op(ctx, "mark_outbox_done", func(ctx context.Context) error {
		return s.write(ctx, "mark_outbox_done", func(tx Tx) (bool, error) {
			service, err := s.lockOutboxService(ctx, tx, ref)
			if err != nil {
				return false, err
			}
			var (
				version   int64
				kind      string
				attempts  int
				published *time.Time
			)
			if err := s.lockOutboxRow(ctx, tx, ref, `version, kind, attempts, published_at`,
				&version, &kind, &attempts, &published); err != nil {
				return false, err
			}
			if published != nil {
				return false, nil
			}
			id := ref.id
			now := s.now()
			if _, err := tx.Exec(ctx, `UPDATE rule_outbox SET published_at = $2 WHERE id = $1`, id, now); err != nil {
				return false, err
			}
			if _, err := tx.Exec(ctx, `UPDATE rule_versions SET published_at = $3,
				state = CASE WHEN state = 'approved' THEN 'published' ELSE state END
				WHERE service = $1 AND number = $2`, service, version, now); err != nil {
				return false, err
			}
			superseded, err := s.supersedeFailures(ctx, tx, service, version, now)
			if err != nil {
				return false, err
			}
			detail := map[string]any{"outbox_id": id, "kind": kind, "attempts": attempts}
			if len(superseded) > 0 {
				detail["supersedes_undeliverable"] = superseded
			}
			_, err = s.appendAudit(ctx, tx, RelayActor, versioning.ActionPublish, service, version, detail)
			return false, err
		})
	})
}

// outboxRef names the outbox row a mark applies to: the row of id, or,
// when item is set, that row only while it still holds the item's service,
// version and checksum (the row a relay claimed).
type outboxRef struct {
	id   int64
	item *versioning.OutboxItem
}

func itemRef(it versioning.OutboxItem) outboxRef { return outboxRef{id: it.ID, item: &it} }

// where is the WHERE clause selecting the row, with its arguments.
func (r outboxRef) where() (string, []any) {
	if r.item == nil {
		return ` WHERE id = $1`, []any{r.id}
	}
	return ` WHERE id = $1 AND service = $2 AND version = $3 AND checksum = $4`,
		[]any{r.id, r.item.Service, r.item.Version, r.item.Checksum}
}

// notFound is the error for a row the outbox does not have (with the
// item's content, when item is set).
func (r outboxRef) notFound() error {
	if r.item == nil {
		return fmt.Errorf("%w: outbox row %d", versioning.ErrNotFound, r.id)
	}
	return fmt.Errorf("%w: outbox row %d with %s v%d %s", versioning.ErrNotFound,
		r.id, r.item.Service, r.item.Version, r.item.Checksum)
}

// lockOutboxService locks the service of the outbox row ref names (the
// service row first, as every writer locks it; callers then lock the row
// itself with lockOutboxRow) and returns its name.
func (s *Store) lockOutboxService(ctx context.Context, tx Tx, ref outboxRef) (string, error) {
	where, args := ref.where()
	var service string
	err := tx.QueryRow(ctx, `SELECT service FROM rule_outbox`+where, args...).Scan(&service)
	if s.noRows(err) {
		return "", ref.notFound()
	}
	if err != nil {
		return "", err
	}
	if _, err := s.service(ctx, tx, service, true); err != nil {
		return "", err
	}
	return service, nil
}

// lockOutboxRow reads columns of the outbox row ref names into dest,
// locking the row (Dialect.ForUpdate). The identity is checked again here,
// on the locked row.
func (s *Store) lockOutboxRow(ctx context.Context, tx Tx, ref outboxRef, columns string, dest ...any) error {
	where, args := ref.where()
	err := tx.QueryRow(ctx, `SELECT `+columns+` FROM rule_outbox`+where+s.d.ForUpdate, args...).Scan(dest...)
	if s.noRows(err) {
		return ref.notFound()
	}
	return err
}
