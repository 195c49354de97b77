package silence

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"governor.dev/governor/alerts"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func mustMatchers(t *testing.T, s string) alerts.Matchers {
	t.Helper()
	m, err := alerts.ParseMatchers(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestValidate(t *testing.T) {
	ok := Silence{Matchers: mustMatchers(t, `service="a"`), StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy"}
	tests := []struct {
		name string
		edit func(*Silence)
		want string
	}{
		{"valid", func(*Silence) {}, ""},
		{"no matchers", func(s *Silence) { s.Matchers = nil }, "matchers: at least one"},
		{"matches all", func(s *Silence) { s.Matchers = mustMatchers(t, `service=~".*"`) }, "at least one matcher must not match the empty string"},
		// service!="a" also mutes every alert without a service label: refused
		// as Alertmanager does, without claiming it matches every alert.
		{"only a negative matcher", func(s *Silence) { s.Matchers = mustMatchers(t, `service!="a"`) },
			`matchers: at least one matcher must not match the empty string: {service!="a"} also mutes every alert without those labels`},
		{"negative and empty matchers", func(s *Silence) { s.Matchers = mustMatchers(t, `service!="a", env=""`) }, "must not match the empty string"},
		{"negative and positive matchers", func(s *Silence) { s.Matchers = mustMatchers(t, `service!="a", env="prod"`) }, ""},
		{"no start", func(s *Silence) { s.StartsAt = time.Time{} }, "starts_at"},
		{"end before start", func(s *Silence) { s.EndsAt = t0 }, "ends_at"},
		{"no end", func(s *Silence) { s.EndsAt = time.Time{} }, "ends_at: must be set"},
		{"no author", func(s *Silence) { s.CreatedBy = " " }, "created_by"},
		{"no comment", func(s *Silence) { s.Comment = "" }, "comment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.edit(&s)
			err := s.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSetMutesInWindowAndExpires(t *testing.T) {
	st := NewSet()
	s, err := st.Add(Silence{Matchers: mustMatchers(t, `{service="a", severity=~"P1|P2"}`), StartsAt: t0.Add(time.Minute),
		EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "maintenance"})
	if err != nil || s.ID == "" {
		t.Fatalf("add: %+v %v", s, err)
	}
	l := alerts.Labels{"service": "a", "severity": "P1"}
	tests := []struct {
		at     time.Time
		labels alerts.Labels
		muted  bool
	}{
		{t0, l, false},
		{t0.Add(time.Minute), l, true},
		{t0.Add(time.Minute), alerts.Labels{"service": "a", "severity": "P0"}, false},
		{t0.Add(time.Minute), alerts.Labels{"service": "b", "severity": "P1"}, false},
		{t0.Add(time.Hour), l, false},
	}
	for _, tt := range tests {
		if got := len(st.Muted(tt.labels, tt.at)) > 0; got != tt.muted {
			t.Fatalf("Muted(%v, %s) = %v, want %v", tt.labels, tt.at, got, tt.muted)
		}
	}
	if _, err := st.Expire(s.ID, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if len(st.Muted(l, t0.Add(3*time.Minute))) != 0 {
		t.Fatal("expired silence still mutes")
	}
	if _, err := st.Expire("nope", t0); !errors.Is(err, alerts.ErrNotFound) {
		t.Fatalf("expire unknown: %v", err)
	}
	if len(st.List()) != 1 {
		t.Fatal("list")
	}
}

// Expired computes the ended copy without touching the set, so a caller can
// store it before the set changes; Get reads one silence.
func TestExpiredLeavesSetUnchanged(t *testing.T) {
	ms, _ := alerts.ParseMatchers(`{service="a"}`)
	st := NewSet()
	s, err := st.Add(Silence{Matchers: ms, StartsAt: t0.Add(time.Hour), EndsAt: t0.Add(2 * time.Hour), CreatedBy: "ops", Comment: "later"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(s.ID)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("Get = %+v %v, want %+v", got, err, s)
	}
	// Not started yet: both ends move to t.
	if e := s.Expired(t0); !e.StartsAt.Equal(t0) || !e.EndsAt.Equal(t0) {
		t.Fatalf("Expired(t0) = %+v", e)
	}
	// Already ended: unchanged.
	if e := s.Expired(t0.Add(3 * time.Hour)); !reflect.DeepEqual(e, s) {
		t.Fatalf("Expired after the end = %+v, want unchanged", e)
	}
	if got, _ := st.Get(s.ID); !reflect.DeepEqual(got, s) {
		t.Fatalf("set changed by Expired: %+v", got)
	}
	if _, err := st.Get("nope"); !errors.Is(err, alerts.ErrNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
}

// TestSetPruneRemovesEndedSilences: Prune drops the silences that ended
// before the cutoff (kept until then so that they can be listed); the
// others stay.
func TestSetPruneRemovesEndedSilences(t *testing.T) {
	ms := mustMatchers(t, `service="a"`)
	st := NewSet(
		Silence{ID: "old", Matchers: ms, StartsAt: t0, EndsAt: t0.Add(time.Hour)},
		Silence{ID: "cutoff", Matchers: ms, StartsAt: t0, EndsAt: t0.Add(2 * time.Hour)},
		Silence{ID: "active", Matchers: ms, StartsAt: t0, EndsAt: t0.Add(48 * time.Hour)},
	)
	if n := st.Prune(t0.Add(2 * time.Hour)); n != 1 {
		t.Fatalf("pruned %d, want 1", n)
	}
	var ids []string
	for _, s := range st.List() {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "active,cutoff" {
		t.Fatalf("silences left %v, want active and cutoff", ids)
	}
}

// A silence is pending before StartsAt, active from StartsAt until EndsAt
// (when it mutes) and expired from EndsAt on, as Alertmanager's states.
func TestStateFollowsTheWindow(t *testing.T) {
	s := Silence{Matchers: mustMatchers(t, `service="a"`), StartsAt: t0, EndsAt: t0.Add(time.Hour)}
	tests := []struct {
		at   time.Duration
		want State
	}{
		{-time.Second, StatePending},
		{0, StateActive},
		{time.Hour - time.Nanosecond, StateActive},
		{time.Hour, StateExpired},
		{2 * time.Hour, StateExpired},
	}
	for _, tt := range tests {
		at := t0.Add(tt.at)
		if got := s.State(at); got != tt.want || (got == StateActive) != s.Active(at) {
			t.Errorf("at %s: state %s (active %v), want %s", tt.at, got, s.Active(at), tt.want)
		}
	}
	for _, st := range []State{StatePending, StateActive, StateExpired} {
		if got, err := ParseState(string(st)); err != nil || got != st {
			t.Errorf("ParseState(%q) = %q, %v", st, got, err)
		}
	}
	if _, err := ParseState("Active"); !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "state") {
		t.Errorf("ParseState(Active): %v, want ErrInvalid naming state", err)
	}
}

// FuzzSilenceJSONRoundTrip: a silence decoded from any JSON that
// validates encodes, decodes back to the same matchers and times, and is
// still valid (what the store writes and loads after a restart).
func FuzzSilenceJSONRoundTrip(f *testing.F) {
	f.Add([]byte(`{"id":"x","matchers":"{service=\"a\", severity=~\"P1|P2\"}","starts_at":"2026-03-02T10:00:00Z","ends_at":"2026-03-02T11:00:00+02:00","created_by":"ops","comment":"c"}`))
	f.Add([]byte(`{"matchers":"a!~\"\\\\d+\"","starts_at":"0001-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Silence
		if err := json.Unmarshal(b, &s); err != nil {
			return
		}
		if s.Validate() != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("valid silence %+v does not marshal: %v", s, err)
		}
		var back Silence
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		if back.Matchers.String() != s.Matchers.String() || !back.StartsAt.Equal(s.StartsAt) || !back.EndsAt.Equal(s.EndsAt) {
			t.Fatalf("round trip changed %+v into %+v", s, back)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("round trip invalid: %v", err)
		}
	})
}
