package manager

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/dispatch"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
)

// failingSilences is a store whose writes of silences fail while fail is
// set.
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

func (f *failingSilences) ReplaceSilence(ctx context.Context, prev, next silence.Silence) error {
	if f.fail {
		return errors.New("disk full")
	}
	return f.Store.ReplaceSilence(ctx, prev, next)
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
		return len(h.m.sils().Muted(l, at)) > 0, len(stored) == 1 && stored[0].Mutes(l, at)
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

// Ended silences are kept for SilenceRetention (120h by default, as in
// Alertmanager), listed and visible in the store, then deleted from both:
// otherwise every silence ever made is loaded at each start and listed by
// GET /silences forever. A restart does not bring a deleted one back.
func TestEndedSilencesDeletedAfterRetention(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ms, _ := alerts.ParseMatchers(`{service="checkout"}`)
	add := func(end time.Duration) silence.Silence {
		t.Helper()
		s, err := h.m.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(end), CreatedBy: "ops", Comment: "deploy"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	expired := add(2 * time.Hour)
	if err := h.m.ExpireSilence(ctx, expired.ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ended := add(3 * time.Hour)
	kept := add(30 * time.Hour)
	ids := func() (inManager, inStore string) {
		t.Helper()
		stored, err := h.st.Silences(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var a, b []string
		for _, s := range h.m.Silences() {
			a = append(a, s.ID)
		}
		for _, s := range stored {
			b = append(b, s.ID)
		}
		slices.Sort(a)
		slices.Sort(b)
		return strings.Join(a, ","), strings.Join(b, ",")
	}
	sorted := func(ids ...string) string {
		slices.Sort(ids)
		return strings.Join(ids, ",")
	}
	all := sorted(expired.ID, ended.ID, kept.ID)
	h.at(time.Hour + DefaultSilenceRetention - time.Minute) // the expired one ended 120h ago less a minute
	if m, s := ids(); m != all || s != all {
		t.Fatalf("within the retention: manager %s, store %s; want %s", m, s, all)
	}
	h.at(3*time.Hour + DefaultSilenceRetention) // an hour later: the expired one is gone; ended ended 120h ago
	if m, s := ids(); m != sorted(ended.ID, kept.ID) || s != m {
		t.Fatalf("the expired silence after its retention: manager %s, store %s; want %s", m, s, sorted(ended.ID, kept.ID))
	}
	h.close()
	h.open()
	h.at(30*time.Hour + DefaultSilenceRetention + time.Hour)
	if m, s := ids(); m != "" || s != "" {
		t.Fatalf("after every retention and a restart: manager %q, store %q; want none", m, s)
	}
}

// SilenceRetention is configurable: with 1h, a silence ended 2h ago is
// deleted at the next prune.
func TestSilenceRetentionConfigurable(t *testing.T) {
	h := newHarness(t)
	h.close()
	h.silenceRetention = time.Hour
	h.open()
	ctx := context.Background()
	ms, _ := alerts.ParseMatchers(`{service="checkout"}`)
	if _, err := h.m.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops",
		Comment: "deploy"}); err != nil {
		t.Fatal(err)
	}
	h.at(3 * time.Hour)
	if stored, _ := h.st.Silences(ctx); len(stored) != 0 || len(h.m.Silences()) != 0 {
		t.Fatalf("silence ended 2h ago kept with a retention of 1h: manager %v, store %v", h.m.Silences(), stored)
	}
}

// An alert paged, then silenced while its group notified another alert, is
// sent again at the group interval after its silence ends, also after a
// restart in between, as Alertmanager does (the group's notified set
// changed); not at the repeat interval of its tier (1h for a P1).
func TestAlertUnsilencedAfterItsGroupNotifiedIsSentAtGroupInterval(t *testing.T) {
	h := newHarness(t)
	h.close()
	h.routes = []dispatch.Route{{Receiver: "hook", GroupBy: []string{"alertname"}}}
	h.open()
	h.db.set("load", "checkout")
	h.timeline(0, 30*time.Second, map[time.Duration][]string{30 * time.Second: {"firing Load@checkout/firing"}})
	ms, _ := alerts.ParseMatchers(`{service="checkout"}`)
	if _, err := h.m.AddSilence(context.Background(), silence.Silence{Matchers: ms, StartsAt: t0.Add(time.Minute),
		EndsAt: t0.Add(10 * time.Minute), CreatedBy: "ops", Comment: "deploy"}); err != nil {
		t.Fatal(err)
	}
	h.db.set("load", "checkout", "search")
	h.timeline(time.Minute, 5*time.Minute, map[time.Duration][]string{
		90 * time.Second: {"firing Load@search/firing"}, // checkout is silenced
	})
	h.close()
	h.open()
	h.timeline(5*time.Minute+30*time.Second, 11*time.Minute, map[time.Duration][]string{
		10 * time.Minute: {"firing Load@checkout/firing,Load@search/firing"}, // the silence ended
	})
}

// silenceRacer is a store on which another replica writes a silence
// (edit) between a replica's read of the silences and its first write of
// one.
type silenceRacer struct {
	store.Store
	edit  *silence.Silence
	armed *atomic.Bool
}

func (s silenceRacer) race(ctx context.Context) {
	if s.armed.CompareAndSwap(true, false) {
		if err := s.Store.PutSilence(ctx, *s.edit); err != nil {
			panic(err)
		}
	}
}

func (s silenceRacer) PutSilence(ctx context.Context, sl silence.Silence) error {
	s.race(ctx)
	return s.Store.PutSilence(ctx, sl)
}

func (s silenceRacer) ReplaceSilence(ctx context.Context, prev, next silence.Silence) error {
	s.race(ctx)
	return s.Store.ReplaceSilence(ctx, prev, next)
}

// An edit another replica stores between ExpireSilence's read of the
// silence and its write is neither overwritten by the silence as read nor
// passed over: without a version the edit is what expires, its author and
// comment kept; with the version read it is refused as a conflict and the
// edit stays in force.
func TestExpireSilenceRacingAnotherReplicasEdit(t *testing.T) {
	for _, versioned := range []bool{false, true} {
		t.Run(map[bool]string{false: "without a version", true: "with the version read"}[versioned], func(t *testing.T) {
			h := newHarness(t)
			h.close()
			edit, armed := new(silence.Silence), new(atomic.Bool)
			h.wrap = func(st store.Store) store.Store { return silenceRacer{Store: st, edit: edit, armed: armed} }
			h.open()
			ctx := context.Background()
			ms, _ := alerts.ParseMatchers(`service="a"`)
			s, err := h.m.AddSilence(ctx, silence.Silence{Matchers: ms, StartsAt: t0,
				EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy"})
			if err != nil {
				t.Fatal(err)
			}
			*edit = s
			edit.EndsAt, edit.CreatedBy, edit.Comment, edit.UpdatedAt = t0.Add(3*time.Hour), "dba", "migration", t0.Add(time.Minute)
			armed.Store(true)
			h.clk.Set(t0.Add(2 * time.Minute))
			if versioned {
				err = h.m.ExpireSilenceIf(ctx, s.ID, s.Version(), h.clk.Now())
			} else {
				err = h.m.ExpireSilence(ctx, s.ID, h.clk.Now())
			}
			if versioned != errors.Is(err, alerts.ErrConflict) {
				t.Fatalf("expire: %v", err)
			}
			stored, err := h.st.Silences(ctx)
			if err != nil || len(stored) != 1 {
				t.Fatalf("stored %+v, %v", stored, err)
			}
			got := stored[0]
			wantEnd := h.clk.Now()
			if versioned {
				wantEnd = edit.EndsAt
			}
			if got.CreatedBy != "dba" || got.Comment != "migration" || !got.EndsAt.Equal(wantEnd) {
				t.Fatalf("stored %+v, want the edit ending at %s", got, wantEnd)
			}
		})
	}
}
