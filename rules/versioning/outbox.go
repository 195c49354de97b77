package versioning

import (
	"encoding/json"
	"regexp"
	"time"
)

// OutboxKind says why an outbox row was written.
type OutboxKind string

// Outbox kinds.
const (
	OutboxApproved  OutboxKind = "approved"
	OutboxAutoApply OutboxKind = "auto_apply"
	OutboxRollback  OutboxKind = "rollback"
	OutboxEmergency OutboxKind = "emergency"
)

// OutboxItem is a live version waiting to be published.
type OutboxItem struct {
	ID       int64      `json:"id"`
	Service  string     `json:"service"`
	Version  int64      `json:"version"`
	Kind     OutboxKind `json:"kind"`
	Checksum string     `json:"checksum"`
	// Payload is the rules.Envelope JSON to publish, verbatim.
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
	// Attempts counts claims, this one included.
	Attempts   int       `json:"attempts"`
	LeaseUntil time.Time `json:"lease_until"`
}

// Bounds of an OutboxFailure's text fields.
const (
	MaxFailureErrorBytes = 4 << 10
	MaxFailureRelayBytes = 256
)

var failureReasonRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// OutboxFailure records that a relay gave up on an outbox row: the version
// cannot be delivered as it is (too large for the transport, a payload that
// is not the row's envelope), so retrying cannot help. The store keeps it
// as history; it is open (listed as a problem) until a newer version of the
// service is marked done, which sets SupersededBy and SupersededAt, or a
// relay puts the row back in the claims (RequeueOutbox), which sets
// RequeuedAt and RequeuedBy.
type OutboxFailure struct {
	// ID numbers failures; OutboxID is the row given up on.
	ID       int64  `json:"id"`
	OutboxID int64  `json:"outbox_id"`
	Service  string `json:"service"`
	Version  int64  `json:"version"`
	// Reason is a short code (lower-case letters, digits and _), e.g.
	// "too_large" or "invalid".
	Reason string `json:"reason"`
	// Error is the relay's error text (at most MaxFailureErrorBytes).
	Error string `json:"error"`
	// Size is the value's size in bytes and Limit the most the transport
	// accepts (0 when they do not apply).
	Size  int `json:"size"`
	Limit int `json:"limit"`
	// Relay names the relay process that gave up (at most
	// MaxFailureRelayBytes).
	Relay string    `json:"relay"`
	At    time.Time `json:"at"`
	// SupersededBy is the newer version whose publication made this one
	// moot (0 while open), at SupersededAt.
	SupersededBy int64     `json:"superseded_by,omitempty"`
	SupersededAt time.Time `json:"superseded_at,omitzero"`
	// RequeuedAt is when RequeuedBy (a relay) put the row back in the
	// claims (zero while not).
	RequeuedAt time.Time `json:"requeued_at,omitzero"`
	RequeuedBy string    `json:"requeued_by,omitempty"`
}

// Open reports whether the failure still stands: neither superseded nor
// requeued.
func (f OutboxFailure) Open() bool { return f.SupersededBy == 0 && f.RequeuedAt.IsZero() }

// Validate checks what a relay supplies to MarkOutboxUndeliverable (Reason,
// Error, Size, Limit, Relay); the other fields are the store's.
func (f OutboxFailure) Validate() error {
	v := &fields{}
	if !failureReasonRE.MatchString(f.Reason) {
		v.add("reason", "must be 1-64 lower-case letters, digits or _ starting with a letter, got %q", f.Reason)
	}
	v.text("error", f.Error, MaxFailureErrorBytes, true)
	v.text("relay", f.Relay, MaxFailureRelayBytes, true)
	if f.Size < 0 {
		v.add("size", "must not be negative, got %d", f.Size)
	}
	if f.Limit < 0 {
		v.add("limit", "must not be negative, got %d", f.Limit)
	}
	return v.err()
}

// FailureFilter selects outbox failures, newest first.
type FailureFilter struct {
	// Service, if set, must match exactly.
	Service string
	// Reason, if set, must match exactly.
	Reason string
	// MaxSize, if above 0, selects the failures whose Size is at most
	// MaxSize (the rows a transport accepting MaxSize bytes would take).
	MaxSize int
	// History includes closed failures (superseded or requeued).
	History bool
	// Limit defaults to 100, at most 1000 (OutboxFailures;
	// CountOutboxFailures ignores it).
	Limit int
}

// Validate checks the filter, naming each bad field.
func (f FailureFilter) Validate() error {
	v := &fields{}
	if f.Service != "" {
		v.service("service", f.Service)
	}
	if f.Reason != "" && !failureReasonRE.MatchString(f.Reason) {
		v.add("reason", "must be 1-64 lower-case letters, digits or _ starting with a letter, got %q", f.Reason)
	}
	if f.MaxSize < 0 {
		v.add("max_size", "must not be negative, got %d", f.MaxSize)
	}
	if f.Limit < 0 || f.Limit > 1000 {
		v.add("limit", "must be between 1 and 1000 (0 for 100), got %d", f.Limit)
	}
	return v.err()
}

// Match reports whether fl is selected by f (all but Limit).
func (f FailureFilter) Match(fl OutboxFailure) bool {
	return (f.Service == "" || fl.Service == f.Service) && (f.Reason == "" || fl.Reason == f.Reason) &&
		(f.MaxSize <= 0 || fl.Size <= f.MaxSize) && (f.History || fl.Open())
}
