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

// ErrLeaseExpired is the cause of a leadership that ended because its lease
// ran out before the lock-holding connection confirmed it.
var ErrLeaseExpired = errors.New("leader: lease expired")

// ErrClockSkew is returned by ClaimTick for a tick later than the database
// clock by more than MaxClockSkew (this replica's clock runs ahead), or,
// not won, earlier than the newest claimed tick by more than MaxClockSkew
// (this replica's clock lags the one that claimed it).
var ErrClockSkew = errors.New("leader: clock skew")

// errCallTimeout is the cause of a database call cut short by its deadline.
var errCallTimeout = errors.New("leader: database call timed out")

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
	// Lease is how long one confirmation of the lock (a check or a claim
	// the lock-holding connection answered) keeps this replica leading,
	// counted on Clock from when the call was sent. A replica that cannot
	// renew it stops leading when it runs out, and a replica that takes
	// the lock waits one Lease before it leads, so the two never lead at
	// the same time. Every database call of the leader is bounded by a
	// third of the Lease and never outlasts it; the leader checks every
	// CheckInterval, and at the latest a third of the Lease before the
	// lease runs out. Default 3 × CheckInterval; it must exceed
	// CheckInterval.
	Lease time.Duration
	// SessionTimeout is the idle_session_timeout of the lock-holding
	// session: the server ends it, and so releases the lock, when the
	// leader sent nothing for this long (a leader cut off from the
	// database, whose connection the server would otherwise keep until TCP
	// gives up). Default 2 × Lease; negative: not set. It must be at
	// least the Lease: the leader is silent for a CheckInterval between two
	// checks, and a session ended while its lease holds makes the lead flap.
	SessionTimeout time.Duration
	// TickRetention is how long claimed ticks are kept; the leader deletes
	// older ones as it claims. Default 24h.
	TickRetention time.Duration
	// MaxClockSkew is how far a claimed tick may be ahead of the database
	// clock. Ticks are named by the replicas' wall clocks and only move
	// forward, so a tick claimed by a replica whose clock runs ahead would
	// keep every other replica from claiming (and their state from being
	// saved) until their clocks caught up with it; such a claim fails with
	// ErrClockSkew instead. A claim of a tick more than MaxClockSkew
	// behind the newest claimed one fails with ErrClockSkew as well. Default
	// 10s; negative: not checked.
	MaxClockSkew time.Duration
	Clock        clock.Clock
	Events       events.Sink
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
}

