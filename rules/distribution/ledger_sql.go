package distribution

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"governor.dev/governor/sdk/watch"
)

// SQLStore is a LedgerStore on the rules database: PostgreSQL (through pgx's
// database/sql adapter) or SQLite (modernc.org/sqlite). The tables come from
// migrations 00200-00299 of package governor.dev/governor/migrations, which
// must have been applied (the rules stores apply them when they open).
type SQLStore struct {
	db *sql.DB
}

var _ LedgerBatchStore = (*SQLStore)(nil)

// NewSQLStore returns a store on db.
func NewSQLStore(db *sql.DB) *SQLStore { return &SQLStore{db: db} }

// Target implements LedgerStore.
func (s *SQLStore) Target(ctx context.Context, service string) (Target, bool, error) {
	var (
		t                  = Target{Service: service}
		stableAt, canaryAt sql.NullTime
		selector           sql.NullString
	)
	err := s.db.QueryRowContext(ctx, `SELECT stable_version, stable_at, canary_version, canary_at, selector
		FROM delivery_targets WHERE service = $1`, service).
		Scan(&t.Stable, &stableAt, &t.Canary, &canaryAt, &selector)
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("ledger: target of %s: %w", service, err)
	}
	t.StableAt, t.CanaryAt = stableAt.Time, canaryAt.Time
	if selector.Valid && selector.String != "" {
		var sel watch.Selector
		if err := json.Unmarshal([]byte(selector.String), &sel); err != nil {
			return t, false, fmt.Errorf("ledger: selector of %s: %w", service, err)
		}
		t.Selector = &sel
	}
	return t, true, nil
}

