// Package store persists the alerts subsystem in the rules database:
// alert states, their history, silences, acknowledgements, what each
// notification group has sent and the notification log. One SQL
// implementation serves PostgreSQL (pgx) and SQLite (modernc.org/sqlite)
// with the 001xx migrations; storetest is the conformance suite both pass.
package store

import (
	"context"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
)

// HistoryEntry is one stored state change.
type HistoryEntry struct {
	ID          int64
	Fingerprint alerts.Fingerprint
	Rule        string
	Labels      alerts.Labels
	From, To    alerts.State
	At          time.Time
}

// Pending is an undelivered notification of the log.
type Pending struct {
	Message  *notify.Message
	Attempts int
	Error    string
}

// Store is the persistence the alerts manager needs. Implementations are
// safe for concurrent use; every error wraps alerts.ErrStore (or
// alerts.ErrNotFound, alerts.ErrInvalid, alerts.ErrConflict).
type Store interface {
	// SaveStates replaces the stored alert states with states.
	SaveStates(ctx context.Context, states []rule.Active) error
	LoadStates(ctx context.Context) ([]rule.Active, error)
	// AppendHistory records state changes.
	AppendHistory(ctx context.Context, ts []rule.Transition) error
	// History returns the newest limit changes of an alert (all alerts
	// when fp is 0), oldest first.
	History(ctx context.Context, fp alerts.Fingerprint, limit int) ([]HistoryEntry, error)

	// PutSilence stores s, replacing the stored silence with its ID
	// whatever that holds.
	PutSilence(ctx context.Context, s silence.Silence) error
	// ReplaceSilence stores next in place of prev, the silence with the
	// same ID as the caller read it, only if the store still holds prev
	// unchanged; otherwise (another replica edited, expired or pruned it
	// meanwhile) it writes nothing and returns an error wrapping
	// alerts.ErrConflict that names the silence.
	ReplaceSilence(ctx context.Context, prev, next silence.Silence) error
	Silences(ctx context.Context) ([]silence.Silence, error)
	// PruneSilences deletes the silences that ended before before; it
	// returns the rows deleted.
	PruneSilences(ctx context.Context, before time.Time) (int64, error)

	PutAck(ctx context.Context, a alerts.Ack) error
	DeleteAck(ctx context.Context, fp alerts.Fingerprint) error
	Acks(ctx context.Context) ([]alerts.Ack, error)

	// RecordNotification stores a group's new state and its message in one
	// transaction. A message whose ID is already logged is not stored
	// again and inserted is false.
	RecordNotification(ctx context.Context, g *dispatch.GroupState, m *notify.Message) (inserted bool, err error)
	Groups(ctx context.Context) ([]dispatch.GroupState, error)
	// UpdateGroups stores the group states put and removes the groups
	// named by remove, in one transaction: when a regroup moves notified
	// alerts from one group to another, the group they move to is stored
	// before, never after, the one they leave is removed.
	UpdateGroups(ctx context.Context, put []dispatch.GroupState, remove []dispatch.GroupRef) error
	// MarkDelivered closes a log entry after its last attempt; errText ""
	// means delivered.
	MarkDelivered(ctx context.Context, id string, at time.Time, attempts int, errText string) error
	// Undelivered returns the messages logged but not yet closed, oldest first.
	Undelivered(ctx context.Context) ([]Pending, error)
	// Delivered reports whether a message was delivered, and when.
	Delivered(ctx context.Context, id string) (time.Time, bool, error)

	// PutEvents stores engine events a standby observed, in order, for
	// the leader to take (TakeEvents); all or none.
	PutEvents(ctx context.Context, evs []rule.Event) error
	// TakeEvents deletes and returns up to limit stored events, oldest
	// stored first. Each stored event is returned to one caller only, even
	// to concurrent callers on several replicas.
	TakeEvents(ctx context.Context, limit int) ([]rule.Event, error)

	// Prune deletes history older than before and closed notification
	// log entries created before it; it returns the rows deleted.
	Prune(ctx context.Context, before time.Time) (int64, error)

	// SharedVersions reads the write counters of the silences, the
	// acknowledgements and the alert states, in one query.
	SharedVersions(ctx context.Context) (SharedVersions, error)

	Close() error
}

// SharedVersions are the write counters of the tables the replicas on one
// database share: each write of a table (SaveStates; PutSilence,
// ReplaceSilence and a PruneSilences that deletes; PutAck and a DeleteAck
// that deletes) adds one to its counter in the same transaction, so that a
// table whose counter has not moved since a read holds what that read
// returned. A counter read before its table never misses a write the table
// read shows; a write by a version without counters moves none.
type SharedVersions struct {
	Silences, Acks, States int64
}
