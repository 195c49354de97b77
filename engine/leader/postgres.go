package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/sdk/clock"
)

// ErrInvalidOption marks bad options.
var ErrInvalidOption = errors.New("leader: invalid option")

// DefaultLockKey is the advisory lock key of the engine ("GOVENGIN").
const DefaultLockKey int64 = 0x474f56454e47494e

// PostgresOptions configure a Postgres elector. URL and Identity are
// required. The database needs the schema of migrations.Up (the table
// governor_engine_ticks, migration 00400), which the engine applies at start.
type PostgresOptions struct {
	URL      string
	Identity string
	// LockKey is the advisory lock; default DefaultLockKey.
	LockKey int64
	// RetryInterval between attempts of a standby; default 1s.
	RetryInterval time.Duration
	// CheckInterval of the leader's connection; default 1s.
	CheckInterval time.Duration
	// TickRetention is how long claimed ticks are kept; the leader deletes
	// older ones as it claims. Default 24h.
	TickRetention time.Duration
	Clock         clock.Clock
	Events        events.Sink
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
}

// Postgres elects through an advisory lock.
type Postgres struct {
	o      PostgresOptions
	mu     sync.Mutex
	conn   *pgx.Conn // the lock-holding connection while leading
	leader prometheus.Gauge
	claims *prometheus.CounterVec
}

var _ Elector = (*Postgres)(nil)

// NewPostgres checks the options.
func NewPostgres(o PostgresOptions) (*Postgres, error) {
	var errs []error
	if o.URL == "" {
		errs = append(errs, fmt.Errorf("%w: URL is required", ErrInvalidOption))
	}
	if o.Identity == "" {
		errs = append(errs, fmt.Errorf("%w: Identity is required", ErrInvalidOption))
	}
	if o.RetryInterval < 0 || o.CheckInterval < 0 || o.TickRetention < 0 {
		errs = append(errs, fmt.Errorf("%w: RetryInterval, CheckInterval and TickRetention must not be negative", ErrInvalidOption))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.LockKey == 0 {
		o.LockKey = DefaultLockKey
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = time.Second
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = time.Second
	}
	if o.TickRetention == 0 {
		o.TickRetention = 24 * time.Hour
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Events == nil {
		o.Events = events.Discard{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	f := promauto.With(o.Registerer)
	p := &Postgres{o: o,
		leader: f.NewGauge(prometheus.GaugeOpts{Name: "governor_engine_leader", Help: "1 while this replica leads."}),
		claims: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_engine_tick_claims_total",
			Help: "Tick claims by result: won, taken (another replica had it), error."}, []string{"result"}),
	}
	for _, r := range []string{"won", "taken", "error"} {
		p.claims.WithLabelValues(r)
	}
	return p, nil
}

// Identity implements Elector.
func (p *Postgres) Identity() string { return p.o.Identity }

// IsLeader implements Elector.
func (p *Postgres) IsLeader() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn != nil
}

// Run implements Elector.
func (p *Postgres) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		conn, err := p.acquire(ctx)
		if err != nil && ctx.Err() == nil {
			p.o.Logger.Debug("leader: campaign", "err", err)
		}
		wait := p.o.RetryInterval
		if conn != nil {
			p.lead(ctx, conn)
			// A replica that lost its session stands back for two retry
			// intervals, so a standby that kept campaigning takes over
			// rather than the replica whose connection just failed.
			wait = 2 * p.o.RetryInterval
		}
		t := p.o.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
	}
	return nil
}

// acquire returns a connection holding the lock, or nil.
func (p *Postgres) acquire(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, p.o.URL)
	if err != nil {
		return nil, err
	}
	var got bool
	if err := conn.QueryRow(cctx, "SELECT pg_try_advisory_lock($1)", p.o.LockKey).Scan(&got); err != nil || !got {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// lead holds leadership until the connection fails or ctx ends.
func (p *Postgres) lead(ctx context.Context, conn *pgx.Conn) {
	p.mu.Lock()
	p.conn = conn
	p.mu.Unlock()
	p.leader.Set(1)
	p.o.Logger.Info("leader: acquired", "identity", p.o.Identity)
	p.o.Events.Emit(ctx, events.Event{Kind: events.LeaderAcquired, Severity: events.Info, At: p.o.Clock.Now(),
		Message: p.o.Identity + " leads the engine"})
	var lost error
	for lost == nil && ctx.Err() == nil {
		t := p.o.Clock.NewTimer(p.o.CheckInterval)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
			p.mu.Lock()
			cctx, cancel := context.WithTimeout(ctx, p.o.CheckInterval)
			lost = conn.Ping(cctx)
			cancel()
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	p.conn = nil
	p.mu.Unlock()
	p.leader.Set(0)
	if ctx.Err() != nil {
		uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", p.o.LockKey)
		conn.Close(uctx)
		cancel()
		return
	}
	conn.Close(context.Background())
	p.o.Logger.Warn("leader: lost", "identity", p.o.Identity, "err", lost)
	p.o.Events.Emit(ctx, events.Event{Kind: events.LeaderLost, Severity: events.Warning, At: p.o.Clock.Now(),
		Message: fmt.Sprintf("%s lost the engine leadership: %v", p.o.Identity, lost)})
}

// ClaimTick implements Elector through the lock-holding connection.
func (p *Postgres) ClaimTick(ctx context.Context, tick time.Time) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		return false, ErrNotLeader
	}
	tag, err := p.conn.Exec(ctx, `INSERT INTO governor_engine_ticks (tick, leader) VALUES ($1, $2) ON CONFLICT (tick) DO NOTHING`,
		tick.UTC(), p.o.Identity)
	if err != nil {
		p.claims.WithLabelValues("error").Inc()
		return false, fmt.Errorf("leader: claim tick: %w", err)
	}
	if tag.RowsAffected() == 1 {
		p.claims.WithLabelValues("won").Inc()
		// Older ticks can no longer be claimed twice: keep the table small.
		if _, err := p.conn.Exec(ctx, `DELETE FROM governor_engine_ticks WHERE tick < $1`, tick.UTC().Add(-p.o.TickRetention)); err != nil {
			p.o.Logger.Warn("leader: prune ticks", "err", err)
		}
		return true, nil
	}
	p.claims.WithLabelValues("taken").Inc()
	return false, nil
}
