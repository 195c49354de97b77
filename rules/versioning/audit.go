package versioning

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"governor.dev/governor/sdk/clock"
)

// Action names what an audit entry records.
type Action string

// Lifecycle actions, written only by a Store.
const (
	ActionPropose   Action = "propose"
	ActionApprove   Action = "approve"
	ActionReject    Action = "reject"
	ActionWithdraw  Action = "withdraw"
	ActionActivate  Action = "activate" // a version went live (after approval or auto-apply)
	ActionAutoApply Action = "auto_apply"
	ActionPublish   Action = "publish"
	ActionRollback  Action = "rollback"
	ActionEmergency Action = "emergency"
	ActionPolicy    Action = "policy"
	ActionRebase    Action = "rebase"
	ActionRevise    Action = "revise" // an open proposal revised in place
	// ActionUndeliverable: the relay gave up on a version's outbox row
	// (Outbox.MarkOutboxUndeliverable).
	ActionUndeliverable Action = "undeliverable"
	// ActionRequeue: a relay put an undeliverable row back in the claims
	// (Outbox.RequeueOutbox).
	ActionRequeue Action = "requeue"
	// ActionRenumber: a service's next version number was raised above a
	// floor (Numbering.RaiseNumbering), e.g. to the version the NATS
	// bucket holds after the rules database was restored from a backup.
	ActionRenumber Action = "renumber"
)

// Actions other components record through Auditor.RecordAudit.
const (
	ActionLogin        Action = "login"
	ActionLoginFailure Action = "login_failure"
	ActionLogout       Action = "logout"
	ActionTokenCreate  Action = "token_create"
	ActionTokenRevoke  Action = "token_revoke"
)

// actionForm is the form of every action, the Store's and other
// components' alike.
var actionForm = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,63}$`)

// WellFormed reports whether a has the form of an action: 1 to 64
// lower-case letters, digits, _ or ., starting with a letter.
func (a Action) WellFormed() bool { return actionForm.MatchString(string(a)) }

// Lifecycle reports whether only a Store may record the action.
func (a Action) Lifecycle() bool {
	switch a {
	case ActionPropose, ActionApprove, ActionReject, ActionWithdraw, ActionActivate,
		ActionAutoApply, ActionPublish, ActionRollback, ActionEmergency, ActionPolicy, ActionRebase, ActionRevise,
		ActionUndeliverable, ActionRequeue, ActionRenumber:
		return true
	}
	return false
}

// GenesisHash is the PrevHash of the first audit entry.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// AuditEntry is one append-only record. Hash is sha256 over the canonical
// JSON of every other field (see HashInput), chaining to PrevHash.
type AuditEntry struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Roles   []Role    `json:"roles"`
	Action  Action    `json:"action"`
	Service string    `json:"service,omitempty"`
	Version int64     `json:"version,omitempty"`
	// Detail is compact JSON (an object) with action-specific facts.
	Detail   json.RawMessage `json:"detail"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// hashInput fixes the field order of the hashed encoding.
type hashInput struct {
	Seq      int64           `json:"seq"`
	At       string          `json:"at"`
	Actor    string          `json:"actor"`
	Roles    []Role          `json:"roles"`
	Action   Action          `json:"action"`
	Service  string          `json:"service"`
	Version  int64           `json:"version"`
	Detail   json.RawMessage `json:"detail"`
	PrevHash string          `json:"prev_hash"`
}

// HashInput returns the canonical JSON the entry's hash covers: every field
// but Hash, in a fixed order, the time in RFC 3339 UTC with microseconds.
func (e AuditEntry) HashInput() []byte {
	roles := e.Roles
	if roles == nil {
		roles = []Role{}
	}
	detail := e.Detail
	if len(detail) == 0 {
		detail = json.RawMessage("{}")
	}
	b, err := json.Marshal(hashInput{
		Seq: e.Seq, At: e.At.UTC().Format("2006-01-02T15:04:05.000000Z"), Actor: e.Actor, Roles: roles,
		Action: e.Action, Service: e.Service, Version: e.Version, Detail: detail, PrevHash: e.PrevHash,
	})
	if err != nil {
		// Detail is compacted JSON when stored; a corrupt Detail must still
		// produce a hash (that will not verify), not a panic.
		b = fmt.Appendf(nil, "%d|%q|%q", e.Seq, e.PrevHash, []byte(detail))
	}
	return b
}

