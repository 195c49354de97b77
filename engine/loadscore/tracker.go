package loadscore

import (
	"math"
	"sync"
	"time"

	"governor.dev/governor/engine/signals"
)

// Score is the smoothed load of one key at one evaluation.
type Score struct {
	Key signals.Key `json:"key"`
	At  time.Time   `json:"at"`
	// Raw is this evaluation's unsmoothed score and its terms.
	Raw Raw `json:"raw"`
	// Value is the smoothed score, what to act on; NaN when the key has no
	// known history.
	Value float64 `json:"value"`
	// Known is false when Value is NaN, or this evaluation's score is
	// unknown and Value is only the last known average (see LastKnown).
	Known     bool      `json:"known"`
	LastKnown time.Time `json:"lastKnown"`
	// Overloaded is the hysteresis state; Changed says it flipped now (by
	// the thresholds, or because a history dropped after MaxGap released it).
	Overloaded bool `json:"overloaded"`
	Changed    bool `json:"changed"`
}

type state struct {
	value      float64
	lastKnown  time.Time
	lastSeen   time.Time
	overloaded bool
	has        bool
}

// Tracker keeps the smoothing and hysteresis state per key. It is safe for
// concurrent use.
type Tracker struct {
	opts Options
	mu   sync.Mutex
	keys map[signals.Key]*state
}

// New validates the options and returns a Tracker.
func New(opts Options) (*Tracker, error) {
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	return &Tracker{opts: o, keys: map[signals.Key]*state{}}, nil
}

// Options returns the effective options (defaults filled in).
func (t *Tracker) Options() Options { return t.opts }

// Update scores every entry of a snapshot at the snapshot's time, in key
// order, and forgets keys absent for longer than MaxGap.
func (t *Tracker) Update(snap *signals.Snapshot) []Score {
	keys := snap.Keys()
	out := make([]Score, 0, len(keys))
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		out = append(out, t.observe(snap.At, snap.Entries[k]))
	}
	for k, s := range t.keys {
		if snap.At.Sub(s.lastSeen) > t.opts.MaxGap {
			delete(t.keys, k)
		}
	}
	return out
}

// Forget drops the state of every key of service (the service's own and
// its instances') at once, rather than MaxGap after it was last seen: a
// service the caller knows is gone no longer takes room, and one that
// comes back starts afresh (no smoothing with its old scores, not
// overloaded). Forgetting a service the tracker does not keep does
// nothing.
func (t *Tracker) Forget(service string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.keys {
		if k.Service == service {
			delete(t.keys, k)
		}
	}
}

// Observe scores one entry at time at.
func (t *Tracker) Observe(at time.Time, e *signals.Entry) Score {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.observe(at, e)
}

func (t *Tracker) observe(at time.Time, e *signals.Entry) Score {
	raw := Compute(&t.opts, e)
	s, ok := t.keys[e.Key]
	if !ok {
		s = &state{}
		t.keys[e.Key] = s
	}
	was := s.overloaded
	s.lastSeen = at
	if s.has && at.Sub(s.lastKnown) > t.opts.MaxGap {
		*s = state{lastSeen: at} // too long without a known score: start afresh
	}
	sc := Score{Key: e.Key, At: at, Raw: raw}
	if raw.Known {
		if !s.has {
			s.value, s.has = raw.Score, true
		} else if dt := at.Sub(s.lastKnown); dt > 0 {
			keep := math.Exp2(-dt.Seconds() / t.opts.HalfLife.Seconds())
			s.value = keep*s.value + (1-keep)*raw.Score
		}
		if at.After(s.lastKnown) {
			s.lastKnown = at
		}
		switch {
		case !s.overloaded && s.value > t.opts.ActAbove:
			s.overloaded = true
		case s.overloaded && s.value < t.opts.ReleaseBelow:
			s.overloaded = false
		}
	}
	// Against the state before this evaluation: dropping a history that
	// went unknown for longer than MaxGap releases the key too.
	sc.Changed = s.overloaded != was
	sc.Known = raw.Known && s.has
	sc.Value = math.NaN()
	if s.has {
		sc.Value = s.value
	}
	sc.LastKnown, sc.Overloaded = s.lastKnown, s.overloaded
	return sc
}
