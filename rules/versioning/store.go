package versioning

import (
	"context"
	"time"
)

// Store is the system of record for rule versions. Implementations are safe
// for concurrent use and run every mutation in one database transaction:
// either all of it (version, approvals, audit entry, outbox row) is written or
// nothing is.
type Store interface {
	Reader
	Outbox
	Auditor

	// Propose stores a new proposed version (or, for an engine proposal with
	// AutoApply under a policy that allows it, a live one). The ruleset is
	// validated like any input; the author needs the operator, approver or
	// admin role. ErrConflict if BaseVersion is not the active version and
	// Rebase is false.
	Propose(ctx context.Context, p Proposal) (Version, error)
	// Approve records by's approval of a proposal. When the policy's count is
	// reached the version goes live, supersedes the previous one and gets an
	// outbox row. ErrSelfApproval for the author, ErrForbidden without an
	// approver role, ErrInvalidState if the version is no longer proposed
	// (another approver won the race) or by already approved it (names are
	// compared without regard to case, for both), ErrConflict
	// if another version went live since the proposal was made.
	Approve(ctx context.Context, service string, number int64, by Actor, comment string) (Version, error)
	// Rebase re-proposes a stale proposal on top of the active version: a new
	// proposal with the same content, author, source, reason and evidence,
	// while the old one is withdrawn, in one transaction. by must be the
	// author (compared without regard to case, as in Approve) or an admin.
	// ErrInvalidState if the proposal is not stale or no
	// longer proposed.
	Rebase(ctx context.Context, service string, number int64, by Actor) (Version, error)
	// ApproveChecksum is Approve of the content the approver reviewed: it
	// fails with ErrConflict, writing nothing, if the proposal's ruleset no
	// longer has that checksum (it was revised since). Approval forms
	// should use it, so that nobody approves one ruleset and has another
	// published.
	ApproveChecksum(ctx context.Context, service string, number int64, checksum string, by Actor, comment string) (Version, error)
	// Revise updates an open proposal in place: the same number and parent,
	// p's ruleset, reason and evidence, Revision one higher and RevisedAt
	// now, audited as ActionRevise. p.Author must be the proposal's author
	// (compared without regard to case, as in Approve; nobody else, admins
	// included, so the author stays the only one who wrote the content) with an editor role; p.BaseVersion must be the
	// proposal's parent (else ErrConflict); p.Service, if set, must be
	// service; p.Source, if set, must be the proposal's source; AutoApply,
	// Rebase and Replaces must be unset. When the ruleset changes, the
	// approvals already given are invalidated: a new approval round starts,
	// earlier rounds' approvals stay in the database as history but no
	// longer count or show in Version.Approvals, and the audit entry names
	// them. A revision of reason and evidence alone keeps them.
	// ErrInvalidState if the version is no longer proposed (approved,
	// rejected, withdrawn).
	Revise(ctx context.Context, service string, number int64, p Proposal) (Version, error)
	// Reject closes a proposal; by needs an approver role of the policy.
	Reject(ctx context.Context, service string, number int64, by Actor, comment string) (Version, error)
	// Withdraw closes a proposal on behalf of its author (compared without
	// regard to case, as in Approve) or an admin.
	Withdraw(ctx context.Context, service string, number int64, by Actor, comment string) (Version, error)
	// Rollback creates and activates a new version whose content equals
	// version `to` (which must have been live before), recording RollbackOf.
	// by needs the operator, approver or admin role; reason is required.
	Rollback(ctx context.Context, service string, to int64, by Actor, reason string) (Version, error)
	// RollbackFrom is Rollback of the version the caller saw active: from
	// is the version its decision was made against (the diff a person
	// reviewed, the version the guardrail judged), which becomes the new
	// version's parent. If another version is active, checked in the
	// transaction that writes, it fails with a *ConflictError (wrapping
	// ErrConflict) naming both and writes nothing. Rollback forms and
	// automated rollbacks should use it, so that nobody rolls back a
	// version other than the one they decided about.
	RollbackFrom(ctx context.Context, service string, from, to int64, by Actor, reason string) (Version, error)
	// EmergencyPublish activates a ruleset at once, skipping approval and the
	// base-version check (break glass). p.Author must be an admin and
	// p.Reason is required. The audit log marks it as an emergency.
	EmergencyPublish(ctx context.Context, p Proposal) (Version, error)
	// SetPolicy replaces a service's approval policy; by must be an admin.
	// With p.Revision above 0 it is a compare-and-set: ErrConflict,
	// writing nothing, if the stored policy is at another revision (see
	// Policy.Revision). The returned policy carries the new revision.
	SetPolicy(ctx context.Context, p Policy, by Actor) (Policy, error)

	// Close releases the database.
	Close() error
}

