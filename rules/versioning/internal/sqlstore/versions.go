package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

func fieldErr(field, format string, args ...any) []rules.FieldError {
	return []rules.FieldError{{Field: field, Problem: fmt.Sprintf(format, args...)}}
}

// editors may propose and roll back.
var editors = []versioning.Role{versioning.RoleOperator, versioning.RoleApprover, versioning.RoleAdmin}

func forbidden(a versioning.Actor, action string, need []versioning.Role) error {
	return fmt.Errorf("%w: %s may not %s (needs one of the roles %s)", versioning.ErrForbidden,
		a.Name, action, versioning.JoinRoles(need))
}

// newVersion is a version about to be inserted.
type newVersion struct {
	service    string
	parent     int64
	content    []byte
	checksum   string
	author     string
	source     versioning.Source
	reason     string
	evidence   []byte
	rollbackOf int64
	emergency  bool
}

func (s *Store) insertVersion(ctx context.Context, tx Tx, svc *serviceRow, nv newVersion) (int64, error) {
	n, err := s.nextNumber(ctx, tx, svc)
	if err != nil {
		return 0, err
	}
	var parent, rollbackOf *int64
	if nv.parent > 0 {
		parent = &nv.parent
	}
	if nv.rollbackOf > 0 {
		rollbackOf = &nv.rollbackOf
	}
	var evidence *string
	if len(nv.evidence) > 0 {
		e := string(nv.evidence)
		evidence = &e
	}
	_, err = tx.Exec(ctx, `INSERT INTO rule_versions (service, number, parent, state, content, checksum,
		author, source, reason, evidence, rollback_of, emergency, auto_applied, created_at)
		VALUES ($1, $2, $3, 'proposed', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		svc.name, n, parent, string(nv.content), nv.checksum, nv.author, string(nv.source), nv.reason,
		evidence, rollbackOf, nv.emergency, false, s.now())
	return n, err
}

// prepared is a validated proposal.
type prepared struct {
	p         versioning.Proposal
	canonical []byte
	checksum  string
	evidence  []byte
}

func prepare(p versioning.Proposal) (prepared, error) {
	if err := p.Validate(); err != nil {
		return prepared{}, err
	}
	if p.Service == "" {
		p.Service = p.Ruleset.Service
	}
	if p.Source == "" {
		p.Source = versioning.SourceUser
	}
	c, err := p.Ruleset.Canonical()
	if err != nil {
		return prepared{}, err
	}
	ev, err := versioning.CompactEvidence(p.Evidence)
	if err != nil {
		return prepared{}, err
	}
	return prepared{p: p, canonical: c, checksum: rules.ChecksumOf(c), evidence: ev}, nil
}

// Propose implements versioning.Store.
func (s *Store) Propose(ctx context.Context, p versioning.Proposal) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "propose", func(ctx context.Context) error {
		pp, err := prepare(p)
		if err != nil {
			return err
		}
		p = pp.p
		if !p.Author.Has(editors...) {
			return forbidden(p.Author, "propose rule changes", editors)
		}
		return s.write(ctx, "propose", func(tx Tx) (bool, error) {
			svc, err := s.lockOrCreateService(ctx, tx, p.Service, s.now())
			if err != nil {
				return false, err
			}
			if !p.Rebase && p.BaseVersion != svc.active {
				return false, fmt.Errorf("%w: the proposal is based on version %d of %s but version %d is active; rebase it",
					versioning.ErrConflict, p.BaseVersion, p.Service, svc.active)
			}
			if p.AutoApply && svc.policy.ManualOnly {
				return false, fmt.Errorf("%w: the policy of %s is manual-only: engine proposals need approval",
					versioning.ErrForbidden, p.Service)
			}
			if p.Replaces > 0 {
				_, old, err := s.openProposal(ctx, tx, p.Service, p.Replaces, "replace")
				if err != nil {
					return false, err
				}
				if !versioning.SamePerson(old.v.Author, p.Author.Name) && !p.Author.Has(versioning.RoleAdmin) {
					return false, fmt.Errorf("%w: only the author (%s) or an admin may replace version %d of %s",
						versioning.ErrForbidden, old.v.Author, p.Replaces, p.Service)
				}
			}
			n, err := s.insertVersion(ctx, tx, &svc, newVersion{service: p.Service, parent: svc.active,
				content: pp.canonical, checksum: pp.checksum, author: p.Author.Name, source: p.Source,
				reason: p.Reason, evidence: pp.evidence})
			if err != nil {
				return false, err
			}
			if p.Replaces > 0 {
				if err := s.decide(ctx, tx, p.Service, p.Replaces, versioning.StateWithdrawn, p.Author.Name,
					fmt.Sprintf("replaced by version %d", n)); err != nil {
					return false, err
				}
				if _, err := s.appendAudit(ctx, tx, p.Author, versioning.ActionWithdraw, p.Service, p.Replaces,
					map[string]any{"comment": "replaced", "replaced_by": n}); err != nil {
					return false, err
				}
			}
			if _, err := s.appendAudit(ctx, tx, p.Author, versioning.ActionPropose, p.Service, n, map[string]any{
				"checksum": pp.checksum, "parent": svc.active, "source": p.Source, "reason": p.Reason,
				"auto_apply": p.AutoApply,
			}); err != nil {
				return false, err
			}
			if p.AutoApply {
				if err := s.decide(ctx, tx, p.Service, n, versioning.StateApproved, p.Author.Name, "applied within the engine's bands"); err != nil {
					return false, err
				}
				if _, err := tx.Exec(ctx, `UPDATE rule_versions SET auto_applied = $3 WHERE service = $1 AND number = $2`,
					p.Service, n, true); err != nil {
					return false, err
				}
				if err := s.activate(ctx, tx, &svc, n, pp.canonical, pp.checksum, versioning.OutboxAutoApply,
					p.Author, versioning.ActionAutoApply, map[string]any{"reason": p.Reason}); err != nil {
					return false, err
				}
			}
			out, err = s.reload(ctx, tx, p.Service, n)
			return p.AutoApply, err
		})
	})
	return out, err
}

func (s *Store) reload(ctx context.Context, tx Tx, service string, n int64) (versioning.Version, error) {
	r, err := s.getVersion(ctx, tx, service, n, false)
	if err != nil {
		return versioning.Version{}, err
	}
	return s.complete(ctx, tx, r)
}

// decide closes a proposal with its final state.
func (s *Store) decide(ctx context.Context, tx Tx, service string, n int64, st versioning.State, by, comment string) error {
	_, err := tx.Exec(ctx, `UPDATE rule_versions SET state = $3, decided_at = $4, decided_by = $5,
		decision_comment = $6 WHERE service = $1 AND number = $2`, service, n, string(st), s.now(), by, comment)
	return err
}

// checkDecision validates the common input of approve, reject and withdraw.
func checkDecision(service string, number int64, by versioning.Actor, comment string) error {
	var errs []rules.FieldError
	for _, err := range []error{versioning.ValidateService(service), versioning.ValidateActor("actor", by),
		versioning.ValidateComment("comment", comment)} {
		var ie *versioning.InputError
		if errors.As(err, &ie) {
			errs = append(errs, ie.Errors...)
		}
	}
	if number <= 0 {
		errs = append(errs, fieldErr("number", "must be above 0, got %d", number)...)
	}
	if len(errs) > 0 {
		return &versioning.InputError{Errors: errs}
	}
	return nil
}

// openProposal locks the service and loads a version that must be proposed.
func (s *Store) openProposal(ctx context.Context, tx Tx, service string, number int64, verb string) (serviceRow, versionRow, error) {
	svc, err := s.service(ctx, tx, service, true)
	if err != nil {
		return svc, versionRow{}, err
	}
	v, err := s.getVersion(ctx, tx, service, number, true)
	if err != nil {
		return svc, v, err
	}
	if v.v.State != versioning.StateProposed {
		by := ""
		if v.v.DecidedBy != "" {
			by = " by " + v.v.DecidedBy
		}
		return svc, v, fmt.Errorf("%w: cannot %s version %d of %s: it was already %s%s",
			versioning.ErrInvalidState, verb, number, service, v.v.State, by)
	}
	return svc, v, nil
}

// Approve implements versioning.Store.
func (s *Store) Approve(ctx context.Context, service string, number int64, by versioning.Actor, comment string) (versioning.Version, error) {
	return s.approve(ctx, service, number, false, "", by, comment)
}

// ApproveChecksum implements versioning.Store.
func (s *Store) ApproveChecksum(ctx context.Context, service string, number int64, checksum string, by versioning.Actor, comment string) (versioning.Version, error) {
	return s.approve(ctx, service, number, true, checksum, by, comment)
}

// approve approves a proposal; with reviewed, its ruleset must have checksum.
func (s *Store) approve(ctx context.Context, service string, number int64, reviewed bool, checksum string, by versioning.Actor, comment string) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "approve", func(ctx context.Context) error {
		if err := checkDecision(service, number, by, comment); err != nil {
			return err
		}
		if reviewed && checksum == "" {
			return &versioning.InputError{Errors: fieldErr("checksum", "is required: the checksum of the ruleset the approver reviewed")}
		}
		return s.write(ctx, "approve", func(tx Tx) (bool, error) {
			svc, err := s.service(ctx, tx, service, true)
			if err != nil {
				return false, err
			}
			v, err := s.getVersion(ctx, tx, service, number, true)
			if err != nil {
				return false, err
			}
			if versioning.SamePerson(v.v.Author, by.Name) {
				return false, fmt.Errorf("%w: %s proposed version %d of %s and cannot approve it; another approver must",
					versioning.ErrSelfApproval, by.Name, number, service)
			}
			if !by.Has(svc.policy.ApproverRoles...) {
				return false, forbidden(by, "approve rule changes of "+service, svc.policy.ApproverRoles)
			}
			if _, v, err = s.openProposal(ctx, tx, service, number, "approve"); err != nil {
				return false, err
			}
			if reviewed && checksum != v.v.Checksum {
				return false, fmt.Errorf("%w: version %d of %s was revised since it was reviewed (revision %d, ruleset %s, not %s); review it again",
					versioning.ErrConflict, number, service, v.v.Revision, v.v.Checksum, checksum)
			}
			ap, err := s.approvals(ctx, tx, service, number, number)
			if err != nil {
				return false, err
			}
			if i := slices.IndexFunc(ap[number], func(a versioning.Approval) bool { return versioning.SamePerson(a.Approver, by.Name) }); i >= 0 {
				return false, fmt.Errorf("%w: %s already approved version %d of %s (as %s)",
					versioning.ErrInvalidState, by.Name, number, service, ap[number][i].Approver)
			}
			if v.v.Parent != svc.active {
				return false, fmt.Errorf("%w: version %d of %s was proposed on version %d but version %d went live since; rebase it",
					versioning.ErrConflict, number, service, v.v.Parent, svc.active)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO rule_approvals (service, number, round, approver, comment, at)
				SELECT $1, $2, approval_round, $3, $4, $5 FROM rule_versions WHERE service = $1 AND number = $2`,
				service, number, by.Name, comment, s.now()); err != nil {
				return false, err
			}
			count := len(ap[number]) + 1
			if _, err := s.appendAudit(ctx, tx, by, versioning.ActionApprove, service, number, map[string]any{
				"comment": comment, "approvals": count, "required": svc.policy.ApprovalsRequired,
			}); err != nil {
				return false, err
			}
			live := count >= svc.policy.ApprovalsRequired
			if live {
				if err := s.decide(ctx, tx, service, number, versioning.StateApproved, by.Name, comment); err != nil {
					return false, err
				}
				if err := s.activate(ctx, tx, &svc, number, []byte(v.content), v.v.Checksum, versioning.OutboxApproved,
					by, versioning.ActionActivate, map[string]any{"approvals": count}); err != nil {
					return false, err
				}
			}
			out, err = s.reload(ctx, tx, service, number)
			return live, err
		})
	})
	return out, err
}

