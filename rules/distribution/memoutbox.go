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

	mu     sync.Mutex
	nextID int64
	rows   []*memRow
}

type memRow struct {
	item versioning.OutboxItem
	done bool
}

var _ versioning.Outbox = (*MemoryOutbox)(nil)

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
		if r.done || now.Before(r.item.LeaseUntil) {
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
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.rows {
		if r.item.ID == id {
			r.done = true
			return nil
		}
	}
	return fmt.Errorf("%w: outbox row %d", versioning.ErrNotFound, id)
}

// OutboxReady signals that a row was added.
func (o *MemoryOutbox) OutboxReady() <-chan struct{} { return o.ready }

// Pending returns the number of rows not yet done.
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
