package distribution

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// MemoryOutbox is an in-memory versioning.Outbox with the store's lease
// semantics, for tests, benchmarks and demos that run without a rules store.
type MemoryOutbox struct {
	clk   clock.Clock
	ready chan struct{}

	mu       sync.Mutex
	nextID   int64
	rows     []*memRow
	failures []versioning.OutboxFailure
}

type memRow struct {
	item   versioning.OutboxItem
	done   bool
	failed bool
}

var (
	_ versioning.Outbox = (*MemoryOutbox)(nil)
	_ ItemMarker        = (*MemoryOutbox)(nil)
)

// NewMemoryOutbox returns an empty outbox; nil clk means clock.Real.
func NewMemoryOutbox(clk clock.Clock) *MemoryOutbox {
	if clk == nil {
		clk = clock.Real{}
	}
	return &MemoryOutbox{clk: clk, ready: make(chan struct{}, 1)}
}

// Add writes a row for the envelope, as an approval would, and signals
// OutboxReady. It returns the row id.
func (o *MemoryOutbox) Add(env *rules.Envelope) (int64, error) {
	payload, err := json.Marshal(env)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	o.mu.Lock()
	o.nextID++
	id := o.nextID
	o.rows = append(o.rows, &memRow{item: versioning.OutboxItem{
		ID: id, Service: env.Service, Version: env.Version, Kind: versioning.OutboxApproved,
		Checksum: env.Checksum, Payload: payload, CreatedAt: o.clk.Now(),
	}})
	o.mu.Unlock()
	select {
	case o.ready <- struct{}{}:
	default:
	}
	return id, nil
}

// ClaimOutbox leases up to limit pending rows whose lease is free or expired.
func (o *MemoryOutbox) ClaimOutbox(_ context.Context, limit int, lease time.Duration) ([]versioning.OutboxItem, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clk.Now()
	var out []versioning.OutboxItem
	for _, r := range o.rows {
		if len(out) >= limit {
			break
		}
		if r.done || r.failed || now.Before(r.item.LeaseUntil) {
			continue
		}
		r.item.Attempts++
		r.item.LeaseUntil = now.Add(lease)
		out = append(out, r.item)
	}
	return out, nil
}

// MarkOutboxDone marks a row done; marking it again is a no-op.
func (o *MemoryOutbox) MarkOutboxDone(_ context.Context, id int64) error {
	return o.markDone(versioning.OutboxItem{ID: id}, false)
}

// MarkOutboxItemDone implements ItemMarker: MarkOutboxDone of the row of
// it's id, only while that row holds it's service, version and checksum.
func (o *MemoryOutbox) MarkOutboxItemDone(_ context.Context, it versioning.OutboxItem) error {
	return o.markDone(it, true)
}

// sameRow reports whether the row r is it (same id, and, when identity is
// set, same service, version and checksum).
func sameRow(r *memRow, it versioning.OutboxItem, identity bool) bool {
	return r.item.ID == it.ID && (!identity ||
		(r.item.Service == it.Service && r.item.Version == it.Version && r.item.Checksum == it.Checksum))
}

func (o *MemoryOutbox) markDone(it versioning.OutboxItem, identity bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.rows {
		if sameRow(r, it, identity) {
			if r.done {
				return nil
			}
			r.done = true
			now := o.clk.Now()
			for i, f := range o.failures {
				if f.Service == r.item.Service && f.Version <= r.item.Version && f.Open() {
					o.failures[i].SupersededBy, o.failures[i].SupersededAt = r.item.Version, now
				}
			}
			return nil
		}
	}
	return notFound(it, identity)
}

// notFound is the error for a row the outbox does not have (by identity:
// not with the item's content).
func notFound(it versioning.OutboxItem, identity bool) error {
	if identity {
		return fmt.Errorf("%w: outbox row %d with %s v%d %s", versioning.ErrNotFound, it.ID, it.Service, it.Version, it.Checksum)
	}
	return fmt.Errorf("%w: outbox row %d", versioning.ErrNotFound, it.ID)
}

// MarkOutboxUndeliverable records the row as given up on, as a store does.
func (o *MemoryOutbox) MarkOutboxUndeliverable(_ context.Context, id int64, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	return o.markUndeliverable(versioning.OutboxItem{ID: id}, false, f)
}

// MarkOutboxItemUndeliverable implements ItemMarker:
// MarkOutboxUndeliverable of the row of it's id, only while that row holds
// it's service, version and checksum.
func (o *MemoryOutbox) MarkOutboxItemUndeliverable(_ context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	return o.markUndeliverable(it, true, f)
}

func (o *MemoryOutbox) markUndeliverable(it versioning.OutboxItem, identity bool, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error) {
	if err := f.Validate(); err != nil {
		return versioning.OutboxFailure{}, false, err
	}
	id := it.ID
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.rows {
		if !sameRow(r, it, identity) {
			continue
		}
		if r.failed {
			for i := len(o.failures) - 1; i >= 0; i-- {
				if o.failures[i].OutboxID == id {
					return o.failures[i], false, nil
				}
			}
		}
		if r.done {
			return versioning.OutboxFailure{}, false, nil
		}
		r.failed = true
		f.ID, f.OutboxID, f.Service, f.Version, f.At = int64(len(o.failures)+1), id, r.item.Service, r.item.Version, o.clk.Now()
		f.SupersededBy, f.SupersededAt = 0, time.Time{}
		o.failures = append(o.failures, f)
		return f, true, nil
	}
	return versioning.OutboxFailure{}, false, notFound(it, identity)
}

// RequeueOutbox puts an undeliverable row back in the claims, as a store
// does.
func (o *MemoryOutbox) RequeueOutbox(_ context.Context, id int64, relay string) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.rows {
		if r.item.ID != id {
			continue
		}
		if r.done || !r.failed {
			return false, nil
		}
		r.failed, r.item.LeaseUntil = false, time.Time{}
		for i, f := range o.failures {
			if f.OutboxID == id && f.Open() {
				o.failures[i].RequeuedAt, o.failures[i].RequeuedBy = o.clk.Now(), relay
			}
		}
		select {
		case o.ready <- struct{}{}:
		default:
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: outbox row %d", versioning.ErrNotFound, id)
}

// OutboxFailures lists the recorded failures matching f, newest first.
func (o *MemoryOutbox) OutboxFailures(_ context.Context, f versioning.FailureFilter) ([]versioning.OutboxFailure, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []versioning.OutboxFailure
	for i := len(o.failures) - 1; i >= 0 && len(out) < limit; i-- {
		if f.Match(o.failures[i]) {
			out = append(out, o.failures[i])
		}
	}
	return out, nil
}

// CountOutboxFailures counts the recorded failures matching f.
func (o *MemoryOutbox) CountOutboxFailures(_ context.Context, f versioning.FailureFilter) (int, error) {
	f.Limit = 0 // every match counts
	if err := f.Validate(); err != nil {
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, fl := range o.failures {
		if f.Match(fl) {
			n++
		}
	}
	return n, nil
}

// OutboxReady signals that a row was added.
func (o *MemoryOutbox) OutboxReady() <-chan struct{} { return o.ready }

// Pending returns the number of rows not yet done (undeliverable rows
// included).
func (o *MemoryOutbox) Pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range o.rows {
		if !r.done {
			n++
		}
	}
	return n
}
