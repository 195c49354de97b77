package silence

import (
	"testing"
	"time"
)

// An edit keeps the silence's ID only where Alertmanager's does: same
// matchers, and an active silence keeping its start and not ending in the
// past, or a pending one not starting in the past. Every other edit (other
// matchers, a moved start, an expired silence) is a new silence, the old
// one expired, so that the list shows what muted what and when.
func TestUpdatableInPlaceFollowsAlertmanager(t *testing.T) {
	ms := mustMatchers(t, `service="a"`)
	now := t0.Add(10 * time.Minute)
	active := Silence{ID: "x", Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy"}
	pending := Silence{ID: "x", Matchers: ms, StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour), CreatedBy: "ops", Comment: "later"}
	expired := Silence{ID: "x", Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Minute), CreatedBy: "ops", Comment: "done"}
	tests := []struct {
		name string
		old  Silence
		edit func(*Silence)
		want bool
	}{
		{"active, later end", active, func(s *Silence) { s.EndsAt = t0.Add(2 * time.Hour) }, true},
		{"active, earlier end", active, func(s *Silence) { s.EndsAt = now.Add(time.Minute) }, true},
		{"active, ending now", active, func(s *Silence) { s.EndsAt = now }, true},
		{"active, other comment and author", active, func(s *Silence) { s.Comment, s.CreatedBy = "longer", "sre" }, true},
		{"active, ending in the past", active, func(s *Silence) { s.EndsAt = now.Add(-time.Second) }, false},
		{"active, other start", active, func(s *Silence) { s.StartsAt = now }, false},
		{"active, other matchers", active, func(s *Silence) { s.Matchers = mustMatchers(t, `service="b"`) }, false},
		{"active, one more matcher", active, func(s *Silence) { s.Matchers = mustMatchers(t, `service="a", env="prod"`) }, false},
		{"pending, earlier start", pending, func(s *Silence) { s.StartsAt = now.Add(30 * time.Minute) }, true},
		{"pending, starting now", pending, func(s *Silence) { s.StartsAt = now }, true},
		{"pending, starting in the past", pending, func(s *Silence) { s.StartsAt = t0 }, false},
		{"pending, other matchers", pending, func(s *Silence) { s.Matchers = mustMatchers(t, `service="b"`) }, false},
		{"expired, later end", expired, func(s *Silence) { s.EndsAt = now.Add(time.Hour) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := tt.old
			tt.edit(&next)
			if got := tt.old.UpdatableInPlace(next, now); got != tt.want {
				t.Fatalf("UpdatableInPlace = %v, want %v", got, tt.want)
			}
		})
	}
}

// A silence's version is the same whatever the zones of its times (as the
// store reads it back), and changes with every write: an edit, an expiry.
// Expiring one that ended already changes nothing.
func TestVersionChangesWithEveryWrite(t *testing.T) {
	s := Silence{ID: "x", Matchers: mustMatchers(t, `service="a"`), StartsAt: t0, EndsAt: t0.Add(time.Hour),
		CreatedBy: "ops", Comment: "deploy", CreatedAt: t0, UpdatedAt: t0}
	v := s.Version()
	zoned := s
	zone := time.FixedZone("CET", 3600)
	zoned.StartsAt, zoned.EndsAt, zoned.CreatedAt, zoned.UpdatedAt = s.StartsAt.In(zone), s.EndsAt.In(zone), s.CreatedAt.In(zone), s.UpdatedAt.In(zone)
	if zoned.Version() != v {
		t.Fatalf("version in another zone %s, want %s", zoned.Version(), v)
	}
	edited := s
	edited.Comment = "deploy, longer"
	expired := s.Expired(t0.Add(time.Minute))
	if !expired.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("expired at %s, updated at %s", expired.EndsAt, expired.UpdatedAt)
	}
	for name, other := range map[string]Silence{"edited": edited, "expired": expired} {
		if other.Version() == v {
			t.Fatalf("%s: version %s unchanged", name, v)
		}
	}
	if again := expired.Expired(t0.Add(time.Hour)); again.Version() != expired.Version() {
		t.Fatal("expiring an ended silence changed its version")
	}
}