// Numbering raises the numbers a store gives the new versions of a
// service, for recovery after the rules database was reset or restored
// from a backup: the NATS bucket, and the fleet, then run version numbers
// the store has not reached (or gave again to other content), and
// instances never go back to a lower number, so versions numbered from the
// store's own last number would not reach them. The SQL stores (packages
// postgres and sqlite) implement it; callers find it with a type
// assertion on their Store.
type Numbering interface {
	// RaiseNumbering makes every version of service created from now on
	// (proposal, rebase, rollback, emergency publication) number above
	// floor: when the highest number the service has given is below floor,
	// it becomes floor, in one transaction with an ActionRenumber audit
	// entry by by (detail: the previous and the new number and the
	// reason), and RaiseNumbering returns (floor, true). Otherwise it
	// writes nothing and returns the highest number given and false. It
	// never renumbers a version: existing versions, open proposals and the
	// audit chain stay as they are, and the numbers skipped are never
	// used. A service the store does not know yet is created (listed by
	// Services, with no active version). by needs a valid name and no
	// role: raising the floor changes no content and no decision. An
	// *InputError names a bad service, floor (1 to math.MaxInt64-1),
	// actor or reason (required).
	RaiseNumbering(ctx context.Context, service string, floor int64, by Actor, reason string) (int64, bool, error)
}

// Reader is the read side of a Store.
type Reader interface {
	// Active returns the live version of a service; ErrNotFound if none,
	// an *InputError if service is not a valid service name.
	Active(ctx context.Context, service string) (Version, error)
	// Get returns one version; ErrNotFound if it does not exist, an
	// *InputError if service is not a valid service name. The
	// version and its approvals are read as of one moment: a proposal is
	// never shown with the approvals of another revision of it.
	Get(ctx context.Context, service string, number int64) (Version, error)
	// List returns versions of one service, newest first, each with its
	// approvals as of one moment (as Get).
	List(ctx context.Context, f ListFilter) ([]Version, error)
	// Services lists every service the store knows (it has versions or a
	// policy), by name.
	Services(ctx context.Context) ([]ServiceInfo, error)
	// Policy returns a service's policy (DefaultPolicy if never set).
	Policy(ctx context.Context, service string) (Policy, error)
}

// Auditor reads, verifies and extends the audit log.
type Auditor interface {
	// Audit returns entries matching f, in sequence order (newest first
	// with f.Newest); an *InputError if f does not validate
	// (AuditFilter.Validate).
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// VerifyAudit walks the whole chain. On the first entry that does not
	// verify it returns a *ChainError (wrapping ErrTampered) naming it.
	VerifyAudit(ctx context.Context) (AuditReport, error)
	// RecordAudit appends an entry for an action outside the rule lifecycle
	// (e.g. ActionLoginFailure). Lifecycle actions (propose, approve, ...)
	// are written only by the Store itself and are refused with ErrInvalid.
	RecordAudit(ctx context.Context, r AuditRecord) (AuditEntry, error)
}

