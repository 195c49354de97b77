package loadscore

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"governor.dev/governor/engine/signals"
	"governor.dev/governor/internal/statecodec"
)

// ErrState reports a tracker state that cannot be restored: truncated or
// corrupt bytes or another format version. Returned errors wrap it and say
// what is wrong.
var ErrState = errors.New("loadscore: cannot restore state")

// StateVersion is the format version of the bytes MarshalBinary writes.
const StateVersion = 1

// Bounds of a decoded state.
const (
	maxStateKeys   = 1 << 22
	maxStateString = 4096
)

// MarshalBinary encodes the smoothing and hysteresis state of every key
// (the smoothed score, when it was last known and last seen, whether the
// key is overloaded), in key order, so that a tracker given it by
// UnmarshalBinary scores the next snapshot exactly as this one does. The
// options are not part of it.
func (t *Tracker) MarshalBinary() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(t.keys), func(a, b signals.Key) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Instance, b.Instance))
	})
	e := statecodec.Enc{B: make([]byte, 0, 1+len(keys)*48)}
	e.B = append(e.B, StateVersion)
	e.U(uint64(len(keys)))
	for _, k := range keys {
		s := t.keys[k]
		if !finite(s.value) {
			return nil, fmt.Errorf("loadscore: state of %s: smoothed score %v: want a finite number", k, s.value)
		}
		e.S(k.Service)
		e.S(k.Instance)
		e.F(s.value)
		e.Time(s.lastKnown)
		e.Time(s.lastSeen)
		e.Bool(s.overloaded)
		e.Bool(s.has)
	}
	return e.B, nil
}

// UnmarshalBinary replaces the state of every key by the one MarshalBinary
// encoded (another replica's, say); keys not in it are forgotten. A state
// that cannot be restored is refused with an error wrapping ErrState and
// leaves the tracker as it was.
func (t *Tracker) UnmarshalBinary(b []byte) error {
	d := statecodec.Dec{B: b, Sentinel: ErrState}
	switch {
	case len(b) == 0:
		d.Fail("empty")
		return d.Err
	case b[0] != StateVersion:
		d.Fail("format version %d, want %d", b[0], StateVersion)
		return d.Err
	}
	d.B = b[1:]
	n := d.N("keys", maxStateKeys)
	keys := make(map[signals.Key]*state, min(n, len(d.B)/20))
	for range n {
		k := signals.Key{Service: d.S("service", maxStateString), Instance: d.S("instance", maxStateString)}
		s := &state{value: d.F("smoothed score"), lastKnown: d.Time("last known"), lastSeen: d.Time("last seen"),
			overloaded: d.Bool("overloaded"), has: d.Bool("has a score")}
		if d.Err != nil {
			break
		}
		if k.Service == "" {
			d.Fail("key %q: want a service", k)
			break
		}
		if !(s.value >= 0 && s.value <= 1) { // scores are in [0, 1]; corrupt bytes are not
			d.Fail("key %s: smoothed score %v: want a value in [0, 1]", k, s.value)
			break
		}
		if s.overloaded && !s.has { // a key turns overloaded only by a known score
			d.Fail("key %s: overloaded without a known score", k)
			break
		}
		if _, dup := keys[k]; dup {
			d.Fail("key %s: twice", k)
			break
		}
		keys[k] = s
	}
	if err := d.End(); err != nil {
		return err
	}
	t.mu.Lock()
	t.keys = keys
	t.mu.Unlock()
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
