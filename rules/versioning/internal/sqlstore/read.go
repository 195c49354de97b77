package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/rules"
)

const versionColumns = `v.service, v.number, v.parent, v.state, v.content, v.checksum, v.author, v.source,
	v.reason, v.evidence, v.rollback_of, v.emergency, v.auto_applied, v.created_at, v.decided_at,
	v.decided_by, v.decision_comment, v.activated_at, v.superseded_at, v.published_at, v.revision,
	v.revised_at, s.active_number`

const versionFrom = ` FROM rule_versions v JOIN rule_services s ON s.name = v.service`

// ActiveQuery reads a service's live version: two primary-key lookups
// (rule_services by name, rule_versions by service and number), so its cost
// does not grow with the number of services or versions.
const ActiveQuery = `SELECT ` + versionColumns + versionFrom + ` WHERE s.name = $1 AND v.service = $1
	AND v.number = (SELECT active_number FROM rule_services WHERE name = $1)`

// versionRow is a version as stored; content stays raw until needed.
type versionRow struct {
	v       versioning.Version
	content string
}

func scanVersion(r interface{ Scan(...any) error }) (versionRow, error) {
	var (
		out                                               versionRow
		parent, rollbackOf, active                        *int64
		evidence, decidedBy, comment                      *string
		decidedAt, activatedAt, supersededAt, publishedAt *time.Time
		revisedAt                                         *time.Time
		revision                                          int64
		state, source                                     string
	)
	v := &out.v
	err := r.Scan(&v.Service, &v.Number, &parent, &state, &out.content, &v.Checksum, &v.Author, &source,
		&v.Reason, &evidence, &rollbackOf, &v.Emergency, &v.AutoApplied, &v.CreatedAt, &decidedAt,
		&decidedBy, &comment, &activatedAt, &supersededAt, &publishedAt, &revision, &revisedAt, &active)
	if err != nil {
		return out, err
	}
	v.State, v.Source = versioning.State(state), versioning.Source(source)
	v.Parent, v.RollbackOf = deref(parent), deref(rollbackOf)
	v.Active = active != nil && *active == v.Number
	if evidence != nil {
		v.Evidence = json.RawMessage(*evidence)
	}
	v.DecidedBy, v.DecisionComment = deref(decidedBy), deref(comment)
	v.CreatedAt = v.CreatedAt.UTC()
	v.DecidedAt, v.ActivatedAt = utc(decidedAt), utc(activatedAt)
	v.SupersededAt, v.PublishedAt = utc(supersededAt), utc(publishedAt)
	v.Revision, v.RevisedAt = int(revision), utc(revisedAt)
	return out, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// decode parses stored content. Stored content was validated when written;
// it is decoded leniently so that a later, stricter schema cannot make old
// versions unreadable.
func (r *versionRow) decode() error {
	var rs rules.Ruleset
	if err := json.Unmarshal([]byte(r.content), &rs); err != nil {
		return fmt.Errorf("version %d of %s: stored content: %w", r.v.Number, r.v.Service, err)
	}
	r.v.Ruleset = &rs
	return nil
}

func (s *Store) getVersion(ctx context.Context, tx Tx, service string, number int64, lock bool) (versionRow, error) {
	q := `SELECT ` + versionColumns + versionFrom + ` WHERE v.service = $1 AND v.number = $2`
	if lock {
		q += s.d.ForUpdate
	}
	r, err := scanVersion(tx.QueryRow(ctx, q, service, number))
	if s.noRows(err) {
		return r, fmt.Errorf("%w: version %d of service %q", versioning.ErrNotFound, number, service)
	}
	return r, err
}

// complete decodes the ruleset and loads the approvals of one version.
func (s *Store) complete(ctx context.Context, tx Tx, r versionRow) (versioning.Version, error) {
	if err := r.decode(); err != nil {
		return versioning.Version{}, err
	}
	ap, err := s.approvals(ctx, tx, r.v.Service, r.v.Number, r.v.Number)
	if err != nil {
		return versioning.Version{}, err
	}
	r.v.Approvals = ap[r.v.Number]
	return r.v, nil
}

func (s *Store) approvals(ctx context.Context, tx Tx, service string, from, to int64) (map[int64][]versioning.Approval, error) {
	// Only the current round counts: a revision that changed the ruleset
	// started a new one.
	rows, err := tx.Query(ctx, `SELECT a.number, a.approver, a.comment, a.at FROM rule_approvals a
		JOIN rule_versions v ON v.service = a.service AND v.number = a.number AND v.approval_round = a.round
		WHERE a.service = $1 AND a.number BETWEEN $2 AND $3 ORDER BY a.number, a.at, a.approver`, service, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][]versioning.Approval{}
	for rows.Next() {
		var n int64
		var a versioning.Approval
		if err := rows.Scan(&n, &a.Approver, &a.Comment, &a.At); err != nil {
			return nil, err
		}
		a.At = a.At.UTC()
		out[n] = append(out[n], a)
	}
	return out, rows.Err()
}

func (s *Store) noRows(err error) bool { return err != nil && s.d.NoRows(err) }

// Active implements versioning.Reader.
func (s *Store) Active(ctx context.Context, service string) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "active", func(ctx context.Context) error {
		if err := versioning.ValidateService(service); err != nil {
			return err
		}
		// Two statements outside a snapshot: a version that went live is
		// decided, so the approvals the second reads are those it had when
		// the first read it.
		return s.db.Read(ctx, func(tx Tx) error {
			r, err := scanVersion(tx.QueryRow(ctx, ActiveQuery, service))
			if s.noRows(err) {
				return fmt.Errorf("%w: service %q has no active version", versioning.ErrNotFound, service)
			}
			if err != nil {
				return err
			}
			out, err = s.complete(ctx, tx, r)
			return err
		})
	})
	return out, err
}

