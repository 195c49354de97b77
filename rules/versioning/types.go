package versioning

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"governor.dev/governor/sdk/rules"
)

// Role is what an actor may do. Roles do not imply each other: an admin who
// should also approve holds both roles, or the policy lists admin.
type Role string

// Roles.
const (
	RoleViewer   Role = "viewer"   // reads versions, diffs and the audit log
	RoleOperator Role = "operator" // proposes, rolls back, withdraws own proposals
	RoleApprover Role = "approver" // approves and rejects proposals of others
	RoleAdmin    Role = "admin"    // all of the above, policies, emergency publish
)

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool {
	switch r {
	case RoleViewer, RoleOperator, RoleApprover, RoleAdmin:
		return true
	}
	return false
}

// Actor is who does something: a person, the engine or a system component.
type Actor struct {
	Name  string `json:"name"`
	Roles []Role `json:"roles,omitempty"`
}

// Has reports whether the actor holds any of the roles.
func (a Actor) Has(roles ...Role) bool {
	for _, r := range roles {
		if slices.Contains(a.Roles, r) {
			return true
		}
	}
	return false
}

// SamePerson reports whether two actor names are one person, as the store
// decides it everywhere (four eyes, and who is a proposal's author for
// withdraw, rebase, revise and replace): names that differ only in case
// (alice, Alice) are. Code that says in advance what the store will allow
// (a disabled button and its reason) should ask it too.
func SamePerson(a, b string) bool { return strings.EqualFold(a, b) }

// State is where a version is in its lifecycle.
type State string

// States. Approved and published versions are live until superseded.
const (
	StateProposed   State = "proposed"
	StateApproved   State = "approved"
	StatePublished  State = "published"
	StateSuperseded State = "superseded"
	StateRejected   State = "rejected"
	StateWithdrawn  State = "withdrawn"
)

// Valid reports whether s is one of the states above.
func (s State) Valid() bool {
	switch s {
	case StateProposed, StateApproved, StatePublished, StateSuperseded, StateRejected, StateWithdrawn:
		return true
	}
	return false
}

// WentLive reports whether a version in this state has been active at some
// point (and so is a valid rollback target).
func (s State) WentLive() bool {
	return s == StateApproved || s == StatePublished || s == StateSuperseded
}

// Source says where a version's content came from.
type Source string

// Sources.
const (
	SourceUser     Source = "user"     // written by a person (UI, API)
	SourceEngine   Source = "engine"   // recommended by the decision engine
	SourceImport   Source = "import"   // imported from YAML (GitOps)
	SourceRollback Source = "rollback" // copied from an earlier version
)