// Rebase implements versioning.Store.
func (s *Store) Rebase(ctx context.Context, service string, number int64, by versioning.Actor) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "rebase", func(ctx context.Context) error {
		if err := checkDecision(service, number, by, ""); err != nil {
			return err
		}
		return s.write(ctx, "rebase", func(tx Tx) (bool, error) {
			svc, old, err := s.openProposal(ctx, tx, service, number, "rebase")
			if err != nil {
				return false, err
			}
			if !versioning.SamePerson(old.v.Author, by.Name) && !by.Has(versioning.RoleAdmin) {
				return false, fmt.Errorf("%w: only the author (%s) or an admin may rebase version %d of %s",
					versioning.ErrForbidden, old.v.Author, number, service)
			}
			if !by.Has(editors...) { // a rebase is a new proposal: an author no longer an editor may not make one
				return false, forbidden(by, "rebase rule changes", editors)
			}
			if old.v.Parent == svc.active {
				return false, fmt.Errorf("%w: version %d of %s is already based on the active version %d",
					versioning.ErrInvalidState, number, service, svc.active)
			}
			n, err := s.insertVersion(ctx, tx, &svc, newVersion{service: service, parent: svc.active,
				content: []byte(old.content), checksum: old.v.Checksum, author: old.v.Author, source: old.v.Source,
				reason: old.v.Reason, evidence: old.v.Evidence})
			if err != nil {
				return false, err
			}
			if err := s.decide(ctx, tx, service, number, versioning.StateWithdrawn, by.Name,
				fmt.Sprintf("rebased as version %d", n)); err != nil {
				return false, err
			}
			if _, err := s.appendAudit(ctx, tx, by, versioning.ActionRebase, service, n, map[string]any{
				"rebased_from": number, "old_parent": old.v.Parent, "parent": svc.active, "checksum": old.v.Checksum,
			}); err != nil {
				return false, err
			}
			out, err = s.reload(ctx, tx, service, n)
			return false, err
		})
	})
	return out, err
}

