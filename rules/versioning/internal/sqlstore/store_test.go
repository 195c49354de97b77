package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

var (
	errNoRows = errors.New("no rows")
	errUnique = errors.New("unique")
	errBusy   = errors.New("busy")
)

// fakeDB runs fn without a database and counts transactions.
type fakeDB struct {
	txs     int
	commits int
}

func (d *fakeDB) InTx(ctx context.Context, fn func(Tx) error) error {
	d.txs++
	if err := fn(nil); err != nil {
		return err
	}
	d.commits++
	return nil
}
func (d *fakeDB) Read(ctx context.Context, fn func(Tx) error) error     { return fn(nil) }
func (d *fakeDB) Snapshot(ctx context.Context, fn func(Tx) error) error { return fn(nil) }
func (d *fakeDB) Close() error                                          { return nil }

func newFake(t *testing.T, o Options) (*Store, *fakeDB, *prometheus.Registry) {
	t.Helper()
	db := &fakeDB{}
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	s, err := New(db, Dialect{
		Name:            "fake",
		Retryable:       func(err error) bool { return errors.Is(err, errBusy) },
		NoRows:          func(err error) bool { return errors.Is(err, errNoRows) },
		UniqueViolation: func(err error) bool { return errors.Is(err, errUnique) },
	}, o)
	require.NoError(t, err)
	return s, db, reg
}

func TestMapErr(t *testing.T) {
	s, _, _ := newFake(t, Options{})
	tests := []struct {
		in    error
		want  error
		label string
	}{
		{nil, nil, "ok"},
		{errNoRows, versioning.ErrNotFound, "not_found"},
		{fmt.Errorf("x: %w", errUnique), versioning.ErrConflict, "conflict"},
		{fmt.Errorf("%w: stale", versioning.ErrConflict), versioning.ErrConflict, "conflict"},
		{versioning.ErrSelfApproval, versioning.ErrSelfApproval, "self_approval"},
		{&versioning.InputError{}, versioning.ErrInvalid, "invalid"},
		{&versioning.ChainError{Seq: 1}, versioning.ErrTampered, "tampered"},
		{context.DeadlineExceeded, versioning.ErrUnavailable, "unavailable"},
		{errors.New("connection reset"), versioning.ErrUnavailable, "unavailable"},
	}
	for _, tt := range tests {
		got := s.mapErr("op", tt.in)
		if tt.want == nil {
			require.NoError(t, got)
		} else {
			require.ErrorIs(t, got, tt.want, "%v", tt.in)
		}
		require.Equal(t, tt.label, resultLabel(got))
	}
	// The driver's error stays inspectable.
	require.ErrorIs(t, s.mapErr("op", context.DeadlineExceeded), context.DeadlineExceeded)
}

func TestWriteRetriesTransientFailures(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		wantErr  error
		wantTxs  int
	}{
		{"no failure", 0, nil, 1},
		{"two transient failures", 2, nil, 3},
		{"gives up after MaxAttempts", 10, versioning.ErrUnavailable, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, db, reg := newFake(t, Options{MaxAttempts: 4, RetryBackoff: -1})
			calls := 0
			err := s.op(context.Background(), "approve", func(ctx context.Context) error {
				return s.write(ctx, "approve", func(Tx) (bool, error) {
					calls++
					if calls <= tt.failures {
						return false, fmt.Errorf("attempt %d: %w", calls, errBusy)
					}
					return true, nil
				})
			})
			if tt.wantErr == nil {
				require.NoError(t, err)
				select {
				case <-s.OutboxReady():
				default:
					t.Fatal("a committed outbox write signals OutboxReady")
				}
			} else {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorIs(t, err, errBusy)
				require.Empty(t, s.OutboxReady())
			}
			require.Equal(t, tt.wantTxs, db.txs)
			require.Equal(t, float64(tt.wantTxs-1), testutil.ToFloat64(s.m.retries.WithLabelValues("approve")))
			n, err := testutil.GatherAndCount(reg, "governor_versioning_operations_total")
			require.NoError(t, err)
			require.Positive(t, n)
		})
	}
}

func TestWriteDoesNotRetryDomainErrors(t *testing.T) {
	s, db, _ := newFake(t, Options{RetryBackoff: -1})
	err := s.write(context.Background(), "approve", func(Tx) (bool, error) {
		return false, versioning.ErrSelfApproval
	})
	require.ErrorIs(t, err, versioning.ErrSelfApproval)
	require.Equal(t, 1, db.txs)
	require.Equal(t, 0, db.commits)
}

func TestOutboxReadyCoalesces(t *testing.T) {
	s, _, _ := newFake(t, Options{})
	for range 3 {
		require.NoError(t, s.write(context.Background(), "rollback", func(Tx) (bool, error) { return true, nil }))
	}
	<-s.OutboxReady()
	require.Empty(t, s.OutboxReady(), "three commits, one pending wake-up")
}

func TestWriteBacksOffOnTheInjectedClock(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	s, db, _ := newFake(t, Options{Clock: clk, MaxAttempts: 4, RetryBackoff: 10 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		done <- s.write(context.Background(), "approve", func(Tx) (bool, error) {
			if db.txs < 4 {
				return false, errBusy
			}
			return false, nil
		})
	}()
	waitTimer := func() {
		for clk.Pending() == 0 {
			runtime.Gosched()
		}
	}
	for _, wait := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
		waitTimer()
		clk.Advance(wait - time.Millisecond)
		require.Equal(t, 1, clk.Pending(), "the back-off has not elapsed yet")
		clk.Advance(time.Millisecond)
	}
	require.NoError(t, <-done)
	require.Equal(t, 4, db.txs)
}

// itemMarker has the shape of distribution.ItemMarker, which the relay uses
// whenever its Outbox (the store) has it.
type itemMarker interface {
	MarkOutboxItemDone(ctx context.Context, it versioning.OutboxItem) error
	MarkOutboxItemUndeliverable(ctx context.Context, it versioning.OutboxItem, f versioning.OutboxFailure) (versioning.OutboxFailure, bool, error)
}

var _ itemMarker = (*Store)(nil)
