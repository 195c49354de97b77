package leader

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrNotLeader is returned by ClaimTick on a replica that does not lead.
var ErrNotLeader = errors.New("leader: not the leader")

// Elector campaigns for leadership and claims ticks.
type Elector interface {
	// Run campaigns until ctx ends, then gives leadership up.
	Run(ctx context.Context) error
	// IsLeader reports whether this replica leads now.
	IsLeader() bool
	// ClaimTick claims the evaluation of tick: true exactly once per tick
	// across all replicas; false if it was claimed already.
	ClaimTick(ctx context.Context, tick time.Time) (bool, error)
	// Identity names this replica.
	Identity() string
}

// Local is the elector of a single node.
type Local struct {
	ID   string
	mu   sync.Mutex
	last time.Time
}

var _ Elector = (*Local)(nil)

// Run implements Elector; it returns when ctx ends.
func (l *Local) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// IsLeader implements Elector.
func (l *Local) IsLeader() bool { return true }

// Identity implements Elector.
func (l *Local) Identity() string { return l.ID }

// ClaimTick implements Elector: ticks must move forward.
func (l *Local) ClaimTick(_ context.Context, tick time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !tick.After(l.last) {
		return false, nil
	}
	l.last = tick
	return true, nil
}