// Revise implements versioning.Store.
func (s *Store) Revise(ctx context.Context, service string, number int64, p versioning.Proposal) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "revise", func(ctx context.Context) error {
		source := p.Source
		var errs []rules.FieldError
		if err := versioning.ValidateService(service); err != nil {
			var ie *versioning.InputError
			if errors.As(err, &ie) {
				errs = append(errs, ie.Errors...)
			}
		}
		if number <= 0 {
			errs = append(errs, fieldErr("number", "must be above 0, got %d", number)...)
		}
		if p.Service != "" && p.Service != service {
			errs = append(errs, fieldErr("service", "%q is not the revised version's service %q", p.Service, service)...)
		}
		if p.AutoApply {
			errs = append(errs, fieldErr("auto_apply", "a revision never applies itself; propose anew instead")...)
		}
		if p.Rebase {
			errs = append(errs, fieldErr("rebase", "a revision keeps the proposal's base; rebase it instead")...)
		}
		if p.Replaces != 0 {
			errs = append(errs, fieldErr("replaces", "a revision replaces nothing, got %d", p.Replaces)...)
		}
		if len(errs) > 0 {
			return &versioning.InputError{Errors: errs}
		}
		p.Service = service
		pp, err := prepare(p)
		if err != nil {
			return err
		}
		p = pp.p
		if !p.Author.Has(editors...) {
			return forbidden(p.Author, "revise rule changes", editors)
		}
		return s.write(ctx, "revise", func(tx Tx) (bool, error) {
			_, old, err := s.openProposal(ctx, tx, service, number, "revise")
			if err != nil {
				return false, err
			}
			if !versioning.SamePerson(old.v.Author, p.Author.Name) {
				return false, fmt.Errorf("%w: only the author (%s) may revise version %d of %s; others propose their own",
					versioning.ErrForbidden, old.v.Author, number, service)
			}
			if source != "" && source != old.v.Source {
				return false, &versioning.InputError{Errors: fieldErr("source",
					"is %s but version %d of %s came from %s; a revision keeps its source", source, number, service, old.v.Source)}
			}
			if p.BaseVersion != old.v.Parent {
				return false, fmt.Errorf("%w: the revision is based on version %d of %s but version %d was proposed on version %d; propose anew",
					versioning.ErrConflict, p.BaseVersion, service, number, old.v.Parent)
			}
			var evidence *string
			if len(pp.evidence) > 0 {
				e := string(pp.evidence)
				evidence = &e
			}
			// A new ruleset starts a new approval round: the approvals given
			// so far stay as history but no longer count.
			changed := pp.checksum != old.v.Checksum
			invalidated := []string{}
			round := 0
			if changed {
				ap, err := s.approvals(ctx, tx, service, number, number)
				if err != nil {
					return false, err
				}
				for _, a := range ap[number] {
					invalidated = append(invalidated, a.Approver)
				}
				round = 1
			}
			n, err := tx.Exec(ctx, `UPDATE rule_versions SET content = $3, checksum = $4, reason = $5, evidence = $6,
				revision = revision + 1, revised_at = $7, approval_round = approval_round + $8
				WHERE service = $1 AND number = $2 AND state = 'proposed'`,
				service, number, string(pp.canonical), pp.checksum, p.Reason, evidence, s.now(), round)
			if err != nil {
				return false, err
			}
			if n != 1 {
				return false, fmt.Errorf("%w: version %d of %s changed while being revised", versioning.ErrConflict, number, service)
			}
			if _, err := s.appendAudit(ctx, tx, p.Author, versioning.ActionRevise, service, number, map[string]any{
				"revision": old.v.Revision + 1, "old_checksum": old.v.Checksum, "checksum": pp.checksum,
				"ruleset_changed": changed, "reason": p.Reason, "approvals_invalidated": invalidated,
			}); err != nil {
				return false, err
			}
			out, err = s.reload(ctx, tx, service, number)
			return false, err
		})
	})
	return out, err
}

