package versioning

import (
	"encoding/json"
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
