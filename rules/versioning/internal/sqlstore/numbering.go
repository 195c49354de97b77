package sqlstore

import (
	"context"
	"errors"
	"math"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

var _ versioning.Numbering = (*Store)(nil)

// RaiseNumbering implements versioning.Numbering. The service row is
// locked like every numbering, so a version proposed concurrently gets
// either a number at most floor before the raise or one above it after.
func (s *Store) RaiseNumbering(ctx context.Context, service string, floor int64, by versioning.Actor, reason string) (int64, bool, error) {
	var (
		last   int64
		raised bool
	)
	err := s.op(ctx, "raise_numbering", func(ctx context.Context) error {
		if err := checkRaise(service, floor, by, reason); err != nil {
			return err
		}
		return s.write(ctx, "raise_numbering", func(tx Tx) (bool, error) {
			raised = false
			svc, err := s.lockOrCreateService(ctx, tx, service, s.now())
			if err != nil {
				return false, err
			}
			last = svc.last
			if svc.last >= floor {
				return false, nil
			}
			if _, err := tx.Exec(ctx, `UPDATE rule_services SET last_number = $2 WHERE name = $1`, service, floor); err != nil {
				return false, err
			}
			if _, err := s.appendAudit(ctx, tx, by, versioning.ActionRenumber, service, 0,
				map[string]any{"from": svc.last, "to": floor, "reason": reason}); err != nil {
				return false, err
			}
			last, raised = floor, true
			return false, nil
		})
	})
	if err != nil {
		return 0, false, err
	}
	return last, raised, nil
}

// checkRaise checks RaiseNumbering's arguments, naming each bad one.
func checkRaise(service string, floor int64, by versioning.Actor, reason string) error {
	var errs []rules.FieldError
	for _, err := range []error{versioning.ValidateService(service), versioning.ValidateActor("actor", by),
		versioning.ValidateReason("reason", reason)} {
		var ie *versioning.InputError
		if errors.As(err, &ie) {
			errs = append(errs, ie.Errors...)
		}
	}
	if floor < 1 || floor == math.MaxInt64 {
		errs = append(errs, fieldErr("floor", "must be a version number from 1 to %d, got %d", int64(math.MaxInt64-1), floor)...)
	}
	if len(errs) > 0 {
		return &versioning.InputError{Errors: errs}
	}
	return nil
}