// ComputeHash returns "sha256:<hex>" of HashInput.
func (e AuditEntry) ComputeHash() string {
	sum := sha256.Sum256(e.HashInput())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// AuditRecord is an entry to append through Auditor.RecordAudit.
type AuditRecord struct {
	Actor   Actor
	Action  Action
	Service string
	Version int64
	// Detail is optional JSON object.
	Detail json.RawMessage
}

// AuditFilter selects audit entries, oldest first unless Newest.
type AuditFilter struct {
	// Service and Action, if set, must match exactly; Actor matches ignoring
	// case (user names are unique ignoring case: one person).
	Service string
	Actor   string
	Action  Action
	// AfterSeq keeps entries with Seq above it, BeforeSeq (if above 0)
	// entries below it (paging in either direction).
	AfterSeq  int64
	BeforeSeq int64
	// Newest returns the latest entries first.
	Newest bool
	// Limit defaults to 100, at most 1000.
	Limit int
}

// Validate checks the filter, naming each bad field: Service, Actor and
// Action, if set, must have the form the store gives them (a service name,
// an actor name, a well-formed action), so a value no entry can hold is bad
// input rather than a query the database refuses.
func (f AuditFilter) Validate() error {
	v := &fields{}
	if f.Service != "" {
		v.service("service", f.Service)
	}
	if f.Actor != "" {
		v.actorName("actor", f.Actor)
	}
	if f.Action != "" && !f.Action.WellFormed() {
		v.add("action", "must be 1 to 64 lower-case letters, digits, _ or ., starting with a letter, got %q", f.Action)
	}
	return v.err()
}

// AuditReport is the result of a successful VerifyAudit.
type AuditReport struct {
	// Entries is how many entries were checked.
	Entries int64 `json:"entries"`
	// Head is the hash of the last entry (GenesisHash if none).
	Head string `json:"head"`
}

// VerifyChain checks entries that follow an entry with hash prev: sequence
// numbers consecutive after prevSeq, each PrevHash equal to the previous
// Hash, each Hash recomputed. It returns the hash and sequence of the last
// entry, or a *ChainError for the first entry that fails.
func VerifyChain(prevSeq int64, prev string, entries []AuditEntry) (int64, string, error) {
	for _, e := range entries {
		switch {
		case e.Seq != prevSeq+1:
			return prevSeq, prev, &ChainError{Seq: e.Seq, Problem: fmt.Sprintf("sequence jumps from %d to %d (entries missing)", prevSeq, e.Seq)}
		case e.PrevHash != prev:
			return prevSeq, prev, &ChainError{Seq: e.Seq, Problem: fmt.Sprintf("prev_hash %s does not match the previous entry's hash %s", e.PrevHash, prev)}
		}
		if h := e.ComputeHash(); h != e.Hash {
			return prevSeq, prev, &ChainError{Seq: e.Seq, Problem: fmt.Sprintf("content does not match its hash (stored %s, computed %s)", e.Hash, h)}
		}
		prevSeq, prev = e.Seq, e.Hash
	}
	return prevSeq, prev, nil
}

// compactDetail validates optional JSON detail and returns its compact form
// ("{}" when empty).
func compactDetail(field string, raw json.RawMessage, max int) ([]byte, *InputError) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	if len(raw) > max {
		return nil, invalid(field, "is %d bytes, at most %d allowed", len(raw), max)
	}
	if !utf8.Valid(raw) { // json.Compact does not check, and PostgreSQL's text refuses it
		return nil, invalid(field, "is not valid UTF-8")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid(field, "is not valid JSON: %v", err)
	}
	return buf.Bytes(), nil
}

