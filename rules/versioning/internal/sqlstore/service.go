package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"governor.dev/governor/rules/versioning"
)

// serviceRow is a service's counters, active pointer and policy.
type serviceRow struct {
	name   string
	last   int64
	active int64
	policy versioning.Policy
}

func errorsIsNotFound(err error) bool { return errors.Is(err, versioning.ErrNotFound) }

// service reads a service row; lock takes its row lock, which serialises
// every change to one service (numbering, activation, policy). Within a
// transaction the service row is always locked before the audit chain head.
func (s *Store) service(ctx context.Context, tx Tx, name string, lock bool) (serviceRow, error) {
	q := `SELECT name, last_number, active_number, approvals_required, approver_roles, manual_only,
		policy_updated_at, policy_updated_by FROM rule_services WHERE name = $1`
	if lock {
		q += s.d.ForUpdate
	}
	var (
		r         serviceRow
		active    *int64
		roles     string
		updatedAt *time.Time
		updatedBy *string
	)
	err := tx.QueryRow(ctx, q, name).Scan(&r.name, &r.last, &active, &r.policy.ApprovalsRequired, &roles,
		&r.policy.ManualOnly, &updatedAt, &updatedBy)
	if s.noRows(err) {
		return r, fmt.Errorf("%w: service %q has no versions", versioning.ErrNotFound, name)
	}
	if err != nil {
		return r, err
	}
	r.active = deref(active)
	r.policy.Service = name
	r.policy.ApproverRoles = versioning.SplitRoles(roles)
	r.policy.UpdatedAt, r.policy.UpdatedBy = utc(updatedAt), deref(updatedBy)
	return r, nil
}

// lockOrCreateService creates the service row if needed and locks it.
func (s *Store) lockOrCreateService(ctx context.Context, tx Tx, name string, now time.Time) (serviceRow, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO rule_services (name, created_at) VALUES ($1, $2)
		ON CONFLICT (name) DO NOTHING`, name, now); err != nil {
		return serviceRow{}, err
	}
	return s.service(ctx, tx, name, true)
}

// nextNumber takes the service's next version number (the row is locked, so
// numbers are gap-free: a rolled-back transaction takes its number back).
func (s *Store) nextNumber(ctx context.Context, tx Tx, svc *serviceRow) (int64, error) {
	svc.last++
	_, err := tx.Exec(ctx, `UPDATE rule_services SET last_number = $2 WHERE name = $1`, svc.name, svc.last)
	return svc.last, err
}
