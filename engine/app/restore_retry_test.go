package app

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/engine/config"
	"governor.dev/governor/engine/evaluate"
	"governor.dev/governor/engine/leader"
)

// flakyState is a StateStore whose first Load fails, as one query can at a
// takeover (the database that just lost the old leader's session).
type flakyState struct {
	evaluate.MemState
	mu        sync.Mutex
	loads     int
	failLoads int
}

func (f *flakyState) Load(ctx context.Context) ([]evaluate.StateRow, error) {
	f.mu.Lock()
	f.loads++
	fail := f.loads <= f.failLoads
	f.mu.Unlock()
	if fail {
		return nil, errors.New("transient: connection reset")
	}
	return f.MemState.Load(ctx)
}

// TestFailedRestoreAtTakeoverIsRetried: a restore that fails at a takeover
// (one failed Load) is tried again at the next cycle, and until it succeeds
// the replica saves nothing, so the rows the previous leader persisted
// (baselines, controllers, events already reported) are not replaced by
// this replica's unrestored state.
func TestFailedRestoreAtTakeoverIsRetried(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "b"
	cfg.Interval = 10 * time.Second
	a, err := New(ctx, Options{Config: cfg, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()

	store := &flakyState{failLoads: 2}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	// The previous leader "a" persisted its state at t0.
	prev, err := evaluate.NewState(a.eval, evaluate.StateOptions{Store: &store.MemState, Leader: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prev.Save(ctx, t0); err != nil {
		t.Fatal(err)
	}
	before, _ := store.MemState.Load(ctx)
	if len(before) == 0 {
		t.Fatal("the previous leader saved no rows: the test shows nothing")
	}
	if a.state, err = evaluate.NewState(a.eval, evaluate.StateOptions{Store: store, Leader: "b"}); err != nil {
		t.Fatal(err)
	}
	leaders := func() map[string]int {
		rows, _ := store.MemState.Load(ctx)
		n := map[string]int{}
		for _, r := range rows {
			n[r.Leader]++
		}
		return n
	}

	a.tick(ctx, t0.Add(cfg.Interval))   // takeover: the restore's Load fails
	a.tick(ctx, t0.Add(2*cfg.Interval)) // fails again
	if got := leaders(); got["a"] != len(before) || got["b"] != 0 {
		t.Fatalf("after two failed restores the rows are by leader %v; want the previous leader's %d untouched", got, len(before))
	}
	a.tick(ctx, t0.Add(3*cfg.Interval)) // restores, then saves
	if store.loads != 3 {
		t.Fatalf("%d restore attempts over 3 cycles, want 3", store.loads)
	}
	if got := leaders(); got["b"] == 0 {
		t.Fatalf("after the restore succeeded the replica saved nothing: rows by leader %v", got)
	}
}

// TestCycleWhoseLeadEndedSavesNoState: the lead ends during a cycle (the
// lease ran out on a hung database; the tick's context ends with it). What
// is left of the cycle must not save this replica's state, whatever the
// state store does with an ended context (this one ignores it), since the
// next leader may already be restoring or saving; and before its next
// cycle the replica restores again, though only one interval passed, as
// another replica may have led in between.
func TestCycleWhoseLeadEndedSavesNoState(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "b"
	cfg.Interval = 10 * time.Second
	a, err := New(ctx, Options{Config: cfg, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	store := &flakyState{}
	if a.state, err = evaluate.NewState(a.eval, evaluate.StateOptions{Store: store, Leader: "b"}); err != nil {
		t.Fatal(err)
	}
	newest := func() time.Time {
		rows, _ := store.MemState.Load(ctx)
		var at time.Time
		for _, r := range rows {
			if r.At.After(at) {
				at = r.At
			}
		}
		return at
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a.tick(ctx, t0) // takeover: restores, then saves
	if store.loads != 1 || !newest().Equal(t0) {
		t.Fatalf("first cycle: %d restores, newest row %v", store.loads, newest())
	}
	ended, end := context.WithCancelCause(ctx)
	end(leader.ErrLeaseExpired)
	a.tick(ended, t0.Add(cfg.Interval))
	if got := newest(); !got.Equal(t0) {
		t.Fatalf("a cycle whose lead had ended saved rows of %v", got)
	}
	a.tick(ctx, t0.Add(2*cfg.Interval))
	if store.loads != 2 {
		t.Fatalf("%d restores, want one more after the cycle that lost the lead", store.loads)
	}
}

// TestOverrunTickDoesNotRestoreTheState: a cycle that outlasts its interval
// (the ticks that passed meanwhile skipped) is no takeover: this replica
// led all along, so no other could have saved anything. The next cycle
// does not reload the whole state (about 15 MB at 1,000 services, inside
// that cycle's own deadline, which an overloaded engine can least afford);
// once the lead ended, it does, however soon it comes back.
func TestOverrunTickDoesNotRestoreTheState(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.Identity = "127.0.0.1:0", t.TempDir(), "b"
	cfg.Interval = 10 * time.Second
	a, err := New(ctx, Options{Config: cfg, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	e := &leaseElector{}
	a.elector = e
	store := &flakyState{}
	if a.state, err = evaluate.NewState(a.eval, evaluate.StateOptions{Store: store, Leader: "b"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	a.tick(ctx, t0) // takeover: restores
	a.tick(ctx, t0.Add(3*cfg.Interval))
	if store.loads != 1 {
		t.Fatalf("%d restores after a cycle that overran two intervals under one lead, want the takeover's alone", store.loads)
	}
	e.end(leader.ErrLeaseExpired)
	// The next lead's first cycle starts with its context already ended
	// (its claim outlasted tick_timeout): it restores nothing, and the
	// restore of the lead before does not stand for this lead's.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	a.tick(ended, t0.Add(4*cfg.Interval))
	if store.loads != 1 {
		t.Fatalf("%d restores by a cycle whose context had ended, want none", store.loads-1)
	}
	a.tick(ctx, t0.Add(5*cfg.Interval))
	if store.loads != 2 {
		t.Fatalf("%d restores, want one more at the new lead's first full cycle", store.loads)
	}
}