// Reject implements versioning.Store.
func (s *Store) Reject(ctx context.Context, service string, number int64, by versioning.Actor, comment string) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "reject", func(ctx context.Context) error {
		if err := checkDecision(service, number, by, comment); err != nil {
			return err
		}
		return s.write(ctx, "reject", func(tx Tx) (bool, error) {
			svc, err := s.service(ctx, tx, service, true)
			if err != nil {
				return false, err
			}
			if !by.Has(svc.policy.ApproverRoles...) {
				return false, forbidden(by, "reject rule changes of "+service, svc.policy.ApproverRoles)
			}
			if _, _, err := s.openProposal(ctx, tx, service, number, "reject"); err != nil {
				return false, err
			}
			if err := s.decide(ctx, tx, service, number, versioning.StateRejected, by.Name, comment); err != nil {
				return false, err
			}
			if _, err := s.appendAudit(ctx, tx, by, versioning.ActionReject, service, number,
				map[string]any{"comment": comment}); err != nil {
				return false, err
			}
			out, err = s.reload(ctx, tx, service, number)
			return false, err
		})
	})
	return out, err
}

// Withdraw implements versioning.Store.
func (s *Store) Withdraw(ctx context.Context, service string, number int64, by versioning.Actor, comment string) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "withdraw", func(ctx context.Context) error {
		if err := checkDecision(service, number, by, comment); err != nil {
			return err
		}
		return s.write(ctx, "withdraw", func(tx Tx) (bool, error) {
			_, v, err := s.openProposal(ctx, tx, service, number, "withdraw")
			if err != nil {
				return false, err
			}
			if !versioning.SamePerson(v.v.Author, by.Name) && !by.Has(versioning.RoleAdmin) {
				return false, fmt.Errorf("%w: only the author (%s) or an admin may withdraw version %d of %s",
					versioning.ErrForbidden, v.v.Author, number, service)
			}
			if err := s.decide(ctx, tx, service, number, versioning.StateWithdrawn, by.Name, comment); err != nil {
				return false, err
			}
			if _, err := s.appendAudit(ctx, tx, by, versioning.ActionWithdraw, service, number,
				map[string]any{"comment": comment}); err != nil {
				return false, err
			}
			out, err = s.reload(ctx, tx, service, number)
			return false, err
		})
	})
	return out, err
}

