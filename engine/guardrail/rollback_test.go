package guardrail

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/rules/versioning/sqlite"
	"governor.dev/governor/sdk/clock"
)

// committedThenFails stores the rollback and then answers with the version
// and an error, as a store whose commit answer is lost to a deadline or
// whose step after the commit fails. With blind, its reads fail too until
// healed.
type committedThenFails struct {
	versioning.Store
	fail  bool
	blind bool
	calls int
}

func (s *committedThenFails) RollbackFrom(ctx context.Context, service string, from, to int64, by versioning.Actor, reason string) (versioning.Version, error) {
	s.calls++
	v, err := s.Store.RollbackFrom(ctx, service, from, to, by, reason)
	if err == nil && s.fail {
		s.fail = false
		return v, fmt.Errorf("%w: rollback: context deadline exceeded", versioning.ErrUnavailable)
	}
	return v, err
}

func (s *committedThenFails) List(ctx context.Context, f versioning.ListFilter) ([]versioning.Version, error) {
	if s.blind {
		return nil, fmt.Errorf("%w: list: connection refused", versioning.ErrUnavailable)
	}
	return s.Store.List(ctx, f)
}

func (s *committedThenFails) Get(ctx context.Context, service string, n int64) (versioning.Version, error) {
	if s.blind {
		return versioning.Version{}, fmt.Errorf("%w: get: connection refused", versioning.ErrUnavailable)
	}
	return s.Store.Get(ctx, service, n)
}

func (s *committedThenFails) Active(ctx context.Context, service string) (versioning.Version, error) {
	if s.blind {
		return versioning.Version{}, fmt.Errorf("%w: active: connection refused", versioning.ErrUnavailable)
	}
	return s.Store.Active(ctx, service)
}

// TestRollbackStoredDespiteAStoreErrorIsRecordedAsARollback: a store that
// commits the rollback and then answers with an error (a deadline passing
// at commit, a step after it failing) has rolled back: the decision is
// final with the rollback's number, one auto_rollback event is emitted and
// the error is reported too. When the store cannot even be read to tell,
// the next cycle, which sees the rollback active, records it so. No second
// rollback is made either way.
func TestRollbackStoredDespiteAStoreErrorIsRecordedAsARollback(t *testing.T) {
	for _, blind := range []bool{false, true} {
		t.Run(fmt.Sprintf("blind=%v", blind), func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			inner, at := liveVersions(t, clk)
			st := &committedThenFails{Store: inner, fail: true, blind: blind}
			v2, err := inner.Active(ctx, "checkout")
			if err != nil {
				t.Fatal(err)
			}
			g, rec := regressionGuard(t, st, at)
			clk.Advance(5 * time.Minute)
			final, err := g.Observe(ctx, clk.Now(), []versioning.Version{v2})
			if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") {
				t.Fatalf("error %v, want the store's error reported", err)
			}
			if blind {
				st.blind = false
				clk.Advance(10 * time.Second)
				act, err := inner.Active(ctx, "checkout")
				if err != nil {
					t.Fatal(err)
				}
				if final, err = g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
					t.Fatal(err)
				}
			}
			if len(final) != 1 || final[0].Version != 2 || final[0].Verdict != Regression || final[0].RollbackVersion != 3 {
				t.Fatalf("final decisions %+v, want v2 rolled back as v3", final)
			}
			if evs := rec.Events(events.AutoRollback); len(evs) != 1 || evs[0].Version != 3 {
				t.Fatalf("events %+v, want one auto_rollback for v3", evs)
			}
			clk.Advance(10 * time.Second)
			act, _ := inner.Active(ctx, "checkout")
			if _, err := g.Observe(ctx, clk.Now(), []versioning.Version{act}); err != nil {
				t.Fatal(err)
			}
			if vs, _ := inner.List(ctx, versioning.ListFilter{Service: "checkout"}); len(vs) != 3 {
				t.Fatalf("%d versions, want 3 (no duplicate rollback)", len(vs))
			}
			if evs := rec.Events(events.AutoRollback); len(evs) != 1 {
				t.Fatalf("events %+v, want one auto_rollback", evs)
			}
		})
	}
}

// TestRollbackThatDidNotLandIsRetriedWithoutADuplicate: a rollback the
// store answers with a version and an error but did not store (the
// transaction aborted before its commit) is no rollback: the regression
// stays open, naming the failure, no event is emitted, the engine keeps
// holding proposals, and the next cycle retries it, storing one rollback.
func TestRollbackThatDidNotLandIsRetriedWithoutADuplicate(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	failing := true
	st, err := sqlite.Open(ctx, sqlite.Options{Path: ":memory:", Clock: clk, RetryBackoff: -1,
		BeforeCommit: func(op string, _ int) error {
			if op == "rollback" && failing {
				return errors.New("disk I/O error")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i, rate := range []float64{100, 10} {
		p, err := st.Propose(ctx, versioning.Proposal{BaseVersion: int64(i), Ruleset: ruleset(rate), Author: alice, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Minute)
		if _, err := st.Approve(ctx, "checkout", p.Number, bob, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	at := clk.Now()
	v2, _ := st.Active(ctx, "checkout")
	g, rec := regressionGuard(t, st, at)
	clk.Advance(5 * time.Minute)
	final, err := g.Observe(ctx, clk.Now(), []versioning.Version{v2})
	if err == nil {
		t.Fatal("a failed rollback reported no error")
	}
	if len(final) != 0 {
		t.Fatalf("final %+v, want none: the rollback did not land", final)
	}
	if !g.Watching("checkout") {
		t.Fatal("not watching after a failed rollback")
	}
	ds := g.Decisions()
	if len(ds) != 1 || ds[0].Verdict != Regression || ds[0].Final || !strings.Contains(ds[0].Reason, "disk I/O error") {
		t.Fatalf("decisions %+v, want an open regression naming the failure", ds)
	}
	if evs := rec.Events(""); len(evs) != 0 {
		t.Fatalf("events %+v, want none", evs)
	}
	failing = false
	clk.Advance(10 * time.Second)
	final, err = g.Observe(ctx, clk.Now(), []versioning.Version{v2})
	if err != nil {
		t.Fatal(err)
	}
	if len(final) != 1 || final[0].RollbackVersion != 3 {
		t.Fatalf("final %+v, want v2 rolled back as v3", final)
	}
	if vs, _ := st.List(ctx, versioning.ListFilter{Service: "checkout"}); len(vs) != 3 {
		t.Fatalf("%d versions, want 3", len(vs))
	}
	if evs := rec.Events(events.AutoRollback); len(evs) != 1 {
		t.Fatalf("events %+v, want one auto_rollback", evs)
	}
}