// Postgres elects through an advisory lock held by one connection, and
// leads on a lease that connection renews.
type Postgres struct {
	o PostgresOptions

	// mu guards the fields below; it is never held across I/O, so IsLeader
	// and LeaderContext never wait for the database.
	mu   sync.Mutex
	conn *pgx.Conn // the lock-holding connection, nil without the lock
	// from is when this replica may lead (the lock taken plus one Lease),
	// until the lease it last confirmed runs out.
	from, until time.Time
	term        context.Context // ends with the leadership (cause: why)
	endTerm     context.CancelCauseFunc

	// io orders the calls on conn (a pgx.Conn serves one at a time).
	io sync.Mutex
	// broken tells the lead loop that a claim found the connection dead.
	broken chan error

	leader  prometheus.Gauge
	claims  *prometheus.CounterVec
	metrics tickMetrics

	trace func(event string) // test hook: "wait", "lead", "call <what>", "lost"
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
	if o.RetryInterval < 0 || o.CheckInterval < 0 || o.TickRetention < 0 || o.Lease < 0 {
		errs = append(errs, fmt.Errorf("%w: RetryInterval, CheckInterval, Lease and TickRetention must not be negative", ErrInvalidOption))
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
	if o.Lease == 0 {
		o.Lease = 3 * o.CheckInterval
	}
	if o.Lease <= o.CheckInterval {
		return nil, fmt.Errorf("%w: Lease %s must exceed CheckInterval %s", ErrInvalidOption, o.Lease, o.CheckInterval)
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 2 * o.Lease
	}
	if o.SessionTimeout > 0 && o.SessionTimeout < o.Lease {
		// The leader is silent for up to a CheckInterval between two
		// checks, longer when the network is slow; the Lease is the
		// silence it tolerates. A shorter session timeout ends the session
		// of a leader whose lease still holds, again and again.
		return nil, fmt.Errorf("%w: SessionTimeout %s must be at least the Lease %s: the leader checks its session every CheckInterval %s, and a shorter timeout ends the session of a healthy leader (negative: no timeout)",
			ErrInvalidOption, o.SessionTimeout, o.Lease, o.CheckInterval)
	}
	if o.TickRetention == 0 {
		o.TickRetention = 24 * time.Hour
	}
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = 10 * time.Second
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
	p := &Postgres{o: o, broken: make(chan error, 1),
		leader: f.NewGauge(prometheus.GaugeOpts{Name: LeaderMetric, Help: "1 while this replica leads."}),
		claims: f.NewCounterVec(prometheus.CounterOpts{Name: "governor_engine_tick_claims_total",
			Help: "Tick claims by result: won, taken (another replica had it), error."}, []string{"result"}),
		metrics: newTickMetrics(f),
		trace:   func(string) {},
	}
	for _, r := range []string{"won", "taken", "error"} {
		p.claims.WithLabelValues(r)
	}
	return p, nil
}

// Identity implements Elector.
func (p *Postgres) Identity() string { return p.o.Identity }

func (p *Postgres) setTickInterval(d time.Duration) { p.metrics.setInterval(d) }

// IsLeader implements Elector: the lock is held, the Lease waited out since
// it was taken, and the lease last confirmed has not run out on Clock.
func (p *Postgres) IsLeader() bool {
	now := p.o.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leadsLocked(now)
}

func (p *Postgres) leadsLocked(now time.Time) bool {
	return p.conn != nil && !now.Before(p.from) && now.Before(p.until)
}

// LeaderContext implements Elector.
func (p *Postgres) LeaderContext(ctx context.Context) (context.Context, context.CancelFunc) {
	now := p.o.Clock.Now()
	p.mu.Lock()
	term, leads := p.term, p.leadsLocked(now)
	p.mu.Unlock()
	c, cancel := context.WithCancelCause(ctx)
	if !leads {
		cancel(ErrNotLeader)
		return c, func() {}
	}
	stop := context.AfterFunc(term, func() { cancel(context.Cause(term)) })
	return c, func() { stop(); cancel(context.Canceled) }
}

// Run implements Elector. A campaign that cannot reach the database (or
// take the lock for another reason than another replica holding it) is
// logged as a warning when it starts failing and whenever its error
// changes, then at debug level while it fails the same way: a replica that
// never leads says why.
func (p *Postgres) Run(ctx context.Context) error {
	failing := "" // the error of the last failed campaign; "" after one that worked
	for ctx.Err() == nil {
		conn, locked, err := p.acquire(ctx)
		switch {
		case err == nil:
			failing = ""
		case ctx.Err() != nil:
		case err.Error() != failing:
			failing = err.Error()
			p.o.Logger.Warn("leader: cannot campaign for the lead; retrying", "identity", p.o.Identity,
				"retry", p.o.RetryInterval, "err", err)
		default:
			p.o.Logger.Debug("leader: campaign", "err", err)
		}
		wait := p.o.RetryInterval
		if conn != nil {
			p.lead(ctx, conn, locked)
			// A replica that lost its session stands back for two retry
			// intervals, so a standby that kept campaigning takes over
			// rather than the replica whose connection just failed.
			wait = 2 * p.o.RetryInterval
		}
		t := p.o.Clock.NewTimer(wait)
		p.trace("campaign")
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
	}
	return nil
}

// acquire returns a connection holding the lock, or nil, and when the
// answer that granted it arrived (on Clock). Campaigning is bounded by the
// Lease in real time: nothing is led yet.
func (p *Postgres) acquire(ctx context.Context) (*pgx.Conn, time.Time, error) {
	cctx, cancel := context.WithTimeout(ctx, p.o.Lease)
	defer cancel()
	conn, err := pgx.Connect(cctx, p.o.URL)
	if err != nil {
		return nil, time.Time{}, err
	}
	if p.o.SessionTimeout > 0 {
		// A server that supports no idle_session_timeout (before
		// PostgreSQL 14) keeps the session until TCP gives up.
		ms := max(p.o.SessionTimeout.Milliseconds(), 1)
		if _, err := conn.Exec(cctx, fmt.Sprintf("SET idle_session_timeout = %d", ms)); err != nil {
			p.o.Logger.Debug("leader: idle_session_timeout not set", "err", err)
		}
	}
	p.readNewestTick(cctx, conn)
	var got bool
	if err := conn.QueryRow(cctx, "SELECT pg_try_advisory_lock($1)", p.o.LockKey).Scan(&got); err != nil || !got {
		conn.Close(context.Background())
		return nil, time.Time{}, err
	}
	return conn, p.o.Clock.Now(), nil
}

// readNewestTick serves the newest claimed tick (LastTickMetric) at each
// campaign attempt, so that a standby shows how long ago any replica
// claimed one. A read that fails (the schema is not there yet) leaves the
// metric as it was: it only ages.
func (p *Postgres) readNewestTick(ctx context.Context, conn *pgx.Conn) {
	var newest *time.Time
	if err := conn.QueryRow(ctx, `SELECT max(tick) FROM governor_engine_ticks`).Scan(&newest); err != nil {
		p.o.Logger.Debug("leader: read the newest tick", "err", err)
		return
	}
	if newest != nil {
		p.metrics.saw(*newest)
	}
}

// lead holds the lock until the connection fails, the lease runs out or ctx
// ends. It leads from one Lease after the lock was granted: a leader before
// it sent its last confirmation before its session ended, so before the
// lock was free, and its lease has run out by then on its own clock.
func (p *Postgres) lead(ctx context.Context, conn *pgx.Conn, locked time.Time) {
	term, endTerm := context.WithCancelCause(ctx)
	from := locked.Add(p.o.Lease)
	p.mu.Lock()
	p.conn, p.from, p.until, p.term, p.endTerm = conn, from, from, term, endTerm
	p.mu.Unlock()
	select { // a report of a connection before this one
	case <-p.broken:
	default:
	}
	p.o.Logger.Info("leader: lock taken, waiting out the lease of a leader before", "identity", p.o.Identity, "lease", p.o.Lease)
	leading := false
	var lost error
	for lost == nil && ctx.Err() == nil {
		// A check every CheckInterval, and one sent a third of the Lease
		// before the lease runs out (the most a call may take), whatever
		// the CheckInterval and however long the last check took: a check
		// sent later would find the lease run out on a healthy connection,
		// and the lead would end without cause, after IsLeader already
		// turned false while the lead contexts went on.
		now := p.o.Clock.Now()
		p.mu.Lock()
		until := p.until
		p.mu.Unlock()
		wait := min(p.o.CheckInterval, until.Add(-p.o.Lease/3).Sub(now))
		if !leading {
			wait = min(wait, from.Sub(now))
		}
		t := p.o.Clock.NewTimer(wait)
		p.trace("wait")
		select {
		case <-ctx.Done():
			t.Stop()
			continue
		case lost = <-p.broken:
			t.Stop()
			continue
		case <-t.C():
		}
		if lost = p.call(ctx, "check", func(ctx context.Context, c *pgx.Conn) error { return c.Ping(ctx) }); lost != nil {
			continue
		}
		if !leading && p.IsLeader() {
			leading = true
			p.leader.Set(1)
			p.o.Logger.Info("leader: acquired", "identity", p.o.Identity)
			p.o.Events.Emit(ctx, events.Event{Kind: events.LeaderAcquired, Severity: events.Info, At: p.o.Clock.Now(),
				Message: p.o.Identity + " leads the engine"})
			p.trace("lead")
		}
	}
	// The leadership ends before the lock is given up. When ctx ended (the
	// engine stops), a call it cut short is no lost connection: the lock
	// is released as at any shutdown, and no LeaderLost is reported.
	shutdown := ctx.Err() != nil
	cause := lost
	if shutdown {
		cause = context.Cause(ctx)
	}
	p.mu.Lock()
	p.conn, p.from, p.until, p.term, p.endTerm = nil, time.Time{}, time.Time{}, nil, nil
	p.mu.Unlock()
	endTerm(cause)
	p.leader.Set(0)
	// The lock-holding connection is no longer shared once calls in flight
	// have returned (each within its deadline).
	p.io.Lock()
	defer p.io.Unlock()
	if shutdown {
		// Nothing is led any more: a real-time bound will do.
		uctx, cancel := context.WithTimeout(context.Background(), p.o.Lease/3)
		_, _ = conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", p.o.LockKey)
		conn.Close(uctx)
		cancel()
		p.trace("released")
		return
	}
	conn.Close(context.Background())
	p.trace("lost")
	if !leading {
		p.o.Logger.Info("leader: lock lost before leading", "identity", p.o.Identity, "err", lost)
		return
	}
	p.o.Logger.Warn("leader: lost", "identity", p.o.Identity, "err", lost)
	p.o.Events.Emit(ctx, events.Event{Kind: events.LeaderLost, Severity: events.Warning, At: p.o.Clock.Now(),
		Message: fmt.Sprintf("%s lost the engine leadership: %v", p.o.Identity, lost)})
}

// call runs f on the lock-holding connection, one call at a time, within a
// deadline of a third of the Lease that never outlasts the lease, and cut
// short when the leadership ends. When f succeeds, the lease is renewed
// from when the call was sent; when it misses its deadline or leaves the
// connection closed, the leadership ends at once and the lead loop gives
// the connection (and so the lock) up. A call that finds the lease run out
// fails with ErrLeaseExpired, one made without the lock with ErrNotLeader.
func (p *Postgres) call(ctx context.Context, what string, f func(context.Context, *pgx.Conn) error) error {
	p.io.Lock()
	defer p.io.Unlock()
	sent := p.o.Clock.Now()
	p.mu.Lock()
	conn, until, term := p.conn, p.until, p.term
	p.mu.Unlock()
	if conn == nil {
		return ErrNotLeader
	}
	d := min(p.o.Lease/3, until.Sub(sent))
	if d <= 0 {
		return ErrLeaseExpired
	}
	cctx, cancel := p.deadline(ctx, d)
	defer cancel()
	stop := context.AfterFunc(term, cancel)
	defer stop()
	p.trace("call " + what)
	err := f(cctx, conn)
	if err != nil {
		timedOut := context.Cause(cctx) == errCallTimeout
		if timedOut {
			err = fmt.Errorf("%w (%s within %s): %w", errCallTimeout, what, d, err)
		}
		if timedOut || conn.IsClosed() {
			p.endLease(conn, err)
		}
		return err
	}
	p.mu.Lock()
	if p.conn == conn && sent.Add(p.o.Lease).After(p.until) {
		p.until = sent.Add(p.o.Lease)
	}
	p.mu.Unlock()
	return nil
}

// deadline is context.WithTimeout on the elector's Clock; the returned
// cancel may be called more than once.
func (p *Postgres) deadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	t := p.o.Clock.NewTimer(d)
	done := make(chan struct{})
	go func() {
		select {
		case <-t.C():
			cancel(errCallTimeout)
		case <-done:
		}
	}()
	var once sync.Once
	return c, func() {
		once.Do(func() {
			t.Stop()
			close(done)
			cancel(context.Canceled)
		})
	}
}