// SetTarget implements LedgerStore: an insert that does nothing if the
// service has a target (prev nil), or an update of the row only while every
// column still holds prev's value.
func (s *SQLStore) SetTarget(ctx context.Context, prev *Target, t Target) error {
	selector, err := selectorColumn(t.Selector)
	if err != nil {
		return err
	}
	var res sql.Result
	if prev == nil {
		res, err = s.db.ExecContext(ctx, `INSERT INTO delivery_targets
			(service, stable_version, stable_at, canary_version, canary_at, selector)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (service) DO NOTHING`,
			t.Service, t.Stable, nullTime(t.StableAt), t.Canary, nullTime(t.CanaryAt), selector)
	} else {
		var was sql.NullString
		if was, err = selectorColumn(prev.Selector); err != nil {
			return err
		}
		res, err = s.db.ExecContext(ctx, `UPDATE delivery_targets SET stable_version = $2, stable_at = $3,
			canary_version = $4, canary_at = $5, selector = $6
			WHERE service = $1 AND stable_version = $7 AND stable_at IS NOT DISTINCT FROM $8
				AND canary_version = $9 AND canary_at IS NOT DISTINCT FROM $10 AND COALESCE(selector, '') = $11`,
			t.Service, t.Stable, nullTime(t.StableAt), t.Canary, nullTime(t.CanaryAt), selector,
			prev.Stable, nullTime(prev.StableAt), prev.Canary, nullTime(prev.CanaryAt), was.String)
	}
	if err != nil {
		return fmt.Errorf("ledger: set target of %s: %w", t.Service, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("ledger: set target of %s: %w", t.Service, err)
	} else if n == 0 {
		return fmt.Errorf("%w: target of %s", ErrChanged, t.Service)
	}
	return nil
}

// selectorColumn encodes a selector for the selector column (NULL for none).
func selectorColumn(sel *watch.Selector) (sql.NullString, error) {
	if sel == nil {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(sel)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("ledger: selector: %w", err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// labelsColumn encodes an instance's labels for the labels column.
func labelsColumn(labels map[string]string) (string, error) {
	if len(labels) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return "", fmt.Errorf("ledger: labels: %w", err)
	}
	return string(b), nil
}

const instanceColumns = `service, instance, labels, running_version, target_version, state, state_since,
	last_seen, heartbeat_ms, ack_version, nack_version, nack_reason, nack_error, nack_at, message_at`

type scanner interface{ Scan(...any) error }

func scanInstance(r scanner) (Instance, error) {
	var (
		in                Instance
		labels            string
		nackAt, messageAt sql.NullTime
	)
	err := r.Scan(&in.Service, &in.Instance, &labels, &in.Running, &in.Target, &in.State, &in.Since,
		&in.LastSeen, &in.HeartbeatMS, &in.AckVersion, &in.NackVersion, &in.NackReason, &in.NackError, &nackAt,
		&messageAt)
	if err != nil {
		return in, err
	}
	in.NackAt, in.MessageAt = nackAt.Time, messageAt.Time
	if labels != "" && labels != "{}" {
		if err := json.Unmarshal([]byte(labels), &in.Labels); err != nil {
			return in, fmt.Errorf("labels: %w", err)
		}
	}
	return in, nil
}

// Instance implements LedgerStore.
func (s *SQLStore) Instance(ctx context.Context, service, instance string) (Instance, bool, error) {
	in, err := scanInstance(s.db.QueryRowContext(ctx, `SELECT `+instanceColumns+`
		FROM delivery_instances WHERE service = $1 AND instance = $2`, service, instance))
	if errors.Is(err, sql.ErrNoRows) {
		return Instance{}, false, nil
	}
	if err != nil {
		return Instance{}, false, fmt.Errorf("ledger: instance %s/%s: %w", service, instance, err)
	}
	return in, true, nil
}

// Instances implements LedgerStore.
func (s *SQLStore) Instances(ctx context.Context, service string) ([]Instance, error) {
	q := `SELECT ` + instanceColumns + ` FROM delivery_instances`
	var args []any
	if service != "" {
		q += ` WHERE service = $1`
		args = append(args, service)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY service, instance`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: instances: %w", err)
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: instances: %w", err)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: instances: %w", err)
	}
	return out, nil
}

// SaveInstance implements LedgerStore: an insert that does nothing if the
// instance is known (prev nil), or an update of the row only while every
// column still holds prev's value; the transition in the same transaction.
func (s *SQLStore) SaveInstance(ctx context.Context, prev *Instance, in Instance, tr *Transition) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := saveInstance(ctx, tx, prev, in, tr); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: commit: %w", err)
	}
	return nil
}

// InstancesOf implements LedgerBatchStore: one query per 256 keys.
func (s *SQLStore) InstancesOf(ctx context.Context, keys []InstanceKey) (map[InstanceKey]Instance, error) {
	const chunk = 256
	out := make(map[InstanceKey]Instance, len(keys))
	for len(keys) > 0 {
		part := keys[:min(chunk, len(keys))]
		keys = keys[len(part):]
		var q strings.Builder
		q.WriteString(`SELECT ` + instanceColumns + ` FROM delivery_instances WHERE (service, instance) IN (VALUES `)
		args := make([]any, 0, 2*len(part))
		for i, k := range part {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "($%d, $%d)", 2*i+1, 2*i+2)
			args = append(args, k.Service, k.Instance)
		}
		q.WriteString(`)`)
		if err := s.scanInstances(ctx, out, q.String(), args); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *SQLStore) scanInstances(ctx context.Context, into map[InstanceKey]Instance, q string, args []any) error {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("ledger: instances: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return fmt.Errorf("ledger: instances: %w", err)
		}
		into[InstanceKey{in.Service, in.Instance}] = in
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: instances: %w", err)
	}
	return nil
}

// SaveInstances implements LedgerBatchStore: the statements of
// SaveInstance for every save, in one transaction.
func (s *SQLStore) SaveInstances(ctx context.Context, saves []InstanceSave) ([]error, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("ledger: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	errs := make([]error, len(saves))
	for i, sv := range saves {
		err := saveInstance(ctx, tx, sv.Prev, sv.In, sv.Transition)
		if errors.Is(err, ErrChanged) {
			errs[i] = err
			continue
		}
		if err != nil {
			return nil, &SaveError{Index: i, Err: err}
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("ledger: commit: %w", err)
	}
	return errs, nil
}

// saveInstance writes an instance (and the transition) in tx if its row
// is still prev, and fails with ErrChanged otherwise (having written
// nothing).
func saveInstance(ctx context.Context, tx *sql.Tx, prev *Instance, in Instance, tr *Transition) error {
	labels, err := labelsColumn(in.Labels)
	if err != nil {
		return err
	}
	args := []any{in.Service, in.Instance, labels, in.Running, in.Target, string(in.State), in.Since.UTC(),
		in.LastSeen.UTC(), in.HeartbeatMS, in.AckVersion, in.NackVersion, in.NackReason, in.NackError, nullTime(in.NackAt),
		nullTime(in.MessageAt)}
	var res sql.Result
	if prev == nil {
		res, err = tx.ExecContext(ctx, `INSERT INTO delivery_instances (`+instanceColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
			ON CONFLICT (service, instance) DO NOTHING`, args...)
	} else {
		was, lerr := labelsColumn(prev.Labels)
		if lerr != nil {
			return lerr
		}
		args = append(args, was, prev.Running, prev.Target, string(prev.State), prev.Since.UTC(), prev.LastSeen.UTC(),
			prev.HeartbeatMS, prev.AckVersion, prev.NackVersion, prev.NackReason, prev.NackError, nullTime(prev.NackAt),
			nullTime(prev.MessageAt))
		res, err = tx.ExecContext(ctx, `UPDATE delivery_instances SET labels = $3, running_version = $4,
			target_version = $5, state = $6, state_since = $7, last_seen = $8, heartbeat_ms = $9, ack_version = $10,
			nack_version = $11, nack_reason = $12, nack_error = $13, nack_at = $14, message_at = $15
			WHERE service = $1 AND instance = $2 AND `+instanceUnchanged(16), args...)
	}
	if err != nil {
		return fmt.Errorf("ledger: save instance %s/%s: %w", in.Service, in.Instance, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("ledger: save instance %s/%s: %w", in.Service, in.Instance, err)
	} else if n == 0 {
		return fmt.Errorf("%w: instance %s/%s", ErrChanged, in.Service, in.Instance)
	}
	if tr != nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO delivery_transitions
			(service, instance, from_state, to_state, target_version, running_version, detail, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			tr.Service, tr.Instance, string(tr.From), string(tr.To), tr.Target, tr.Running, tr.Detail, tr.At.UTC())
		if err != nil {
			return fmt.Errorf("ledger: transition of %s/%s: %w", in.Service, in.Instance, err)
		}
	}
	return nil
}

// instanceUnchanged is the condition that a delivery_instances row still
// holds the record whose columns after service and instance are the
// arguments from $first on, in the order of instanceColumns.
func instanceUnchanged(first int) string {
	cond := `labels = $%d AND running_version = $%d AND target_version = $%d AND state = $%d AND state_since = $%d
		AND last_seen = $%d AND heartbeat_ms = $%d AND ack_version = $%d AND nack_version = $%d AND nack_reason = $%d
		AND nack_error = $%d AND nack_at IS NOT DISTINCT FROM $%d AND message_at IS NOT DISTINCT FROM $%d`
	n := make([]any, 13)
	for i := range n {
		n[i] = first + i
	}
	return fmt.Sprintf(cond, n...)
}

// DeleteInstance implements LedgerStore: a delete of the row only while
// every column still holds prev's value.
func (s *SQLStore) DeleteInstance(ctx context.Context, prev Instance) error {
	labels, err := labelsColumn(prev.Labels)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM delivery_instances WHERE service = $1 AND instance = $2 AND `+
		instanceUnchanged(3), prev.Service, prev.Instance, labels, prev.Running, prev.Target, string(prev.State),
		prev.Since.UTC(), prev.LastSeen.UTC(), prev.HeartbeatMS, prev.AckVersion, prev.NackVersion, prev.NackReason,
		prev.NackError, nullTime(prev.NackAt), nullTime(prev.MessageAt))
	if err != nil {
		return fmt.Errorf("ledger: delete instance %s/%s: %w", prev.Service, prev.Instance, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("ledger: delete instance %s/%s: %w", prev.Service, prev.Instance, err)
	} else if n == 0 {
		return fmt.Errorf("%w: instance %s/%s", ErrChanged, prev.Service, prev.Instance)
	}
	return nil
}

// Transitions implements LedgerStore.
func (s *SQLStore) Transitions(ctx context.Context, service, instance string, limit int) ([]Transition, error) {
	q := `SELECT service, instance, from_state, to_state, target_version, running_version, detail, at
		FROM delivery_transitions WHERE service = $1`
	args := []any{service}
	if instance != "" {
		q += ` AND instance = $2`
		args = append(args, instance)
	}
	q += ` ORDER BY id DESC`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: transitions: %w", err)
	}
	defer rows.Close()
	var out []Transition
	for rows.Next() {
		var tr Transition
		if err := rows.Scan(&tr.Service, &tr.Instance, &tr.From, &tr.To, &tr.Target, &tr.Running, &tr.Detail, &tr.At); err != nil {
			return nil, fmt.Errorf("ledger: transitions: %w", err)
		}
		out = append(out, tr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: transitions: %w", err)
	}
	return out, nil
}

// PruneTransitions implements LedgerStore: one statement, so each batch
// is its own short transaction.
func (s *SQLStore) PruneTransitions(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM delivery_transitions WHERE id IN (
		SELECT t.id FROM delivery_transitions t
		WHERE t.at < $1 AND NOT EXISTS (
			SELECT 1 FROM delivery_instances i
			WHERE i.service = t.service AND i.instance = t.instance AND NOT EXISTS (
				SELECT 1 FROM delivery_transitions n
				WHERE n.service = t.service AND n.instance = t.instance AND n.id > t.id))
		ORDER BY t.at, t.id LIMIT $2)`, before.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("ledger: prune transitions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("ledger: prune transitions: %w", err)
	}
	return int(n), nil
}

func nullTime(t time.Time) sql.NullTime {
	if t.IsZero() {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: t.UTC(), Valid: true}
}
