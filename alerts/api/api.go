// Package api holds the alert operations that the web UI's JSON API serves
// (ui/api, under /api/v1, behind its authentication and roles) over a
// running alerts manager: silences listed with their state at the time of
// the request, created and edited as Alertmanager's API does, and expired
// early; and an alert's history of state changes. It serves no HTTP of its
// own, so no route reaches the manager without a person and a role behind
// it.
package api

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"governor.dev/governor/alerts"
	"governor.dev/governor/alerts/manager"
	"governor.dev/governor/alerts/silence"
	"governor.dev/governor/alerts/store"
	"governor.dev/governor/sdk/clock"
)

// Options of New. Zero fields take defaults.
type Options struct {
	Clock clock.Clock
}

// Service edits the silences of a manager and reads its alerts' history.
// It is safe for concurrent use.
type Service struct {
	m   *manager.Manager
	clk clock.Clock
	// editMu makes each edit of a silence (read, then write) one step
	// with respect to other edits and expiries: an in-place edit that read
	// the silence active does not bring it back after an expiry.
	editMu sync.Mutex
}

// New returns the Service of m; a nil m wraps alerts.ErrInvalid.
func New(m *manager.Manager, o Options) (*Service, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: api: a manager is required", alerts.ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &Service{m: m, clk: o.Clock}, nil
}

// SilenceStatus is the status of a listed silence, as Alertmanager's.
type SilenceStatus struct {
	State silence.State `json:"state"`
}

// Silence is a silence as an API shows it: with its state at the time of
// the request, and its version (silence.Silence.Version), which
// ExpireSilenceIf takes back.
type Silence struct {
	silence.Silence
	Version string        `json:"version"`
	Status  SilenceStatus `json:"status"`
}

func view(s silence.Silence, now time.Time) Silence {
	return Silence{Silence: s, Version: s.Version(), Status: SilenceStatus{State: s.State(now)}}
}

// ParseStates reads the states a list of silences is filtered by
// (pending, active, expired); an unknown one wraps alerts.ErrInvalid.
func ParseStates(values []string) ([]silence.State, error) {
	var out []silence.State
	for _, v := range values {
		st, err := silence.ParseState(v)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Silences lists the silences, oldest start first, each with its state
// now; with states, only those in one of them. The list is never nil.
func (s *Service) Silences(states []silence.State) []Silence {
	now := s.clk.Now()
	out := []Silence{}
	for _, sil := range s.m.Silences() {
		v := view(sil, now)
		if len(states) == 0 || slices.Contains(states, v.Status.State) {
			out = append(out, v)
		}
	}
	return out
}

// ParseTime reads an RFC 3339 time of the named field; "" is the zero
// time. An error wraps alerts.ErrInvalid and names the field.
func ParseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %q is not an RFC 3339 time like \"2006-01-02T15:04:05Z\"", alerts.ErrInvalid, field, s)
	}
	return t, nil
}

// SilenceRequest creates a silence or, with ID, edits one.
type SilenceRequest struct {
	// ID, when set, names the silence the request edits.
	ID       string
	Matchers alerts.Matchers
	// StartsAt zero: now for a new silence, the edited silence's start for
	// an edit.
	StartsAt, EndsAt time.Time
	// CreatedBy is the authenticated person behind the request.
	CreatedBy, Comment string
}