// JoinRoles and SplitRoles store roles as one comma-separated column.
func JoinRoles(roles []Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

// SplitRoles is the inverse of JoinRoles.
func SplitRoles(s string) []Role {
	if s == "" {
		return []Role{}
	}
	parts := strings.Split(s, ",")
	out := make([]Role, len(parts))
	for i, p := range parts {
		out[i] = Role(p)
	}
	return out
}

// AuditSpanVerifier is implemented by stores that can verify the chain
// from a point already verified instead of from the first entry. Both SQL
// stores implement it; AuditChecker falls back to Auditor.VerifyAudit for
// an Auditor that does not.
type AuditSpanVerifier interface {
	// VerifyAuditFrom checks the chain from a prefix that an earlier
	// check verified, from.Entries entries ending in hash from.Head (as
	// an AuditReport returned it). It guarantees that
	//   - entry from.Entries is still stored with hash from.Head and its
	//     content still hashes to it (the end of the prefix is unchanged
	//     and not deleted; the log was not cut back),
	//   - every entry after it up to the head links to it and verifies,
	//     as VerifyAudit checks them, and so does the head itself,
	//   - no entry lies past the head.
	// It does not read the prefix's other entries: an edit to one of them
	// that leaves the last entry alone is found only by VerifyAudit.
	// A zero from (or one with Entries 0) checks the whole chain.
	VerifyAuditFrom(ctx context.Context, from AuditReport) (AuditReport, error)
}

// DefaultWholeChainEvery is how often AuditChecker walks the whole chain
// when its options leave WholeEvery zero.
const DefaultWholeChainEvery = 10 * time.Minute

// AuditCheckerOptions configures an AuditChecker.
type AuditCheckerOptions struct {
	// WholeEvery is how old the last whole walk may be before the next
	// one (Run's, or a check's while Run does not run); 0 means
	// DefaultWholeChainEvery.
	WholeEvery time.Duration
	// Retry is how soon Run walks again after a whole walk the store did
	// not answer; 0 means WholeEvery or a minute, whichever is shorter.
	Retry time.Duration
	// Clock reads the time of each check and times Run's walks; nil means
	// the real clock.
	Clock clock.Clock
	// OnWhole, if set, is called after every whole walk that ended with a
	// verdict or a store error (Run's and those checks did), outside the
	// checker's locks, one call at a time per walk. A walk whose context
	// ended is not reported.
	OnWhole func(AuditWalk)
}

// AuditWalk is the outcome of one whole walk of the chain.
type AuditWalk struct {
	// Start and End bound the walk.
	Start, End time.Time
	// AuditReport is the chain verified, when Err is nil.
	AuditReport
	// Err is nil for a chain that verified, a *ChainError (wrapping
	// ErrTampered) naming the first bad entry, or the store's error.
	Err error
	// Background is set for Run's walks.
	Background bool
}

// AuditCheck says what one AuditChecker.Check verified, and when.
type AuditCheck struct {
	// AuditReport is the chain as verified now: its length and the hash of
	// its last entry.
	AuditReport
	// Whole is set when this check walked the whole chain.
	Whole bool `json:"whole"`
	// WholeAt is when the last whole walk that passed ended (this one if
	// Whole), and WholeEntries how many entries it verified.
	WholeAt      time.Time `json:"whole_at"`
	WholeEntries int64     `json:"whole_entries"`
	// New is how many entries past the last verified one this check
	// verified (all of them if Whole).
	New int64 `json:"new"`
	// NextWhole is when the whole chain is walked again at the latest
	// (WholeEvery after the last whole walk).
	NextWhole time.Time `json:"next_whole"`
	// Pending is set when this check verified nothing because no whole
	// walk has passed yet since the checker started and Run walks the
	// chain in the background: its first walk is running (Running) or
	// about to start. Only a check that asks for the whole chain walks it
	// then.
	Pending bool `json:"pending"`
	// Running is set while a whole walk runs, since RunningSince.
	Running      bool      `json:"running"`
	RunningSince time.Time `json:"running_since"`
}

// AuditStatus is what an AuditChecker knows of the chain without reading
// the store.
type AuditStatus struct {
	// Broken is the chain error last found (a *ChainError), until a whole
	// walk passes again; nil if none.
	Broken error
	// WholeAt is when the last whole walk that passed ended (zero if none
	// did), WholeEntries how many entries it verified.
	WholeAt      time.Time
	WholeEntries int64
	// Running is set while a whole walk runs.
	Running bool
}

// AuditChecker verifies the audit chain for views that ask often (the UI's
// audit page, its API), at a cost that does not grow with the log: it
// remembers, per process, the last verified (entries, hash) and verifies
// only the entries past it plus that the prefix's last entry is unchanged
// (AuditSpanVerifier). The whole chain is walked every WholeEvery and when
// a check asks for it: by Run in the background while Run runs, otherwise
// by the first check and the first check after WholeEvery. So an edit to
// an old entry is reported by the next whole walk, at most WholeEvery
// after it (or at once on request); an edit to the last verified entry, a
// cut of the log, or a bad new entry by the next check.
//
// While Run runs, checks that do not ask for the whole chain never walk
// it, and never wait for a whole walk that runs: they verify the new
// entries, or, before the first whole walk passed, report Pending.
//
// A broken chain is sticky: once a check or walk found one, every later
// check reports it (reading the store only for the whole walks, which go
// on at the same pace) until a whole walk that started after it was found
// passes. A log restored from a backup to fewer entries than were verified
// reads as broken too (entries removed) until a whole walk of the
// restored log passes.
//
// An AuditChecker is safe for concurrent use. One whole walk runs at a
// time: a check asking for the whole chain while one runs waits for it
// and, if that walk started before the check was asked, walks again; a
// walk that started after the request serves it.
type AuditChecker struct {
	a       Auditor
	every   time.Duration
	retry   time.Duration
	clock   clock.Clock
	onWhole func(AuditWalk)
	turn    chan struct{} // one span check at a time

	mu                   sync.Mutex
	mark                 AuditReport // last verified prefix; zero before the first whole walk
	markGen              uint64      // counts the changes of mark
	wholeStart, wholeEnd time.Time   // the last passing whole walk
	wholeEntries         int64
	walked               time.Time  // when the last whole walk with a verdict ended
	failed               time.Time  // when the last whole walk the store did not answer ended
	failErr              error      // its error, until a walk with a verdict
	broken               error      // the chain error last found, until a whole walk passes
	brokenGen            uint64     // counts the chain errors found
	walk                 *wholeWalk // the whole walk running, if any
	walks                uint64     // whole walks started
	runs                 int        // Run calls running
}

// wholeWalk is one whole walk; done is closed when check and err are set.
type wholeWalk struct {
	seq   uint64
	start time.Time
	done  chan struct{}
	check AuditCheck
	err   error
}

// NewAuditChecker returns a checker of a's chain.
func NewAuditChecker(a Auditor, o AuditCheckerOptions) *AuditChecker {
	if o.WholeEvery <= 0 {
		o.WholeEvery = DefaultWholeChainEvery
	}
	if o.Retry <= 0 {
		o.Retry = min(o.WholeEvery, time.Minute)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &AuditChecker{a: a, every: o.WholeEvery, retry: o.Retry, clock: o.Clock, onWhole: o.OnWhole,
		turn: make(chan struct{}, 1)}
}

// Status returns what the checker knows of the chain, without reading the
// store.
func (c *AuditChecker) Status() AuditStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return AuditStatus{Broken: c.broken, WholeAt: c.wholeEnd, WholeEntries: c.wholeEntries, Running: c.walk != nil}
}

// Run walks the whole chain now and then WholeEvery after the last whole
// walk ended (a walk a check asked for counts), or Retry after a walk the
// store did not answer, until ctx ends; a walk running then stops with
// ctx. While it runs, checks leave the scheduled whole walks to it.
func (c *AuditChecker) Run(ctx context.Context) {
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.runs--
		c.mu.Unlock()
	}()
	for ctx.Err() == nil {
		c.mu.Lock()
		next := c.walked.Add(c.every)
		if c.failErr != nil && c.failed.After(c.walked) {
			next = c.failed.Add(c.retry)
		}
		seen := c.walks
		c.mu.Unlock()
		if now := c.clock.Now(); next.After(now) {
			t := c.clock.NewTimer(next.Sub(now))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			continue // a walk asked for meanwhile moves the schedule
		}
		_, _ = c.walkWhole(ctx, seen, true)
	}
}

