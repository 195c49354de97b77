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
// every change to one service (numbering, activation, policy), checks the
// context's fence (see fence) and makes the write check it again as its
// last statement (write). Within a transaction the service row is always
// locked before the audit chain head.
func (s *Store) service(ctx context.Context, tx Tx, name string, lock bool) (serviceRow, error) {
	q := `SELECT name, last_number, active_number, approvals_required, approver_roles, manual_only,
		policy_updated_at, policy_updated_by, band_max_change_per_hour, band_floor, band_ceiling, policy_revision
		FROM rule_services WHERE name = $1`
	if lock {
		q += s.d.ForUpdate
	}
	var (
		r         serviceRow
		active    *int64
		roles     string
		updatedAt *time.Time
		updatedBy *string
		bandMax   *float64
		floor     *float64
		ceiling   *float64
	)
	err := tx.QueryRow(ctx, q, name).Scan(&r.name, &r.last, &active, &r.policy.ApprovalsRequired, &roles,
		&r.policy.ManualOnly, &updatedAt, &updatedBy, &bandMax, &floor, &ceiling, &r.policy.Revision)
	if s.noRows(err) {
		return r, fmt.Errorf("%w: service %q has no versions", versioning.ErrNotFound, name)
	}
	if err != nil {
		return r, err
	}
	if lock {
		if w, ok := tx.(*writeTx); ok {
			w.fenced = true
		}
		if err := s.fence(ctx, tx); err != nil {
			return r, err
		}
	}
	r.active = deref(active)
	r.policy.Service = name
	r.policy.ApproverRoles = versioning.SplitRoles(roles)
	r.policy.UpdatedAt, r.policy.UpdatedBy = utc(updatedAt), deref(updatedBy)
	if bandMax != nil {
		r.policy.Band = &versioning.AutoApplyBand{MaxChangePerHour: *bandMax, Floor: deref(floor), Ceiling: deref(ceiling)}
	}
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

// bandColumns returns the band's stored columns (all nil without a band).
func bandColumns(b *versioning.AutoApplyBand) (maxChange, floor, ceiling *float64) {
	if b == nil {
		return nil, nil, nil
	}
	return &b.MaxChangePerHour, &b.Floor, &b.Ceiling
}

// policyDetail is a policy as an audit entry's detail records it.
func policyDetail(p versioning.Policy) map[string]any {
	var band any
	if p.Band != nil {
		band = map[string]any{"max_change_per_hour": p.Band.MaxChangePerHour, "floor": p.Band.Floor, "ceiling": p.Band.Ceiling}
	}
	return map[string]any{"approvals_required": p.ApprovalsRequired, "approver_roles": p.ApproverRoles,
		"manual_only": p.ManualOnly, "band": band}
}

// fence refuses, with a *versioning.FencedError, a write whose context
// carries a versioning.Fence when a tick later than the fence's has been
// claimed. A write runs it twice in its transaction (one read of the
// ticks' primary key each, only for fenced writes). Once the service row
// is locked, so that a leader that already lost the lead is refused before
// anything else is decided (rather than with whatever the successor's
// changes make of its write). And as the transaction's last statement,
// after every insert and update, just before COMMIT (write): under READ
// COMMITTED each statement reads what committed before it began, and the
// claims take no lock the write holds, so only this one sees a tick
// claimed while the write ran; the error rolls back everything the write
// did. The window that remains is described at versioning.Fence.
func (s *Store) fence(ctx context.Context, tx Tx) error {
	if !s.d.Fences {
		return nil
	}
	f, ok := versioning.FenceOf(ctx)
	if !ok {
		return nil
	}
	var newer time.Time
	var by string
	err := tx.QueryRow(ctx, versioning.NewerTickQuery,
		f.Tick.UTC()).Scan(&newer, &by)
	switch {
	case s.noRows(err):
		return nil
	case err != nil:
		return fmt.Errorf("fence of tick %s: %w", f.Tick.UTC().Format(time.RFC3339Nano), err)
	}
	return &versioning.FencedError{Fence: f, Newer: newer, By: by}
}