// SaveSilence creates a silence (created true) or, with an ID, edits one
// as Alertmanager does: an edit that keeps the matchers of an active
// silence and its start (a zero StartsAt keeps it) without ending in the
// past, or of a pending silence without starting in the past, changes it
// in place (created false, same ID). Any other edit expires the silence
// (if it has not ended) and creates a new one, so that the list keeps what
// was in force and until when. A silence ending in the past, or invalid
// (silence.Validate), wraps alerts.ErrInvalid; an unknown ID wraps
// alerts.ErrNotFound. An edit reads the silences from the store first
// (manager.Sync), so one made through another replica is found as it is;
// an in-place edit racing another replica's change to the same silence
// fails with an error wrapping alerts.ErrConflict (HTTP 409) that names it.
//
// The new silence is stored before the old one is expired: should the
// expiry fail, both mute for a while and the alert stays quiet.
func (s *Service) SaveSilence(ctx context.Context, r SilenceRequest) (Silence, bool, error) {
	now := s.clk.Now()
	next := silence.Silence{Matchers: r.Matchers, StartsAt: r.StartsAt, EndsAt: r.EndsAt,
		CreatedBy: r.CreatedBy, Comment: r.Comment, CreatedAt: now}
	if r.ID == "" {
		if next.StartsAt.IsZero() {
			next.StartsAt = now
		}
		sil, err := s.m.AddSilence(ctx, next)
		if err != nil {
			return Silence{}, false, err
		}
		return view(sil, now), true, nil
	}
	s.editMu.Lock()
	defer s.editMu.Unlock()
	// The silence as the store holds it now: it may have been created or
	// edited through another replica since this one last read the store.
	if err := s.m.Sync(ctx); err != nil {
		return Silence{}, false, err
	}
	list := s.m.Silences()
	i := slices.IndexFunc(list, func(sil silence.Silence) bool { return sil.ID == r.ID })
	if i < 0 {
		return Silence{}, false, fmt.Errorf("%w: silence %q", alerts.ErrNotFound, r.ID)
	}
	old := list[i]
	inPlace := next
	if inPlace.StartsAt.IsZero() {
		inPlace.StartsAt = old.StartsAt
	}
	if old.UpdatableInPlace(inPlace, now) {
		inPlace.ID, inPlace.CreatedAt = old.ID, old.CreatedAt
		sil, err := s.m.EditSilence(ctx, old, inPlace)
		if err != nil {
			return Silence{}, false, err
		}
		return view(sil, now), false, nil
	}
	if next.StartsAt.IsZero() {
		next.StartsAt = now
	}
	sil, err := s.m.AddSilence(ctx, next)
	if err != nil {
		return Silence{}, false, err
	}
	if old.State(now) != silence.StateExpired {
		if err := s.m.ExpireSilence(ctx, old.ID, now); err != nil {
			return Silence{}, false, fmt.Errorf("silence %s created, %s not expired: %w", sil.ID, old.ID, err)
		}
	}
	return view(sil, now), true, nil
}

// ExpireSilence ends the silence id now, whatever it was edited into
// since the caller read it, as Alertmanager's DELETE
// /api/v2/silence/{id} does; an unknown id wraps alerts.ErrNotFound.
func (s *Service) ExpireSilence(ctx context.Context, id string) error {
	return s.ExpireSilenceIf(ctx, id, "")
}

// ExpireSilenceIf ends the silence id now only if it is still at version,
// the Version of the silence as the caller showed it (an HTTP If-Match):
// when someone changed it since, through any replica (edited it in place,
// expired it, or replaced it by an edit of its matchers or start), it is
// left as it is and the error wraps alerts.ErrConflict (HTTP 409), saying
// who edited it and when, or when it ended, so that nobody expires an
// edit they have not seen, nor believes an alert unmuted that a new
// silence still mutes. An empty version is ExpireSilence; an unknown id
// wraps alerts.ErrNotFound.
func (s *Service) ExpireSilenceIf(ctx context.Context, id, version string) error {
	// Not while an edit that read the silence active writes it back.
	s.editMu.Lock()
	defer s.editMu.Unlock()
	return s.m.ExpireSilenceIf(ctx, id, version, s.clk.Now())
}

// HistoryEntry is one state change of an alert.
type HistoryEntry struct {
	Rule   string        `json:"rule"`
	Labels alerts.Labels `json:"labels"`
	// From and To are the states: inactive, pending or firing.
	From string    `json:"from"`
	To   string    `json:"to"`
	At   time.Time `json:"at"`
}

// History returns the newest limit state changes of the alert with
// fingerprint fp (hexadecimal, as listed), oldest first; never nil. A
// fingerprint that does not parse, or 0, wraps alerts.ErrInvalid.
func (s *Service) History(ctx context.Context, fp string, limit int) ([]HistoryEntry, error) {
	f, err := alerts.ParseFingerprint(fp)
	if err != nil {
		return nil, err
	}
	if f == 0 {
		return nil, fmt.Errorf("%w: fingerprint %q names no alert", alerts.ErrInvalid, fp)
	}
	hist, err := s.m.History(ctx, f, limit)
	if err != nil {
		return nil, err
	}
	out := make([]HistoryEntry, 0, len(hist))
	for _, h := range hist {
		out = append(out, historyEntry(h))
	}
	return out, nil
}

func historyEntry(h store.HistoryEntry) HistoryEntry {
	return HistoryEntry{Rule: h.Rule, Labels: h.Labels, From: h.From.String(), To: h.To.String(), At: h.At}
}
