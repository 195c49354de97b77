package guardrail

import (
	"context"
	"errors"
	"testing"
	"time"

	"governor.dev/governor/engine/events"
	"governor.dev/governor/rules/versioning"
	"governor.dev/governor/sdk/clock"
)

// fencedAfterTheNewLeader is the rules store as a replica that lost the
// lead sees it: by the time its rollback reaches the store, the new leader
// (acting as the same engine actor) has rolled the version back itself,
// and the store refuses the stale replica's write with ErrFenced.
type fencedAfterTheNewLeader struct{ versioning.Store }

func (s fencedAfterTheNewLeader) RollbackFrom(ctx context.Context, service string, from, to int64, by versioning.Actor, reason string) (versioning.Version, error) {
	if _, err := s.Store.RollbackFrom(ctx, service, from, to, by, "the new leader's rollback"); err != nil {
		return versioning.Version{}, err
	}
	return versioning.Version{}, &versioning.FencedError{Fence: versioning.Fence{Tick: time.Unix(0, 0), Holder: "engine-a"},
		Newer: time.Unix(10, 0), By: "engine-b"}
}

// TestAFencedRollbackIsNotTakenForTheNewLeaders: a rollback refused with
// ErrFenced wrote nothing, so the guardrail of the replica that no longer
// leads reports the refusal and does not claim the new leader's rollback
// of the same version as its own (no auto_rollback event, no final
// decision naming it): the new leader reports its rollback.
func TestAFencedRollbackIsNotTakenForTheNewLeaders(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner, at := liveVersions(t, clk)
	v2, err := inner.Active(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	g, rec := regressionGuard(t, fencedAfterTheNewLeader{inner}, at)
	clk.Advance(5 * time.Minute)
	final, err := g.Observe(ctx, clk.Now(), []versioning.Version{v2})
	if !errors.Is(err, versioning.ErrFenced) {
		t.Fatalf("error %v, want ErrFenced reported", err)
	}
	if len(final) != 0 {
		t.Fatalf("final decisions %+v, want none: this replica rolled nothing back", final)
	}
	if evs := rec.Events(events.AutoRollback); len(evs) != 0 {
		t.Fatalf("auto_rollback events %+v, want none: the rollback is the new leader's", evs)
	}
}