// Rollback implements versioning.Store.
func (s *Store) Rollback(ctx context.Context, service string, to int64, by versioning.Actor, reason string) (versioning.Version, error) {
	return s.rollback(ctx, service, false, 0, to, by, reason)
}

// RollbackFrom implements versioning.Store.
func (s *Store) RollbackFrom(ctx context.Context, service string, from, to int64, by versioning.Actor, reason string) (versioning.Version, error) {
	return s.rollback(ctx, service, true, from, to, by, reason)
}

// rollback rolls back to version to; with expect, only if from is the
// active version, checked under the service's lock.
func (s *Store) rollback(ctx context.Context, service string, expect bool, from, to int64, by versioning.Actor, reason string) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "rollback", func(ctx context.Context) error {
		var errs []rules.FieldError
		for _, err := range []error{versioning.ValidateService(service), versioning.ValidateActor("actor", by),
			versioning.ValidateReason("reason", reason)} {
			var ie *versioning.InputError
			if errors.As(err, &ie) {
				errs = append(errs, ie.Errors...)
			}
		}
		if expect && from <= 0 {
			errs = append(errs, fieldErr("from", "must be above 0, got %d", from)...)
		}
		if to <= 0 {
			errs = append(errs, fieldErr("to", "must be above 0, got %d", to)...)
		}
		if len(errs) > 0 {
			return &versioning.InputError{Errors: errs}
		}
		if !by.Has(editors...) {
			return forbidden(by, "roll back", editors)
		}
		return s.write(ctx, "rollback", func(tx Tx) (bool, error) {
			svc, err := s.service(ctx, tx, service, true)
			if err != nil {
				return false, err
			}
			if expect && svc.active != from {
				return false, &versioning.ConflictError{Service: service, Expected: from, Active: svc.active,
					Action: fmt.Sprintf("roll back %s to version %d", service, to)}
			}
			target, err := s.getVersion(ctx, tx, service, to, false)
			if err != nil {
				return false, err
			}
			switch {
			case !target.v.State.WentLive():
				return false, fmt.Errorf("%w: version %d of %s never went live (%s); only versions that did can be rolled back to",
					versioning.ErrInvalidState, to, service, target.v.State)
			case to == svc.active:
				return false, fmt.Errorf("%w: version %d of %s is already active", versioning.ErrInvalidState, to, service)
			}
			// A version that went live before a validation it now fails (a
			// limit tightened since, a field the SDK no longer knows) would be
			// refused by the instances mid-incident: it is no rollback target.
			if _, err := rules.Decode([]byte(target.content)); err != nil {
				return false, &versioning.InputError{Errors: fieldErr("to",
					"version %d of %s no longer passes validation (%s); propose a corrected version instead", to, service, err)}
			}
			previous := svc.active
			n, err := s.insertVersion(ctx, tx, &svc, newVersion{service: service, parent: previous,
				content: []byte(target.content), checksum: target.v.Checksum, author: by.Name,
				source: versioning.SourceRollback, reason: reason, rollbackOf: to})
			if err != nil {
				return false, err
			}
			if err := s.decide(ctx, tx, service, n, versioning.StateApproved, by.Name, reason); err != nil {
				return false, err
			}
			if err := s.activate(ctx, tx, &svc, n, []byte(target.content), target.v.Checksum, versioning.OutboxRollback,
				by, versioning.ActionRollback, map[string]any{"reason": reason, "rollback_of": to}); err != nil {
				return false, err
			}
			out, err = s.reload(ctx, tx, service, n)
			return true, err
		})
	})
	return out, err
}

