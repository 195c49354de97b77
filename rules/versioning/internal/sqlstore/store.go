// Package sqlstore implements versioning.Store once over a small database
// abstraction, so the PostgreSQL (pgx) and SQLite (database/sql) stores share
// every rule of the lifecycle and differ only in their driver adapter and a
// few dialect details. Queries use $1-style placeholders, which both accept.
package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// Row is one result row.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set; Close must be called.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Tx runs statements, inside a transaction or not.
type Tx interface {
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// DB is what a driver adapter provides.
type DB interface {
	// InTx runs fn in a read-write transaction, committing if fn returns nil
	// and rolling back otherwise.
	InTx(ctx context.Context, fn func(Tx) error) error
	// Read runs fn with read-only statements outside any transaction: for
	// reads of one statement, which sees one state of the database.
	Read(ctx context.Context, fn func(Tx) error) error
	// Snapshot runs fn with read-only statements in one read-only
	// transaction whose statements all see the same consistent snapshot of
	// the database (PostgreSQL: REPEATABLE READ; SQLite: a deferred
	// transaction, whose first read fixes what it sees), for reads of more
	// than one statement: a version and its approvals.
	Snapshot(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// Dialect holds what differs between databases.
type Dialect struct {
	Name string
	// ForUpdate is appended to SELECTs that lock the rows they read
	// (" FOR UPDATE"; empty where a transaction locks the whole database).
	ForUpdate string
	// SkipLocked is appended to the outbox claim's row selection.
	SkipLocked string
	// NotifyOutbox, if set, is executed with the service name as $1 in
	// every transaction that writes an outbox row.
	NotifyOutbox string
	// Retryable reports errors after which the whole transaction may be run
	// again (serialization failures, deadlocks, busy database).
	Retryable func(error) bool
	// NoRows reports the driver's "no rows" error.
	NoRows func(error) bool
	// UniqueViolation reports a unique-constraint error.
	UniqueViolation func(error) bool
	// Fences makes the store honour a versioning.Fence on the context of a
	// write (see fence): the database holds the ticks the engine's leaders
	// claim (governor_engine_ticks). Off, fences are ignored.
	Fences bool
}

// ErrRetryable marks an error as transient: the transaction is run again.
// Drivers' transient errors are recognised through Dialect.Retryable; tests
// return this from Options.BeforeCommit to simulate them.
var ErrRetryable = errors.New("sqlstore: transient failure")

// Options configure a Store.
type Options struct {
	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Timeout bounds each operation; default 10s.
	Timeout time.Duration
	// MaxAttempts of a transaction that fails transiently; default 5.
	MaxAttempts int
	// RetryBackoff is the wait before the second attempt, doubled after
	// each; default 5ms, negative for none.
	RetryBackoff time.Duration
	// BeforeCommit, if set, runs inside every write transaction after its
	// writes, before its last fence check and its commit (fault injection
	// for tests): an error aborts the attempt.
	BeforeCommit func(op string, attempt int) error
}

// Store implements versioning.Store.
type Store struct {
	db    DB
	d     Dialect
	o     Options
	ready chan struct{}
	m     metrics
}

var _ versioning.Store = (*Store)(nil)

type metrics struct {
	ops     *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	retries *prometheus.CounterVec
}

var operations = []string{"propose", "rebase", "revise", "approve", "reject", "withdraw", "rollback", "emergency_publish",
	"set_policy", "record_audit", "claim_outbox", "mark_outbox_done", "mark_outbox_undeliverable", "outbox_failures", "count_outbox_failures", "requeue_outbox", "raise_numbering", "active", "get", "list",
	"services", "policy", "audit", "verify_audit"}

// New builds a Store over db. The schema must already be migrated.
func New(db DB, d Dialect, o Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlstore: db is nil")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 5 * time.Millisecond
	}
	f := promauto.With(o.Registerer)
	labels := prometheus.Labels{"store": d.Name}
	s := &Store{db: db, d: d, o: o, ready: make(chan struct{}, 1), m: metrics{
		ops: f.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_versioning_operations_total", ConstLabels: labels,
			Help: "Rule store operations by outcome (ok or the error kind).",
		}, []string{"operation", "result"}),
		seconds: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "governor_versioning_operation_seconds", ConstLabels: labels,
			Help:    "Latency of rule store operations.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
		}, []string{"operation"}),
		retries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "governor_versioning_tx_retries_total", ConstLabels: labels,
			Help: "Transactions run again after a transient failure.",
		}, []string{"operation"}),
	}}
	for _, op := range operations {
		s.m.ops.WithLabelValues(op, "ok")
		s.m.seconds.WithLabelValues(op)
		s.m.retries.WithLabelValues(op)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// OutboxReady implements versioning.Outbox.
func (s *Store) OutboxReady() <-chan struct{} { return s.ready }

func (s *Store) now() time.Time { return s.o.Clock.Now().UTC().Truncate(time.Microsecond) }

// op times an operation, bounds it by the timeout and maps its error.
func (s *Store) op(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	return s.timed(ctx, name, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
		return fn(ctx)
	})
}