// Get implements versioning.Reader.
func (s *Store) Get(ctx context.Context, service string, number int64) (versioning.Version, error) {
	var out versioning.Version
	err := s.op(ctx, "get", func(ctx context.Context) error {
		if err := versioning.ValidateService(service); err != nil {
			return err
		}
		// One snapshot: an open proposal's ruleset and approvals change
		// together (a revision starts a new approval round).
		return s.db.Snapshot(ctx, func(tx Tx) error {
			r, err := s.getVersion(ctx, tx, service, number, false)
			if err != nil {
				return err
			}
			out, err = s.complete(ctx, tx, r)
			return err
		})
	})
	return out, err
}

// List implements versioning.Reader.
func (s *Store) List(ctx context.Context, f versioning.ListFilter) ([]versioning.Version, error) {
	var out []versioning.Version
	err := s.op(ctx, "list", func(ctx context.Context) error {
		if err := versioning.ValidateService(f.Service); err != nil {
			return err
		}
		for i, st := range f.States {
			if !st.Valid() {
				return &versioning.InputError{Errors: fieldErr(fmt.Sprintf("states[%d]", i),
					"must be proposed, approved, published, superseded, rejected or withdrawn, got %q", st)}
			}
		}
		limit := f.Limit
		if limit <= 0 {
			limit = 50
		}
		limit = min(limit, 1000)
		args := []any{f.Service}
		q := `SELECT ` + versionColumns + versionFrom + ` WHERE v.service = $1`
		if f.Before > 0 {
			args = append(args, f.Before)
			q += fmt.Sprintf(" AND v.number < $%d", len(args))
		}
		if len(f.States) > 0 {
			ph := make([]string, len(f.States))
			for i, st := range f.States {
				args = append(args, string(st))
				ph[i] = fmt.Sprintf("$%d", len(args))
			}
			q += " AND v.state IN (" + strings.Join(ph, ", ") + ")"
		}
		args = append(args, limit)
		q += fmt.Sprintf(" ORDER BY v.number DESC LIMIT $%d", len(args))
		// One snapshot for the versions and their approvals, as in Get.
		return s.db.Snapshot(ctx, func(tx Tx) error {
			rows, err := tx.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			var rs []versionRow
			for rows.Next() {
				r, err := scanVersion(rows)
				if err != nil {
					rows.Close()
					return err
				}
				rs = append(rs, r)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if len(rs) == 0 {
				return nil
			}
			ap, err := s.approvals(ctx, tx, f.Service, rs[len(rs)-1].v.Number, rs[0].v.Number)
			if err != nil {
				return err
			}
			out = make([]versioning.Version, 0, len(rs))
			for _, r := range rs {
				if err := r.decode(); err != nil {
					return err
				}
				r.v.Approvals = ap[r.v.Number]
				out = append(out, r.v)
			}
			return nil
		})
	})
	return out, err
}

// Services implements versioning.Reader.
func (s *Store) Services(ctx context.Context) ([]versioning.ServiceInfo, error) {
	var out []versioning.ServiceInfo
	err := s.op(ctx, "services", func(ctx context.Context) error {
		return s.db.Read(ctx, func(tx Tx) error {
			rows, err := tx.Query(ctx, `SELECT s.name, COALESCE(s.active_number, 0),
				(SELECT COALESCE(max(v.number), 0) FROM rule_versions v WHERE v.service = s.name),
				(SELECT count(*) FROM rule_versions v WHERE v.service = s.name AND v.state = 'proposed')
				FROM rule_services s ORDER BY s.name`)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var si versioning.ServiceInfo
				var pending int64
				if err := rows.Scan(&si.Name, &si.Active, &si.Latest, &pending); err != nil {
					return err
				}
				si.Pending = int(pending)
				out = append(out, si)
			}
			return rows.Err()
		})
	})
	return out, err
}

// Policy implements versioning.Reader.
func (s *Store) Policy(ctx context.Context, service string) (versioning.Policy, error) {
	var out versioning.Policy
	err := s.op(ctx, "policy", func(ctx context.Context) error {
		if err := versioning.ValidateService(service); err != nil {
			return err
		}
		return s.db.Read(ctx, func(tx Tx) error {
			svc, err := s.service(ctx, tx, service, false)
			if err != nil {
				if errorsIsNotFound(err) {
					out = versioning.DefaultPolicy(service)
					return nil
				}
				return err
			}
			out = svc.policy
			return nil
		})
	})
	return out, err
}