// Check verifies the chain: the whole of it if whole is set, and, while
// Run does not run, on the first check or when the last whole walk is
// older than WholeEvery; otherwise only
// what AuditSpanVerifier checks (the whole chain for an Auditor without
// it, or, while Run runs, the last whole walk's result). It returns a
// *ChainError (wrapping ErrTampered) for a broken chain, and the store's
// error, with nothing remembered, when the store did not answer.
func (c *AuditChecker) Check(ctx context.Context, whole bool) (AuditCheck, error) {
	span, ok := c.a.(AuditSpanVerifier)
	c.mu.Lock()
	seen := c.walks
	now := c.clock.Now()
	background := c.runs > 0
	due := now.Sub(c.walked) >= c.every || c.mark.Head == "" && c.broken == nil
	switch {
	case whole, !background && (!ok || due):
		c.mu.Unlock()
		return c.walkWhole(ctx, seen, false)
	case c.broken != nil:
		err := c.broken
		c.mu.Unlock()
		return AuditCheck{}, err
	case c.mark.Head == "":
		out := c.result(AuditReport{}, 0, false)
		out.Pending = true
		err := c.failErr
		c.mu.Unlock()
		if !out.Running && err != nil {
			return AuditCheck{}, fmt.Errorf("the whole chain was not verified yet since start: the last walk failed: %w", err)
		}
		return out, nil
	case !ok:
		out := c.result(c.mark, 0, false)
		c.mu.Unlock()
		return out, nil
	}
	c.mu.Unlock()
	return c.checkSpan(ctx, span)
}

