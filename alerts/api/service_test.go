package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/notify"
	"governor.dev/governor/alerts/notify/webhook"
	"governor.dev/governor/alerts/rule"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// setup is a Service over a manager with one firing alert (service
// checkout).
func setup(t *testing.T) (*Service, *manager.Manager, *clock.Fake) {
	t.Helper()
	s, m, clk, _ := setupAt(t, filepath.Join(t.TempDir(), "a.db"))
	return s, m, clk
}

// setupAt is setup on the SQLite database at path, which it returns.
func setupAt(t *testing.T, path string) (*Service, *manager.Manager, *clock.Fake, string) {
	t.Helper()
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	wh, _ := webhook.New(webhook.Config{URL: hook.URL}, hook.Client())
	clk := clock.NewFake(t0)
	m, err := manager.New(ctx, manager.Options{Rules: []rule.Rule{{Name: "Down", Event: "down", Severity: alerts.P1}},
		Store: st, Clock: clk, Registerer: prometheus.NewRegistry(), Receivers: map[string]notify.Notifier{"hook": wh}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := m.Observe(rule.Event{Kind: "down", Service: "checkout", At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := m.Step(ctx, t0); err != nil {
		t.Fatal(err)
	}
	s, err := New(m, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s, m, clk, path
}

func matchers(t *testing.T, s string) alerts.Matchers {
	t.Helper()
	ms, err := alerts.ParseMatchers(s)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestNewRefusesNilManager(t *testing.T) {
	if _, err := New(nil, Options{}); !errors.Is(err, alerts.ErrInvalid) {
		t.Fatalf("New(nil): %v, want alerts.ErrInvalid", err)
	}
}

// An edit Alertmanager makes in place (same matchers, an active silence's
// start kept, a zero StartsAt keeping it) keeps the ID; any other edit
// (other matchers) expires the old silence at once and creates a new one,
// so that the list still shows what muted the alert and until when. The
// alert stays silenced throughout. An edit of an expired silence creates a
// new one and leaves the old as it was; an unknown ID is not found.
func TestSaveSilenceEditsInPlaceOrExpiresAndRecreatesAsAlertmanager(t *testing.T) {
	s, m, clk := setup(t)
	ctx := context.Background()
	silencedBy := func() string {
		t.Helper()
		st := m.Alerts(clk.Now())
		if len(st) != 1 {
			t.Fatalf("alerts %+v", st)
		}
		return strings.Join(st[0].SilencedBy, ",")
	}
	checkout := matchers(t, `{service="checkout"}`)
	first, created, err := s.SaveSilence(ctx, SilenceRequest{Matchers: checkout, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy"})
	if err != nil || !created || !first.StartsAt.Equal(t0) || first.Status.State != silence.StateActive {
		t.Fatalf("create: %+v %v %v", first, created, err)
	}
	id := first.ID

	clk.Set(t0.Add(10 * time.Minute))
	longer, created, err := s.SaveSilence(ctx, SilenceRequest{ID: id, Matchers: checkout, EndsAt: t0.Add(2 * time.Hour), CreatedBy: "ops", Comment: "late"})
	if err != nil || created || longer.ID != id || !longer.StartsAt.Equal(t0) || !longer.CreatedAt.Equal(t0) || longer.Comment != "late" {
		t.Fatalf("edit in place: %+v %v %v", longer, created, err)
	}
	if got := silencedBy(); got != id {
		t.Fatalf("silenced by %q, want %q", got, id)
	}

	clk.Set(t0.Add(20 * time.Minute))
	wider, created, err := s.SaveSilence(ctx, SilenceRequest{ID: id, Matchers: matchers(t, `{service=~"checkout|search"}`),
		EndsAt: t0.Add(3 * time.Hour), CreatedBy: "ops", Comment: "both"})
	if err != nil || !created || wider.ID == id || !wider.StartsAt.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("edit of the matchers: %+v %v %v", wider, created, err)
	}
	if got := silencedBy(); got != wider.ID {
		t.Fatalf("silenced by %q, want only the new silence %q", got, wider.ID)
	}
	expired := s.Silences([]silence.State{silence.StateExpired})
	if len(expired) != 1 || expired[0].ID != id || !expired[0].EndsAt.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("expired silences %+v, want the old one ended at the edit", expired)
	}

	again, created, err := s.SaveSilence(ctx, SilenceRequest{ID: id, Matchers: checkout, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "again"})
	if err != nil || !created || again.ID == id || again.ID == wider.ID {
		t.Fatalf("edit of an expired silence: %+v %v %v", again, created, err)
	}
	if l := m.Silences(); len(l) != 3 || l[0].ID != id || !l[0].EndsAt.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("silences %+v", l)
	}
	if _, _, err := s.SaveSilence(ctx, SilenceRequest{ID: "nope", Matchers: checkout, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "x"}); !errors.Is(err, alerts.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("edit of an unknown silence: %v, want not found naming it", err)
	}
	if l := m.Silences(); len(l) != 3 {
		t.Fatalf("a refused edit changed the silences: %+v", l)
	}
}

// A pending silence edited to start earlier but not in the past keeps its
// ID; one edited to start in the past is replaced by a new silence and the
// pending one is expired without ever muting.
func TestSaveSilenceEditOfPendingSilence(t *testing.T) {
	s, m, clk := setup(t)
	ctx := context.Background()
	checkout := matchers(t, `{service="checkout"}`)
	p, _, err := s.SaveSilence(ctx, SilenceRequest{Matchers: checkout, StartsAt: t0.Add(time.Hour), EndsAt: t0.Add(2 * time.Hour), CreatedBy: "ops", Comment: "tonight"})
	if err != nil {
		t.Fatal(err)
	}
	e, created, err := s.SaveSilence(ctx, SilenceRequest{ID: p.ID, Matchers: checkout, StartsAt: t0.Add(30 * time.Minute), EndsAt: t0.Add(2 * time.Hour), CreatedBy: "ops", Comment: "earlier"})
	if err != nil || created || e.ID != p.ID || e.Status.State != silence.StatePending {
		t.Fatalf("earlier start: %+v %v %v", e, created, err)
	}
	n, created, err := s.SaveSilence(ctx, SilenceRequest{ID: p.ID, Matchers: checkout, StartsAt: t0.Add(-time.Minute), EndsAt: t0.Add(2 * time.Hour), CreatedBy: "ops", Comment: "now"})
	if err != nil || !created || n.ID == p.ID || n.Status.State != silence.StateActive {
		t.Fatalf("start in the past: %+v %v %v", n, created, err)
	}
	l := m.Silences()
	if len(l) != 2 || l[1].ID != p.ID || l[1].State(clk.Now()) != silence.StateExpired || !l[1].StartsAt.Equal(t0) {
		t.Fatalf("silences %+v, want the pending one expired at %s", l, t0)
	}
}

// A silence whose end is already past (a mistyped date) would mute
// nothing: it is refused naming ends_at, as Alertmanager does.
func TestSaveSilenceEndingInThePastRefused(t *testing.T) {
	s, m, _ := setup(t)
	_, _, err := s.SaveSilence(context.Background(), SilenceRequest{Matchers: matchers(t, `{service="checkout"}`),
		StartsAt: t0.Add(-2 * time.Hour), EndsAt: t0.Add(-time.Hour), CreatedBy: "ops", Comment: "deploy"})
	if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "ends_at") {
		t.Fatalf("silence ending an hour ago: %v, want invalid naming ends_at", err)
	}
	if l := m.Silences(); len(l) != 0 {
		t.Fatalf("silences %+v", l)
	}
}

// Each silence shows its state now; a filter keeps the states asked for;
// expiring one ends it now; an unknown one is not found.
func TestSilencesStatesFilterAndExpiry(t *testing.T) {
	s, _, clk := setup(t)
	ctx := context.Background()
	a, _, err := s.SaveSilence(ctx, SilenceRequest{Matchers: matchers(t, `{service="checkout"}`), EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "now"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SaveSilence(ctx, SilenceRequest{Matchers: matchers(t, `{service="search"}`), StartsAt: t0.Add(time.Hour), EndsAt: t0.Add(2 * time.Hour), CreatedBy: "ops", Comment: "later"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if err := s.ExpireSilence(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.ExpireSilence(ctx, "nope"); !errors.Is(err, alerts.ErrNotFound) {
		t.Fatalf("expire unknown: %v", err)
	}
	for _, tt := range []struct {
		states []string
		want   int
	}{{nil, 2}, {[]string{"expired"}, 1}, {[]string{"pending"}, 1}, {[]string{"active"}, 0}, {[]string{"pending", "expired"}, 2}} {
		st, err := ParseStates(tt.states)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Silences(st); len(got) != tt.want {
			t.Fatalf("states %v: %+v, want %d", tt.states, got, tt.want)
		}
	}
	if got := s.Silences(nil)[0]; got.Status.State != silence.StateExpired || !got.EndsAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("expired silence %+v", got)
	}
	if _, err := ParseStates([]string{"gone"}); !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), `"gone"`) {
		t.Fatalf("unknown state: %v", err)
	}
}

// Two people look at one silence. One edits it in place (a later end, a
// new comment: same ID); the other, on the stale view, clicks Expire. With
// the version they saw, the expiry is refused as a conflict that says who
// edited the silence and when, and the edit stays in force; read again,
// the silence expires. Without a version the expiry ends the silence
// whatever it became, as before and as Alertmanager's DELETE does.
func TestExpireStaleVersionOfSilenceEditedInPlaceRefused(t *testing.T) {
	s, _, clk := setup(t)
	ctx := context.Background()
	checkout := matchers(t, `{service="checkout"}`)
	created, _, err := s.SaveSilence(ctx, SilenceRequest{Matchers: checkout, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	seen := s.Silences(nil)[0]
	if seen.Version == "" || seen.Version != created.Version {
		t.Fatalf("listed version %q, created %q: want one, the same", seen.Version, created.Version)
	}
	clk.Advance(time.Minute)
	edited, isNew, err := s.SaveSilence(ctx, SilenceRequest{ID: created.ID, Matchers: checkout, EndsAt: t0.Add(3 * time.Hour), CreatedBy: "dba", Comment: "migration running"})
	if err != nil || isNew {
		t.Fatalf("edit in place: new %v, %v", isNew, err)
	}
	if edited.Version == seen.Version {
		t.Fatalf("an edit kept the version %q", edited.Version)
	}
	clk.Advance(time.Minute)
	err = s.ExpireSilenceIf(ctx, created.ID, seen.Version)
	if !errors.Is(err, alerts.ErrConflict) {
		t.Fatalf("expire of a stale version: %v, want alerts.ErrConflict", err)
	}
	for _, want := range []string{created.ID, "dba", "10:01:00"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("conflict %q does not say %q", err, want)
		}
	}
	if got := s.Silences(nil)[0]; got.Status.State != silence.StateActive || !got.EndsAt.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("after a refused expiry: %+v, want the edit in force", got)
	}
	fresh := s.Silences(nil)[0]
	if err := s.ExpireSilenceIf(ctx, created.ID, fresh.Version); err != nil {
		t.Fatalf("expire of the version read again: %v", err)
	}
	if got := s.Silences(nil)[0]; got.Status.State != silence.StateExpired || !got.EndsAt.Equal(clk.Now()) {
		t.Fatalf("after the expiry: %+v", got)
	}

	// Without a version: the silence ends whatever it became.
	other, _, err := s.SaveSilence(ctx, SilenceRequest{Matchers: matchers(t, `{service="search"}`), EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SaveSilence(ctx, SilenceRequest{ID: other.ID, Matchers: other.Matchers, EndsAt: t0.Add(3 * time.Hour), CreatedBy: "dba", Comment: "longer"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ExpireSilence(ctx, other.ID); err != nil {
		t.Fatalf("expire without a version: %v", err)
	}
	if err := s.ExpireSilenceIf(ctx, "nope", seen.Version); !errors.Is(err, alerts.ErrNotFound) {
		t.Fatalf("expire of an unknown silence with a version: %v, want alerts.ErrNotFound", err)
	}
}

// An edit Alertmanager does not make in place (other matchers) expires the
// silence and creates a new one. Expire on the stale view of the old one,
// with its version, is refused, saying it ended: whoever clicked learns
// that a silence they have not seen (the new one) still mutes.
func TestExpireStaleVersionOfSilenceReplacedRefused(t *testing.T) {
	s, _, clk := setup(t)
	ctx := context.Background()
	created, _, err := s.SaveSilence(ctx, SilenceRequest{Matchers: matchers(t, `{service="checkout"}`), EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	next, isNew, err := s.SaveSilence(ctx, SilenceRequest{ID: created.ID, Matchers: matchers(t, `{service=~"checkout|search"}`), EndsAt: t0.Add(time.Hour), CreatedBy: "dba", Comment: "both"})
	if err != nil || !isNew {
		t.Fatalf("replacing edit: new %v, %v", isNew, err)
	}
	clk.Advance(time.Minute)
	err = s.ExpireSilenceIf(ctx, created.ID, created.Version)
	if !errors.Is(err, alerts.ErrConflict) || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("expire of a replaced silence's stale version: %v, want alerts.ErrConflict saying it ended", err)
	}
	for _, got := range s.Silences([]silence.State{silence.StateActive}) {
		if got.ID == next.ID {
			return
		}
	}
	t.Fatalf("the new silence %s is no longer active: %+v", next.ID, s.Silences(nil))
}

// A start or end that is not an RFC 3339 time is refused naming the field.
func TestParseTimeNamesTheField(t *testing.T) {
	for _, in := range []string{"2026-03-02 12:00", "now", "2026-03-02T12:00"} {
		_, err := ParseTime("ends_at", in)
		if !errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "ends_at") || !strings.Contains(err.Error(), "RFC 3339") {
			t.Fatalf("%q: %v", in, err)
		}
	}
	if tm, err := ParseTime("starts_at", ""); err != nil || !tm.IsZero() {
		t.Fatalf("empty: %v %v", tm, err)
	}
	if tm, err := ParseTime("starts_at", "2026-03-02T12:00:00.5+01:00"); err != nil || !tm.Equal(time.Date(2026, 3, 2, 11, 0, 0, 5e8, time.UTC)) {
		t.Fatalf("RFC 3339: %v %v", tm, err)
	}
}

// History lists the alert's state changes (pending, then firing), never
// nil; a fingerprint that does not parse, or 0, is refused.
func TestHistory(t *testing.T) {
	s, m, clk := setup(t)
	ctx := context.Background()
	fp := m.Alerts(clk.Now())[0].Fingerprint
	h, err := s.History(ctx, fp, 100)
	if err != nil || len(h) != 2 || h[1].To != "firing" || h[0].Rule != "Down" {
		t.Fatalf("history %+v %v", h, err)
	}
	if h, err := s.History(ctx, "00000000000000ff", 10); err != nil || h == nil || len(h) != 0 {
		t.Fatalf("history of an unknown alert: %#v %v, want an empty list", h, err)
	}
	for _, bad := range []string{"zz", "0"} {
		if _, err := s.History(ctx, bad, 10); !errors.Is(err, alerts.ErrInvalid) {
			t.Fatalf("history %q: %v", bad, err)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"", "2026-03-02T10:00:00Z", "2026-03-02 10:00", "now", "2026-13-40T99:99:99Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime("ends_at", s)
		if err != nil && (!errors.Is(err, alerts.ErrInvalid) || !strings.Contains(err.Error(), "ends_at")) {
			t.Fatalf("%q: %v", s, err)
		}
		if err == nil && s != "" && tm.IsZero() && s != "0001-01-01T00:00:00Z" {
			t.Logf("%q parses to the zero time", s)
		}
	})
}