// Version is one numbered ruleset of a service plus its lifecycle. Its
// content never changes once it is decided; while it is proposed its author
// may revise it in place (Store.Revise).
type Version struct {
	Service string `json:"service"`
	Number  int64  `json:"number"`
	// Parent is the version that was active when this one was proposed
	// (0: none).
	Parent int64 `json:"parent,omitempty"`
	State  State `json:"state"`
	// Active is true for the service's live version.
	Active   bool           `json:"active"`
	Ruleset  *rules.Ruleset `json:"ruleset"`
	Checksum string         `json:"checksum"`
	Author   string         `json:"author"`
	Source   Source         `json:"source"`
	Reason   string         `json:"reason"`
	// Evidence is free-form JSON, e.g. the signals the engine saw.
	Evidence json.RawMessage `json:"evidence,omitempty"`
	// RollbackOf is the version a rollback copied (0: not a rollback).
	RollbackOf int64 `json:"rollback_of,omitempty"`
	// Emergency marks a break-glass publication that skipped approval.
	Emergency bool `json:"emergency,omitempty"`
	// AutoApplied marks an engine proposal applied within its bands.
	AutoApplied bool       `json:"auto_applied,omitempty"`
	Approvals   []Approval `json:"approvals,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	// Revision counts the revisions of the proposal in place (Store.Revise;
	// 0: never revised) and RevisedAt is when the last one was made. The
	// ruleset, checksum, reason and evidence are those of the last
	// revision; CreatedAt stays when the version was first proposed.
	Revision  int       `json:"revision,omitempty"`
	RevisedAt time.Time `json:"revised_at,omitzero"`
	// DecidedAt, DecidedBy and DecisionComment record the final approval,
	// rejection or withdrawal.
	DecidedAt       time.Time `json:"decided_at,omitzero"`
	DecidedBy       string    `json:"decided_by,omitempty"`
	DecisionComment string    `json:"decision_comment,omitempty"`
	ActivatedAt     time.Time `json:"activated_at,omitzero"`
	SupersededAt    time.Time `json:"superseded_at,omitzero"`
	// PublishedAt is when the relay marked the version's outbox row done.
	PublishedAt time.Time `json:"published_at,omitzero"`
}

// Approval is one approver's consent.
type Approval struct {
	Approver string    `json:"approver"`
	Comment  string    `json:"comment,omitempty"`
	At       time.Time `json:"at"`
}

// Proposal asks for a new version.
type Proposal struct {
	// Service defaults to Ruleset.Service and must equal it when set.
	Service string
	// BaseVersion is the version the change was based on (0: the service has
	// none yet). If another version is active, Propose fails with ErrConflict.
	BaseVersion int64
	// Rebase ignores BaseVersion and bases the proposal on the active version.
	Rebase  bool
	Ruleset *rules.Ruleset
	Author  Actor
	// Reason is required (at most MaxReasonBytes).
	Reason string
	// Evidence is optional JSON (at most MaxEvidenceBytes).
	Evidence json.RawMessage
	// Source defaults to SourceUser.
	Source Source
	// AutoApply makes an engine proposal go live without approval when the
	// service's policy allows it (not ManualOnly). Only SourceEngine may ask.
	AutoApply bool
	// Replaces (Propose only), if above 0, names an open proposal of the same service that
	// this one replaces: it is withdrawn in the same transaction, so a
	// proposer can keep at most one open proposal per service. The author
	// must be its author (compared without regard to case, as in Approve)
	// or an admin.
	Replaces int64
}

// Limits on free-form input.
const (
	MaxReasonBytes   = 4 << 10
	MaxCommentBytes  = 4 << 10
	MaxEvidenceBytes = 64 << 10
	MaxActorBytes    = 128
	MaxDetailBytes   = 64 << 10
)

// Policy is a service's approval policy.
type Policy struct {
	Service string `json:"service"`
	// ApprovalsRequired before a proposal goes live; 1 to 10, default 1.
	ApprovalsRequired int `json:"approvals_required"`
	// ApproverRoles may approve and reject; default approver and admin.
	ApproverRoles []Role `json:"approver_roles"`
	// ManualOnly forbids engine proposals from applying themselves.
	ManualOnly bool `json:"manual_only"`
	// Band, if set, is the auto-apply band a person chose for the service:
	// the engine uses it instead of the band of its configuration file. nil
	// (the default, and what SetPolicy with a nil Band restores) leaves the
	// engine's configured band in force.
	Band *AutoApplyBand `json:"band,omitempty"`
	// Revision counts the changes made to the policy (0: never set); the
	// store sets it. Given to SetPolicy above 0 it is a compare-and-set:
	// the change is refused with ErrConflict, writing nothing, unless the
	// stored policy still has that revision, so that a read-modify-write
	// (Policy, change some fields, SetPolicy) never reverts a change
	// another admin made in between. 0 sets the policy unconditionally.
	Revision  int64     `json:"revision,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	UpdatedBy string    `json:"updated_by,omitempty"`
}

// AutoApplyBand is the pre-approved range inside which an engine proposal
// moving the service-wide rate ceiling applies itself (unless the policy is
// ManualOnly); outside it the proposal waits for approval.
type AutoApplyBand struct {
	// MaxChangePerHour is the largest cumulative relative change of the
	// ceiling within an hour that applies itself (0.1 = 10%); 0 to 10.
	MaxChangePerHour float64 `json:"max_change_per_hour"`
	// Floor and Ceiling bound the service-wide rate ceiling, in requests
	// per second (0: no bound). Floor must not exceed a set Ceiling.
	Floor   float64 `json:"floor"`
	Ceiling float64 `json:"ceiling"`
}

// DefaultPolicy is the policy of a service nobody configured.
func DefaultPolicy(service string) Policy {
	return Policy{Service: service, ApprovalsRequired: 1, ApproverRoles: []Role{RoleApprover, RoleAdmin}}
}

// ServiceInfo summarises one service.
type ServiceInfo struct {
	Name string `json:"name"`
	// Active is the live version number (0: none yet).
	Active int64 `json:"active"`
	// Latest is the highest version number.
	Latest int64 `json:"latest"`
	// Pending counts proposals awaiting a decision.
	Pending int `json:"pending"`
}

// ListFilter selects versions, newest first.
type ListFilter struct {
	// Service is required.
	Service string
	// States, if set, keeps only versions in one of them (each a valid
	// State, else List fails with an *InputError).
	States []State
	// Before, if above 0, keeps versions numbered below it (paging).
	Before int64
	// Limit defaults to 50, at most 1000.
	Limit int
}