// bounded runs fn under the store's timeout.
func (s *Store) bounded(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	return fn(ctx)
}

// timed measures an operation and maps its error; the caller bounds it.
func (s *Store) timed(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	start := time.Now()
	err := s.mapErr(name, fn(ctx))
	s.m.seconds.WithLabelValues(name).Observe(time.Since(start).Seconds())
	s.m.ops.WithLabelValues(name, resultLabel(err)).Inc()
	return err
}

// writeTx is the Tx of a write transaction. It records whether the write
// locked a service row (service), which makes the write a fenced one: its
// last statement checks the context's fence again (see fence).
type writeTx struct {
	Tx
	fenced bool
}

// write runs fn in a transaction, again on transient failures.
// outbox reports whether the transaction wrote an outbox row. A write that
// locked a service checks the context's fence as the last statement of its
// transaction, after every write of fn, just before COMMIT.
func (s *Store) write(ctx context.Context, name string, fn func(tx Tx) (outbox bool, err error)) error {
	backoff := s.o.RetryBackoff
	for attempt := 1; ; attempt++ {
		var wroteOutbox bool
		err := s.db.InTx(ctx, func(dbTx Tx) error {
			tx := &writeTx{Tx: dbTx}
			var err error
			if wroteOutbox, err = fn(tx); err != nil {
				return err
			}
			if s.o.BeforeCommit != nil {
				if err := s.o.BeforeCommit(name, attempt); err != nil {
					return err
				}
			}
			if tx.fenced {
				return s.fence(ctx, dbTx)
			}
			return nil
		})
		if err == nil {
			if wroteOutbox {
				select {
				case s.ready <- struct{}{}:
				default:
				}
			}
			return nil
		}
		if !s.retryable(err) || attempt >= s.o.MaxAttempts || ctx.Err() != nil {
			return err
		}
		s.m.retries.WithLabelValues(name).Inc()
		s.o.Logger.LogAttrs(ctx, slog.LevelDebug, "rule store transaction retried",
			slog.String("operation", name), slog.Int("attempt", attempt), slog.Any("error", err))
		if backoff > 0 {
			t := s.o.Clock.NewTimer(backoff)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return err
			}
			backoff *= 2
		}
	}
}

func (s *Store) retryable(err error) bool {
	return errors.Is(err, ErrRetryable) || (s.d.Retryable != nil && s.d.Retryable(err))
}

// mapErr is the one place that turns database errors into the domain's.
func (s *Store) mapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case isDomain(err):
		return err
	case s.d.NoRows != nil && s.d.NoRows(err):
		return fmt.Errorf("%w: %s", versioning.ErrNotFound, op)
	case s.d.UniqueViolation != nil && s.d.UniqueViolation(err):
		return fmt.Errorf("%w: %s: concurrent change: %w", versioning.ErrConflict, op, err)
	default:
		return fmt.Errorf("%w: %s: %w", versioning.ErrUnavailable, op, err)
	}
}

var domainErrors = []error{versioning.ErrNotFound, versioning.ErrConflict, versioning.ErrSelfApproval,
	versioning.ErrForbidden, versioning.ErrInvalidState, versioning.ErrInvalid, versioning.ErrTampered,
	versioning.ErrUnavailable, versioning.ErrFenced}

func isDomain(err error) bool {
	for _, d := range domainErrors {
		if errors.Is(err, d) {
			return true
		}
	}
	return false
}

func resultLabel(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, versioning.ErrNotFound):
		return "not_found"
	case errors.Is(err, versioning.ErrConflict):
		return "conflict"
	case errors.Is(err, versioning.ErrSelfApproval):
		return "self_approval"
	case errors.Is(err, versioning.ErrForbidden):
		return "forbidden"
	case errors.Is(err, versioning.ErrInvalidState):
		return "invalid_state"
	case errors.Is(err, versioning.ErrInvalid):
		return "invalid"
	case errors.Is(err, versioning.ErrTampered):
		return "tampered"
	case errors.Is(err, versioning.ErrFenced):
		return "fenced"
	}
	return "unavailable"
}