// EmergencyPublish implements versioning.Store.
func (s *Store) EmergencyPublish(ctx context.Context, p versioning.Proposal) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "emergency_publish", func(ctx context.Context) error {
		p.AutoApply = false
		pp, err := prepare(p)
		if err != nil {
			return err
		}
		p = pp.p
		if !p.Author.Has(versioning.RoleAdmin) {
			return forbidden(p.Author, "publish in an emergency", []versioning.Role{versioning.RoleAdmin})
		}
		return s.write(ctx, "emergency_publish", func(tx Tx) (bool, error) {
			svc, err := s.lockOrCreateService(ctx, tx, p.Service, s.now())
			if err != nil {
				return false, err
			}
			previous := svc.active
			n, err := s.insertVersion(ctx, tx, &svc, newVersion{service: p.Service, parent: previous,
				content: pp.canonical, checksum: pp.checksum, author: p.Author.Name, source: p.Source,
				reason: p.Reason, evidence: pp.evidence, emergency: true})
			if err != nil {
				return false, err
			}
			if err := s.decide(ctx, tx, p.Service, n, versioning.StateApproved, p.Author.Name, p.Reason); err != nil {
				return false, err
			}
			if err := s.activate(ctx, tx, &svc, n, pp.canonical, pp.checksum, versioning.OutboxEmergency,
				p.Author, versioning.ActionEmergency, map[string]any{"reason": p.Reason, "break_glass": true}); err != nil {
				return false, err
			}
			out, err = s.reload(ctx, tx, p.Service, n)
			return true, err
		})
	})
	return out, err
}

