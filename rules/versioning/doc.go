// Package versioning is Governor's system of record for rule changes: every
// ruleset a service ever ran, who proposed and approved it, and why.
//
// # Model
//
// Each service has numbered versions (1, 2, 3, ... per service, gap-free
// unless the numbering was raised), immutable once decided. After the
// database was reset or restored from a backup, the versions the fleet runs
// may be numbered above the store's last; Numbering.RaiseNumbering (called
// by the distribution relay, audited as "renumber") makes the next version
// of a service number above them, skipping the numbers between and never
// renumbering a version. A version holds the canonical ruleset (the SDK's schema, package
// governor.dev/governor/sdk/rules), its checksum, its parent (the version that
// was active when it was proposed), author, reason, free-form evidence and its
// source (a person or the engine).
//
// Lifecycle:
//
//	proposed --revise (author)--> proposed (same number, Revision + 1)
//	proposed --approve (policy's count reached)--> approved --relay--> published
//	proposed --reject--> rejected
//	proposed --withdraw (author)--> withdrawn
//	approved | published --newer version goes live--> superseded
//
// A version goes live ("active") the moment it is approved: the service's
// active pointer moves to it and an outbox row for the relay is written in the
// same transaction. Published records that the relay handed it to NATS. A
// row the relay cannot deliver as it is (too large for the server, not its
// version's envelope) is recorded as undeliverable
// (Outbox.MarkOutboxUndeliverable: reason, error, size, limit, relay, time,
// with an "undeliverable" audit entry) in the transaction that takes it out
// of the claims; Outbox.OutboxFailures lists the open ones, newest first
// (by service, reason or the largest size a transport accepts;
// Outbox.CountOutboxFailures counts them without reading them),
// until a newer version of the service is marked done (the failure is then
// superseded, kept as history) or a relay requeues the row
// (Outbox.RequeueOutbox, audited as "requeue"). The version itself stays
// approved, never published. The
// active version of a service is the one Store.Active returns; Version.Active
// marks it. Rollback and emergency publish create a new version that goes
// live at once (rollback_of records the target of a rollback); history is
// append-only.
//
// Four eyes: an approver must differ from the author and hold one of the
// roles the service's Policy allows (default approver or admin); a Policy may
// require more than one approval, each from a different person. Names that
// differ only in case (alice, Alice) are one person here: nobody approves
// their own proposal, or approves one twice, under another spelling, and
// the author withdraws, rebases, revises or replaces their proposal under
// any of them. A Policy carries a Revision; SetPolicy of a policy read
// with its Revision is refused with ErrConflict if another admin changed it since, so that
// partial updates never revert each other. Emergency publish (break glass)
// is for admins, needs a reason and is marked as such in the audit log. The decision
// engine proposes with Source engine and evidence; with AutoApply its proposal
// goes live at once (the engine decides what lies within its bands) unless the
// service's policy is ManualOnly. A policy may also carry the service's
// auto-apply band (Policy.Band: max change per hour, floor and ceiling in
// req/s), which the engine then uses instead of its configured band.
//
// Revisions: the author of an open proposal may revise it in place
// (Store.Revise): new ruleset, reason and evidence under the same number and
// parent, Revision counting the revisions and RevisedAt the last one, each
// audited as ActionRevise. The database refuses any other change of a
// version's content. A revision that changes the ruleset invalidates the
// approvals already given (an approver never approves one ruleset and has
// another published): it starts a new approval round, and only the current
// round's approvals count; one of reason and evidence alone keeps them. Approval
// forms pass the checksum the approver reviewed (Store.ApproveChecksum),
// which fails with ErrConflict if the proposal was revised since. The
// decision engine keeps at most one open proposal per service this way.
//
// Optimistic concurrency: a proposal names the version it was based on
// (BaseVersion); if another version went live since, Propose and Approve
// refuse it with ErrConflict. Propose with Rebase set bases a new proposal on
// whatever is active instead, and Store.Rebase moves a stale proposal onto the
// active version (a new number; the stale one is withdrawn). A rollback may
// name the version it was decided against (Store.RollbackFrom: the active
// version of the diff a person reviewed, the version the guardrail judged);
// if another version went live since, it is refused with a *ConflictError
// naming both, checked in the transaction that would write it, and nothing
// is written.
//
// Every action appends an AuditEntry whose hash chains to the previous entry
// (sha256 over canonical JSON); VerifyAudit walks the chain and names the
// first broken entry. An AuditChecker, for views of the log, verifies only
// what was appended since its last check (and that the last entry it
// verified is unchanged), walking the whole chain at most
// DefaultWholeChainEvery apart and on request. In PostgreSQL a trigger refuses UPDATE, DELETE and
// TRUNCATE of audit rows and the application role is granted only SELECT and
// INSERT on them.
//
// # Fencing
//
// The decision engine writes under the evaluation tick its leader claimed
// (WithFence): a write that changes a service is refused with a
// *FencedError, writing nothing, once a later tick has been claimed. The
// PostgreSQL store checks it when the write locks its service and again as
// the last statement before COMMIT; Fence describes the window that
// remains between that check and the commit.
//
// # Implementations
//
// Subpackage postgres stores versions in PostgreSQL through pgx; subpackage
// sqlite in an embedded SQLite file (modernc.org/sqlite, no cgo) for the
// zero-setup default. Both apply the migrations of package
// governor.dev/governor/migrations at start and pass one conformance suite.
//
// Both stores also mark an outbox row by the item a relay claimed,
// MarkOutboxItemDone(ctx, OutboxItem) and MarkOutboxItemUndeliverable(ctx,
// OutboxItem, OutboxFailure) (the distribution relay's optional ItemMarker):
// only while the row of the item's id still holds its service, version and
// checksum, checked in the locked lookup of the one transaction that marks
// it, and ErrNotFound otherwise, the row left untouched. After the database
// was restored from a backup an id can name another row, which marking by
// id alone would mark published or undeliverable without having delivered
// it. They otherwise behave, are audited and are measured (operations
// mark_outbox_done and mark_outbox_undeliverable) exactly as
// Outbox.MarkOutboxDone and Outbox.MarkOutboxUndeliverable.
//
// # Errors
//
// Errors wrap one of the sentinels below (ErrNotFound, ErrConflict,
// ErrSelfApproval, ErrForbidden, ErrInvalidState, ErrInvalid, ErrTampered,
// ErrUnavailable); a caller maps them to HTTP status codes with errors.Is.
// Bad input is an *InputError naming each field and its problem; nothing is
// written when an operation fails.
package versioning
