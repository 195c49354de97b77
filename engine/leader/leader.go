package leader

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
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
	// LeaderContext returns a context derived from ctx that ends when the
	// leadership this replica holds now ends (its lease ran out, its
	// connection failed), with the reason as its cause; one already ended
	// (cause ErrNotLeader) when it does not lead. Work done as the leader
	// (a tick's evaluation and its writes) runs under it, so that it stops
	// when the lead is lost instead of going on beside the next leader.
	LeaderContext(ctx context.Context) (context.Context, context.CancelFunc)
	// Identity names this replica.
	Identity() string
}

// Local is the elector of a single node. The zero value with an ID serves
// no metrics; NewLocal's serves those of every replica (LeaderMetric,
// always 1, LastTickMetric and TickIntervalMetric).
type Local struct {
	ID      string
	mu      sync.Mutex
	last    time.Time
	metrics tickMetrics
}

var _ Elector = (*Local)(nil)

// NewLocal returns the elector of a single node named id, registering its
// metrics with r (none when r is nil).
func NewLocal(id string, r prometheus.Registerer) *Local {
	l := &Local{ID: id}
	if r != nil {
		f := promauto.With(r)
		f.NewGauge(prometheus.GaugeOpts{Name: LeaderMetric, Help: "1 while this replica leads."}).Set(1)
		l.metrics = newTickMetrics(f)
	}
	return l
}

func (l *Local) setTickInterval(d time.Duration) { l.metrics.setInterval(d) }

// Run implements Elector; it returns when ctx ends.
func (l *Local) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// IsLeader implements Elector.
func (l *Local) IsLeader() bool { return true }

// Identity implements Elector.
func (l *Local) Identity() string { return l.ID }

// LeaderContext implements Elector: a single node leads until ctx ends.
func (l *Local) LeaderContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

// ClaimTick implements Elector: ticks must move forward.
func (l *Local) ClaimTick(_ context.Context, tick time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !tick.After(l.last) {
		return false, nil
	}
	l.last = tick
	l.metrics.saw(tick)
	return true, nil
}