// SetPolicy implements versioning.Store.
func (s *Store) SetPolicy(ctx context.Context, p versioning.Policy, by versioning.Actor) (versioning.Policy, error) {
	var out versioning.Policy
	err := s.op(ctx, "set_policy", func(ctx context.Context) error {
		p, err := p.Validate()
		if err != nil {
			return err
		}
		if err := versioning.ValidateActor("actor", by); err != nil {
			return err
		}
		if !by.Has(versioning.RoleAdmin) {
			return forbidden(by, "change approval policies", []versioning.Role{versioning.RoleAdmin})
		}
		return s.write(ctx, "set_policy", func(tx Tx) (bool, error) {
			now := s.now()
			svc, err := s.lockOrCreateService(ctx, tx, p.Service, now)
			if err != nil {
				return false, err
			}
			if p.Revision > 0 && p.Revision != svc.policy.Revision {
				stored := "it was never set"
				if svc.policy.Revision > 0 {
					stored = fmt.Sprintf("it is at revision %d (%s at %s)", svc.policy.Revision, svc.policy.UpdatedBy,
						svc.policy.UpdatedAt.Format(time.RFC3339))
				}
				return false, fmt.Errorf("%w: the policy of %s is not at revision %d any more: %s; read it again",
					versioning.ErrConflict, p.Service, p.Revision, stored)
			}
			bandMax, floor, ceiling := bandColumns(p.Band)
			if _, err := tx.Exec(ctx, `UPDATE rule_services SET approvals_required = $2, approver_roles = $3,
				manual_only = $4, policy_updated_at = $5, policy_updated_by = $6, band_max_change_per_hour = $7,
				band_floor = $8, band_ceiling = $9, policy_revision = $10 WHERE name = $1`,
				p.Service, p.ApprovalsRequired, versioning.JoinRoles(p.ApproverRoles), p.ManualOnly, now, by.Name,
				bandMax, floor, ceiling, svc.policy.Revision+1); err != nil {
				return false, err
			}
			p.Revision, p.UpdatedAt, p.UpdatedBy = svc.policy.Revision+1, now, by.Name
			if _, err := s.appendAudit(ctx, tx, by, versioning.ActionPolicy, p.Service, 0, map[string]any{
				"old": policyDetail(svc.policy), "new": policyDetail(p),
			}); err != nil {
				return false, err
			}
			out = p
			return false, nil
		})
	})
	return out, err
}
