// Package silence mutes alerts by label matchers for a time window. Every
// silence names its author and carries a comment, so nobody has to guess why
// an alert is quiet; silences end on their own at EndsAt.
package silence

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"governor.dev/governor/alerts"
)

// Silence mutes every alert its matchers match while StartsAt <= t < EndsAt.
type Silence struct {
	ID        string          `json:"id"`
	Matchers  alerts.Matchers `json:"matchers"`
	StartsAt  time.Time       `json:"starts_at"`
	EndsAt    time.Time       `json:"ends_at"`
	CreatedBy string          `json:"created_by"`
	Comment   string          `json:"comment"`
	CreatedAt time.Time       `json:"created_at"`
	// UpdatedAt is when the silence was last written: created, edited in
	// place or expired; zero for one stored before it was recorded.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Version identifies what the silence says: every write that changes it
// (an edit in place, an expiry) changes its version. A caller that shows a
// silence passes its version back to act on that silence only as shown
// (an HTTP ETag), so that a change made meanwhile is not passed over.
// Times compare as instants, whatever their zones.
func (s Silence) Version() string {
	s.StartsAt, s.EndsAt, s.CreatedAt, s.UpdatedAt = s.StartsAt.UTC(), s.EndsAt.UTC(), s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	b, err := json.Marshal(s)
	if err != nil { // matchers always encode
		b = []byte(s.ID)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Validate names the first bad field.
func (s Silence) Validate() error {
	bad := func(field, msg string) error {
		return fmt.Errorf("%w: silence: %s: %s", alerts.ErrInvalid, field, msg)
	}
	switch {
	case len(s.Matchers) == 0:
		return bad("matchers", "at least one matcher is required")
	case s.StartsAt.IsZero():
		return bad("starts_at", "must be set")
	case s.EndsAt.IsZero():
		return bad("ends_at", "must be set")
	case !s.EndsAt.After(s.StartsAt):
		return bad("ends_at", fmt.Sprintf("%s is not after starts_at %s", s.EndsAt.Format(time.RFC3339), s.StartsAt.Format(time.RFC3339)))
	case strings.TrimSpace(s.CreatedBy) == "":
		return bad("created_by", "must not be empty")
	case strings.TrimSpace(s.Comment) == "":
		return bad("comment", "must not be empty")
	}
	// Matchers that all match the empty string mute every alert without
	// the labels they name, as well as the alerts they were meant for;
	// Alertmanager refuses them too.
	if s.Matchers.Matches(alerts.Labels{}) {
		return bad("matchers", fmt.Sprintf("at least one matcher must not match the empty string: %s also mutes every alert without those labels", s.Matchers))
	}
	return nil
}

// State is where a silence stands at a time, as Alertmanager's
// status.state.
type State string

// Silence states.
const (
	// StatePending: the silence starts later.
	StatePending State = "pending"
	// StateActive: the silence is in force.
	StateActive State = "active"
	// StateExpired: the silence has ended (at its end, or expired early).
	StateExpired State = "expired"
)

// ParseState reads "pending", "active" or "expired".
func ParseState(s string) (State, error) {
	switch st := State(s); st {
	case StatePending, StateActive, StateExpired:
		return st, nil
	}
	return "", fmt.Errorf("%w: silence: state: %q: want pending, active or expired", alerts.ErrInvalid, s)
}

// State returns the state of the silence at t: pending before StartsAt,
// active from StartsAt until EndsAt, expired from EndsAt on.
func (s Silence) State(t time.Time) State {
	switch {
	case !t.Before(s.EndsAt):
		return StateExpired
	case t.Before(s.StartsAt):
		return StatePending
	}
	return StateActive
}

// Active reports whether the silence is in force at t.
func (s Silence) Active(t time.Time) bool { return !t.Before(s.StartsAt) && t.Before(s.EndsAt) }

// Mutes reports whether the silence mutes an alert with labels l at t.
func (s Silence) Mutes(l alerts.Labels, t time.Time) bool {
	return s.Active(t) && s.Matchers.Matches(l)
}

// Set holds silences. It is safe for concurrent use.
type Set struct {
	mu sync.RWMutex
	m  map[string]Silence
}

// NewSet returns a set holding the given silences (as loaded from the store).
func NewSet(initial ...Silence) *Set {
	s := &Set{m: map[string]Silence{}}
	for _, x := range initial {
		s.m[x.ID] = x
	}
	return s
}

// NewID returns a random silence identifier.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Add validates s, gives it an ID when it has none, and stores it.
func (st *Set) Add(s Silence) (Silence, error) {
	if err := s.Validate(); err != nil {
		return Silence{}, err
	}
	if s.ID == "" {
		s.ID = NewID()
	}
	st.mu.Lock()
	st.m[s.ID] = s
	st.mu.Unlock()
	return s, nil
}

// Expired returns the silence ended at t: its end moved back to t, and its
// start too if it had not started, updated at t. One that had already
// ended is returned unchanged.
func (s Silence) Expired(t time.Time) Silence {
	if s.EndsAt.After(t) {
		s.EndsAt, s.UpdatedAt = t, t
		if s.StartsAt.After(t) {
			s.StartsAt = t
		}
	}
	return s
}

// UpdatableInPlace reports whether an edit to next may keep s's ID at now,
// as Alertmanager decides: the matchers are the same, and s is active and
// next keeps its start and does not end in the past, or s is pending and
// next does not start in the past. Any other edit expires s and creates
// next as a new silence, so that what was in force stays on record.
func (s Silence) UpdatableInPlace(next Silence, now time.Time) bool {
	if s.Matchers.String() != next.Matchers.String() {
		return false
	}
	switch s.State(now) {
	case StateActive:
		return next.StartsAt.Equal(s.StartsAt) && !next.EndsAt.Before(now)
	case StatePending:
		return !next.StartsAt.Before(now)
	}
	return false
}

// Get returns the silence id.
func (st *Set) Get(id string) (Silence, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	s, ok := st.m[id]
	if !ok {
		return Silence{}, fmt.Errorf("%w: silence %q", alerts.ErrNotFound, id)
	}
	return s, nil
}

// Expire ends the silence at t (no-op if it had already ended).
func (st *Set) Expire(id string, t time.Time) (Silence, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.m[id]
	if !ok {
		return Silence{}, fmt.Errorf("%w: silence %q", alerts.ErrNotFound, id)
	}
	s = s.Expired(t)
	st.m[id] = s
	return s, nil
}

// Prune removes the silences that ended before t and returns how many.
func (st *Set) Prune(t time.Time) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for id, s := range st.m {
		if s.EndsAt.Before(t) {
			delete(st.m, id)
			n++
		}
	}
	return n
}

// Muted returns the IDs of the silences muting l at t, sorted.
func (st *Set) Muted(l alerts.Labels, t time.Time) []string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var ids []string
	for id, s := range st.m {
		if s.Mutes(l, t) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// List returns every silence, oldest start first.
func (st *Set) List() []Silence {
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make([]Silence, 0, len(st.m))
	for _, s := range st.m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Silence) int {
		if c := a.StartsAt.Compare(b.StartsAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