// Outbox is what the relay to NATS needs: claim rows written by approvals,
// rollbacks and emergency publications, publish them, mark them done.
//
// A claimed row is leased: other claimers skip it until the lease expires, so
// a relay that dies mid-publication leaves the row to the next claim. A row
// may therefore be published more than once; consumers deduplicate by
// (service, version), which never changes meaning.
type Outbox interface {
	// ClaimOutbox leases up to limit unpublished rows whose lease is free or
	// expired, oldest first, for the given lease duration. Rows recorded
	// as undeliverable are never claimed again.
	ClaimOutbox(ctx context.Context, limit int, lease time.Duration) ([]OutboxItem, error)
	// MarkOutboxDone marks a row published and its version StatePublished (if
	// it is still approved), writing an ActionPublish audit entry, and
	// supersedes the open failures (MarkOutboxUndeliverable) of older
	// versions of the service (and the row's own, should a failed row be
	// marked done after all), naming them in that entry. Marking a row
	// that is already done is a no-op; ErrNotFound for an unknown id.
	MarkOutboxDone(ctx context.Context, id int64) error
	// MarkOutboxUndeliverable records that the relay gave up on a row
	// whose version cannot be delivered as it is (f.Validate; the store
	// fills in the row's service and version, the time and the ID), in
	// the transaction that takes the row out of the claims, with an
	// ActionUndeliverable audit entry. It reports whether this call
	// recorded it: false, writing nothing, when the row is already
	// recorded as undeliverable or already published (another relay got
	// there first). ErrNotFound for an unknown id.
	MarkOutboxUndeliverable(ctx context.Context, id int64, f OutboxFailure) (OutboxFailure, bool, error)
	// OutboxFailures lists failures matching f, newest first. Without
	// f.History only the open ones: when MarkOutboxDone marks a row done,
	// the open failures of older versions of its service are superseded by
	// it (kept as history, no longer listed); RequeueOutbox closes one too.
	OutboxFailures(ctx context.Context, f FailureFilter) ([]OutboxFailure, error)
	// CountOutboxFailures returns how many failures match f without
	// reading them, for a gauge or an "is anything there" check; f.Limit is
	// ignored (every match counts).
	CountOutboxFailures(ctx context.Context, f FailureFilter) (int, error)
	// RequeueOutbox puts a row recorded as undeliverable back in the
	// claims, closing its open failure (RequeuedAt, RequeuedBy: relay) with
	// an ActionRequeue audit entry, because what made it undeliverable has
	// changed (the server now accepts larger values). It reports whether it
	// did: false, writing nothing, when the row is not undeliverable (never
	// was, already requeued, or published). ErrNotFound for an unknown id.
	RequeueOutbox(ctx context.Context, id int64, relay string) (bool, error)
	// OutboxReady receives a value (coalesced, never blocking the store) after
	// a transaction of this Store that wrote an outbox row commits, so an
	// in-process relay can wake at once. Other processes on PostgreSQL listen
	// for the NOTIFY described in package postgres.
	OutboxReady() <-chan struct{}
}

// Fence is the fencing token of a writer that may act only while it leads:
// the engine replica elected by engine/leader, writing under the evaluation
// tick it claimed in governor_engine_ticks. Writes made with a context
// carrying a Fence (WithFence) are refused with a *FencedError, writing
// nothing (no version, no audit entry, no outbox row), once a tick later
// than Tick has been claimed: a leader that lost the lead while it ran (a
// long pause, a stalled disk, a suspended VM) must not land a change
// computed from what it saw before its successor acted.
//
// The check runs in the write's own transaction, twice. First right after
// the write locks the service's row (which every change to a service takes
// first), so a writer that already lost the lead is refused before it
// decides anything. Then as the transaction's last statement, after its
// versions, approvals, audit entry and outbox row are written, just before
// COMMIT; a refusal there rolls all of them back. The first check alone
// would not hold: in PostgreSQL each statement of a READ COMMITTED
// transaction reads what committed before it began, and a leader claims a
// tick with one INSERT committed on its own, taking no lock the write
// holds (so a frozen old leader never holds up its successor's claims). A
// tick claimed after the first check would go unseen, no later statement
// reading the ticks, and a leader paused after it (a GC pause, a suspended
// VM, a stalled disk, a lock wait) would land its change after its
// successor claimed.
//
// What remains is the window between the snapshot of the last check (taken
// when that statement begins) and the commit: a tick whose claim commits
// while the check runs, while its answer travels back, while the store
// sends COMMIT, or while the server commits, is not seen, and a writer
// paused there lands its write after the claim. No statement of the write
// falls in that window, only one round trip to the database and the
// store's own code between the check's answer and COMMIT. Until the commit
// the write holds its service's row lock, so the successor's writes to
// that service made meanwhile wait for it and then see it (a proposal or
// rollback decided against the version it replaced is refused with
// ErrConflict): the change lands before the successor's tick writes to
// that service, not behind its back.
//
// Writes that change no service (RecordAudit, ClaimOutbox) are not
// fenced. Writes without a Fence (people's, through the UI and the API)
// are never refused this way. The PostgreSQL store honours fences (the
// role it runs as needs SELECT on governor_engine_ticks); the SQLite
// store, whose single engine claims its ticks in memory, ignores them.
type Fence struct {
	// Tick is the tick the writer claimed and acts for.
	Tick time.Time
	// Holder names the writer (the engine replica's identity).
	Holder string
}

type fenceKey struct{}

// WithFence returns a context whose writes are fenced by f (see Fence).
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf returns the Fence ctx carries, if any.
func FenceOf(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}