// result fills an AuditCheck of rep from the checker's state; c.mu held.
func (c *AuditChecker) result(rep AuditReport, fresh int64, whole bool) AuditCheck {
	out := AuditCheck{AuditReport: rep, Whole: whole, New: fresh, WholeAt: c.wholeEnd, WholeEntries: c.wholeEntries,
		NextWhole: c.walked.Add(c.every)}
	if c.walk != nil {
		out.Running, out.RunningSince = true, c.walk.start
	}
	return out
}

// checkSpan verifies the entries past the mark.
func (c *AuditChecker) checkSpan(ctx context.Context, span AuditSpanVerifier) (AuditCheck, error) {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return AuditCheck{}, ctx.Err()
	}
	defer func() { <-c.turn }()
	c.mu.Lock()
	if c.broken != nil { // found while this check waited for its turn
		err := c.broken
		c.mu.Unlock()
		return AuditCheck{}, err
	}
	from := c.mark
	c.mu.Unlock()
	rep, err := span.VerifyAuditFrom(ctx, from)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrTampered) {
			c.broken = err
			c.brokenGen++
		}
		return AuditCheck{}, err
	}
	if rep.Entries >= c.mark.Entries { // a whole walk that ended meanwhile may have gone further
		c.mark = rep
		c.markGen++
	}
	return c.result(rep, rep.Entries-from.Entries, false), nil
}

// walkWhole walks the whole chain, or takes the result of a whole walk
// that started after the request (seen: the walks started before it).
func (c *AuditChecker) walkWhole(ctx context.Context, seen uint64, background bool) (AuditCheck, error) {
	for {
		c.mu.Lock()
		if w := c.walk; w != nil {
			c.mu.Unlock()
			select {
			case <-w.done:
			case <-ctx.Done():
				return AuditCheck{}, ctx.Err()
			}
			if w.seq > seen && (w.err == nil || errors.Is(w.err, ErrTampered)) {
				return w.check, w.err
			}
			continue
		}
		c.walks++
		w := &wholeWalk{seq: c.walks, start: c.clock.Now(), done: make(chan struct{})}
		c.walk = w
		brokenGen, markGen := c.brokenGen, c.markGen
		c.mu.Unlock()

		rep, err := c.a.VerifyAudit(ctx)
		end := c.clock.Now()
		c.mu.Lock()
		c.walk = nil
		switch {
		case err == nil:
			c.walked, c.failErr = end, nil
			if c.brokenGen == brokenGen { // no break found since this walk started
				c.broken = nil
			}
			c.wholeStart, c.wholeEnd, c.wholeEntries = w.start, end, rep.Entries
			if c.markGen == markGen || rep.Entries >= c.mark.Entries {
				c.mark = rep
				c.markGen++
			}
			w.check = c.result(rep, rep.Entries, true)
		case errors.Is(err, ErrTampered):
			c.walked, c.failErr = end, nil
			c.broken = err
			c.brokenGen++
		case ctx.Err() == nil:
			c.failed, c.failErr = end, err
		}
		w.err = err
		close(w.done)
		c.mu.Unlock()
		if c.onWhole != nil && (err == nil || ctx.Err() == nil) {
			c.onWhole(AuditWalk{Start: w.start, End: end, AuditReport: rep, Err: err, Background: background})
		}
		return w.check, w.err
	}
}
