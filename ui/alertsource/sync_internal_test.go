package alertsource

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"governor.dev/governor/sdk/clock"
)

// A standby reads the store at most once per SyncEvery, however many
// readers ask, and readers that ask together share one read.
func TestStandbyReadsTheStoreAtMostOncePerInterval(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	var reads atomic.Int32
	release := make(chan struct{})
	s := &Source{clk: clk, every: time.Second, syncing: make(chan struct{}, 1),
		leading: func() bool { return false },
		readStore: func(context.Context) error {
			reads.Add(1)
			<-release
			return nil
		}}

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, s.sync(ctx))
		}()
	}
	close(release)
	wg.Wait()
	require.EqualValues(t, 1, reads.Load(), "readers asking together share one store read")

	clk.Advance(999 * time.Millisecond)
	require.NoError(t, s.sync(ctx))
	require.EqualValues(t, 1, reads.Load(), "a read within the interval serves from memory")

	clk.Advance(time.Millisecond)
	require.NoError(t, s.sync(ctx))
	require.EqualValues(t, 2, reads.Load(), "a read once the interval passed reads the store again")
}

// A failed store read serves nobody: the next reader reads the store again.
func TestStandbyRereadsTheStoreAfterAFailedRead(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	fail := errors.New("store: connection refused")
	var reads int
	s := &Source{clk: clk, every: time.Second, syncing: make(chan struct{}, 1),
		leading: func() bool { return false },
		readStore: func(context.Context) error {
			reads++
			if reads == 1 {
				return fail
			}
			return nil
		}}
	require.ErrorIs(t, s.sync(ctx), fail)
	require.NoError(t, s.sync(ctx))
	require.Equal(t, 2, reads)
}

// Readers queued behind a store read slower than SyncEvery are served by
// it: a slow store is read once, not once per reader (each would find the
// last read too old and read the store again, one after another).
func TestReadersQueuedBehindASlowReadShareIt(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	var reads atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	s := &Source{clk: clk, every: time.Second, syncing: make(chan struct{}, 1),
		leading: func() bool { return false },
		readStore: func(context.Context) error {
			if reads.Add(1) == 1 {
				close(started)
				<-release
			}
			return nil
		}}
	first := make(chan error, 1)
	go func() { first <- s.sync(ctx) }()
	<-started
	// The read takes five seconds; four readers ask meanwhile.
	clk.Advance(5 * time.Second)
	var wg sync.WaitGroup
	var queued atomic.Int32
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			queued.Add(1)
			assert.NoError(t, s.sync(ctx))
		}()
	}
	for queued.Load() < 4 {
		runtime.Gosched()
	}
	close(release)
	require.NoError(t, <-first)
	wg.Wait()
	require.EqualValues(t, 1, reads.Load(), "readers queued behind a slow read are served by it")
}
