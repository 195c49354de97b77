package manager

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

// failingSilences is a store whose PutSilence fails while fail is set.
type failingSilences struct {
	store.Store
	fail bool
}

func (f *failingSilences) PutSilence(ctx context.Context, s silence.Silence) error {
	if f.fail {
		return errors.New("disk full")
	}
	return f.Store.PutSilence(ctx, s)
}

// An expiry the store refused is not applied: the running manager keeps
// muting, as the store (what a restart loads) still holds the silence
// active; once the store accepts it, both end it.
func TestExpireSilenceRefusedByStoreLeavesSilenceActive(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	fs := &failingSilences{Store: h.st}
	h.m.o.Store = fs
	ms, _ := alerts.ParseMatchers(`{service="checkout"}`)
	s, err := h.m.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(2 * time.Hour),
		CreatedBy: "ops", Comment: "maintenance"})
	if err != nil {
		t.Fatal(err)
	}
	l := alerts.Labels{"service": "checkout"}
	mutes := func(at time.Time) (inMemory, inStore bool) {
		t.Helper()
		stored, err := h.st.Silences(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(h.m.silences.Muted(l, at)) > 0, len(stored) == 1 && stored[0].Mutes(l, at)
	}
	now := t0.Add(10 * time.Minute)
	fs.fail = true
	if err := h.m.ExpireSilence(ctx, s.ID, now); err == nil {
		t.Fatal("expire: want the store error")
	}
	if inMemory, inStore := mutes(now.Add(time.Minute)); !inMemory || !inStore {
		t.Fatalf("after a refused expire: running manager mutes=%v, store mutes=%v; want both", inMemory, inStore)
	}
	fs.fail = false
	if err := h.m.ExpireSilence(ctx, s.ID, now); err != nil {
		t.Fatal(err)
	}
	if inMemory, inStore := mutes(now.Add(time.Minute)); inMemory || inStore {
		t.Fatalf("after the expire: running manager mutes=%v, store mutes=%v; want neither", inMemory, inStore)
	}
	if err := h.m.ExpireSilence(ctx, "nope", now); !errors.Is(err, alerts.ErrNotFound) {
		t.Fatalf("expire unknown: %v", err)
	}
}

// A silence that has already ended on the manager's clock mutes nothing: it
// is refused with ErrInvalid naming ends_at, and neither kept nor stored.
func TestAddSilenceEndedAlreadyRefused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ms, _ := alerts.ParseMatchers(`{service="checkout"}`)
	now := h.clk.Now()
	for _, end := range []time.Time{now.Add(-time.Hour), now} {
		_, err := h.m.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: now.Add(-2 * time.Hour), EndsAt: end,
			CreatedBy: "ops", Comment: "deploy"})
		if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "ends_at") || !strings.Contains(err.Error(), "in the past") {
			t.Fatalf("silence ending at %s (now %s): %v, want ErrInvalid naming ends_at", end, now, err)
		}
	}
	stored, err := h.st.Silences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 0 || len(h.m.Silences()) != 0 {
		t.Fatalf("refused silences kept: store %v, manager %v", stored, h.m.Silences())
	}
}