// ClaimTick implements Elector through the lock-holding connection. Ticks
// only move forward: a tick no later than one claimed already (by any
// replica) is not won, so a replica whose clock lags its predecessor's does
// not evaluate a cycle older than one evaluated, and the newest claimed
// tick names the only cycle whose writes count (see evaluate.SQLState). A
// tick more than MaxClockSkew ahead of the database clock is not claimed
// (ErrClockSkew): a replica whose clock runs ahead would otherwise keep the
// others from claiming until their clocks caught up. A tick not won that is
// more than MaxClockSkew behind the newest claimed tick fails with
// ErrClockSkew too, naming that tick and its claimant, rather than reading
// as taken: the replica's clock lags, and it would lead without evaluating
// anything, silently, until its clock caught up. A claim that finds
// the connection dead ends the leadership at once.
func (p *Postgres) ClaimTick(ctx context.Context, tick time.Time) (bool, error) {
	if !p.IsLeader() {
		return false, ErrNotLeader
	}
	var won bool
	var dbNow time.Time
	var newest *time.Time // the newest tick claimed before this claim, and by whom
	var newestBy *string
	skew := int64(-1) // not checked
	if p.o.MaxClockSkew >= 0 {
		skew = p.o.MaxClockSkew.Microseconds()
	}
	err := p.call(ctx, "claim", func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, `WITH claim AS (
				INSERT INTO governor_engine_ticks (tick, leader)
				SELECT $1, $2 WHERE ($3::bigint < 0 OR $1 <= now() + $3::bigint * interval '1 microsecond')
					AND NOT EXISTS (SELECT 1 FROM governor_engine_ticks WHERE tick >= $1)
				ON CONFLICT (tick) DO NOTHING
				RETURNING tick)
			SELECT EXISTS (SELECT 1 FROM claim), now(), n.tick, n.leader
			FROM (SELECT 1) one
			LEFT JOIN LATERAL (SELECT tick, leader FROM governor_engine_ticks ORDER BY tick DESC LIMIT 1) n ON true`,
			tick.UTC(), p.o.Identity, skew).Scan(&won, &dbNow, &newest, &newestBy)
	})
	switch {
	case err != nil:
	case won:
		p.metrics.saw(tick)
	case newest != nil:
		p.metrics.saw(*newest)
	}
	maxSkew := time.Duration(skew) * time.Microsecond
	switch {
	case err != nil || won || skew < 0:
	case tick.Sub(dbNow) > maxSkew:
		err = fmt.Errorf("%w: tick %s is %s ahead of the database clock (%s), more than MaxClockSkew %s",
			ErrClockSkew, tick.UTC().Format(time.RFC3339Nano), tick.Sub(dbNow).Round(time.Millisecond),
			dbNow.UTC().Format(time.RFC3339Nano), p.o.MaxClockSkew)
	case newest != nil && newest.Sub(tick) > maxSkew:
		// Ticks only move forward: this replica claims nothing until its
		// clock reaches the newest tick. Claimed at their ticks' times,
		// ticks of replicas whose clocks agree within MaxClockSkew are
		// never that far apart.
		by := ""
		if newestBy != nil {
			by = *newestBy
		}
		err = fmt.Errorf("%w: tick %s is %s behind the newest claimed tick %s (claimed by %q), more than MaxClockSkew %s: this replica's clock lags, and it claims nothing until it reaches that tick",
			ErrClockSkew, tick.UTC().Format(time.RFC3339Nano), newest.Sub(tick).Round(time.Millisecond),
			newest.UTC().Format(time.RFC3339Nano), by, p.o.MaxClockSkew)
	}
	if err != nil {
		p.claims.WithLabelValues("error").Inc()
		return false, fmt.Errorf("leader: claim tick: %w", err)
	}
	if !won {
		p.claims.WithLabelValues("taken").Inc()
		return false, nil
	}
	p.claims.WithLabelValues("won").Inc()
	// Older ticks can no longer be claimed twice: keep the table small.
	if err := p.call(ctx, "prune", func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM governor_engine_ticks WHERE tick < $1`, tick.UTC().Add(-p.o.TickRetention))
		return err
	}); err != nil {
		p.o.Logger.Warn("leader: prune ticks", "err", err)
	}
	return true, nil
}

// endLease ends the leadership held through conn now: IsLeader turns false,
// every LeaderContext ends with cause err, and the lead loop gives the lock
// up.
func (p *Postgres) endLease(conn *pgx.Conn, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != conn {
		return
	}
	p.until = time.Time{}
	p.endTerm(err)
	select {
	case p.broken <- err:
	default:
	}
}
