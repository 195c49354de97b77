package loadscore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
)

// TestRestoredTrackerScoresExactly: a tracker given another's state in the
// middle of a run (one key overloaded, one unknown for a while, one never
// known) produces exactly the scores the original does from then on; a
// fresh tracker does not (its smoothing restarts and it forgets the
// overloaded side of the hysteresis).
func TestRestoredTrackerScoresExactly(t *testing.T) {
	cpuOf := func(svc string, i int) *signals.Entry {
		switch {
		case svc == "hot":
			return entry(svc, map[signals.Signal]float64{signals.CPU: 0.75 + 0.2*math.Sin(float64(i)/5)})
		case svc == "gap" && i >= 8 && i < 14:
			return entry(svc, nil)
		case svc == "never":
			return entry(svc, nil)
		}
		return entry(svc, map[signals.Signal]float64{signals.CPU: 0.3 + 0.01*float64(i%7)})
	}
	snap := func(i int) *signals.Snapshot {
		s := &signals.Snapshot{At: t0.Add(time.Duration(i) * 10 * time.Second), Entries: map[signals.Key]*signals.Entry{}}
		for _, svc := range []string{"hot", "gap", "never", "calm"} {
			e := cpuOf(svc, i)
			s.Entries[e.Key] = e
		}
		return s
	}
	a := cpuOnly(t)
	for i := range 12 {
		a.Update(snap(i))
	}
	data, err := a.MarshalBinary()
	require.NoError(t, err)
	b, fresh := cpuOnly(t), cpuOnly(t)
	require.NoError(t, b.UnmarshalBinary(data))
	again, err := b.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, data, again, "the restored tracker encodes to other bytes")
	differs := false
	for i := 12; i < 40; i++ {
		sa, sb, sf := a.Update(snap(i)), b.Update(snap(i)), fresh.Update(snap(i))
		require.Len(t, sb, len(sa))
		for j := range sa {
			require.Equal(t, sa[j].Key, sb[j].Key)
			require.Equal(t, math.Float64bits(sa[j].Value), math.Float64bits(sb[j].Value), "step %d %s", i, sa[j].Key)
			require.True(t, sa[j].LastKnown.Equal(sb[j].LastKnown), "step %d %s", i, sa[j].Key)
			require.Equal(t, [3]bool{sa[j].Known, sa[j].Overloaded, sa[j].Changed}, [3]bool{sb[j].Known, sb[j].Overloaded, sb[j].Changed}, "step %d %s", i, sa[j].Key)
			if sf[j].Overloaded != sa[j].Overloaded || math.Float64bits(sf[j].Value) != math.Float64bits(sa[j].Value) && !math.IsNaN(sa[j].Value) {
				differs = true
			}
		}
	}
	require.True(t, differs, "a fresh tracker scores the same: the test shows nothing")
}

func TestTrackerUnmarshalRefuses(t *testing.T) {
	a := cpuOnly(t)
	a.Observe(t0, cpu(0.5))
	good, err := a.MarshalBinary()
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"other version", append([]byte{StateVersion + 1}, good[1:]...), "format version 2, want 1"},
		{"truncated", good[:len(good)-1], "has a score: want 0 or 1"},
		{"trailing", append(append([]byte{}, good...), 7), "1 trailing bytes"},
		{"no service", []byte{StateVersion, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "want a service"},
		{"score above 1", withScore(t, good, 1.5), "smoothed score 1.5: want a value in [0, 1]"},
		{"score below 0", withScore(t, good, -0.25), "smoothed score -0.25: want a value in [0, 1]"},
		// The last two bytes are the key's hysteresis side and whether it
		// has a score: a key turns overloaded only by a known score.
		{"overloaded without a score", append(append([]byte{}, good[:len(good)-2]...), 1, 0), "overloaded without a known score"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := cpuOnly(t)
			tr.Observe(t0, cpu(0.9))
			err := tr.UnmarshalBinary(tt.b)
			require.ErrorIs(t, err, ErrState)
			require.Contains(t, err.Error(), tt.want)
			require.Len(t, tr.keys, 1, "a refused state leaves the tracker as it was")
		})
	}
}

// FuzzTrackerState: arbitrary bytes never panic; what is accepted survives
// an encode-decode round trip and the tracker keeps scoring.
//
// The seeds are valid states: an empty tracker, one key whose score went
// unknown, and several services and instances on both sides of the
// hysteresis (overloaded and not, smoothed scores between the thresholds).
func FuzzTrackerState(f *testing.F) {
	empty, _ := New(Options{Weights: Weights{CPU: 1}})
	b, _ := empty.MarshalBinary()
	f.Add(b)
	a, _ := New(Options{Weights: Weights{CPU: 1}})
	a.Observe(t0, cpu(0.9))
	a.Observe(t0.Add(time.Minute), unknownCPU())
	b, _ = a.MarshalBinary()
	f.Add(b)
	many, _ := New(Options{Weights: Weights{CPU: 1}})
	for i := range 6 {
		at := t0.Add(time.Duration(i) * 30 * time.Second)
		for j, svc := range []string{"checkout", "search", "ship"} {
			for _, inst := range []string{"", svc + "-1", svc + "-2"} {
				e := entry(svc, map[signals.Signal]float64{signals.CPU: 0.2 + 0.3*float64(j) + 0.1*float64(i%3)})
				e.Key.Instance = inst
				many.Observe(at, e)
			}
		}
	}
	b, _ = many.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, _ := New(Options{Weights: Weights{CPU: 1}})
		if err := tr.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v does not wrap ErrState", err)
			}
			return
		}
		enc, err := tr.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		again, _ := New(Options{Weights: Weights{CPU: 1}})
		if err := again.UnmarshalBinary(enc); err != nil {
			t.Fatalf("accepted state does not survive a round trip: %v", err)
		}
		if enc2, _ := again.MarshalBinary(); string(enc2) != string(enc) {
			t.Fatal("accepted state encodes to other bytes after a round trip")
		}
		tr.Observe(t0.Add(time.Hour), cpu(0.5))
	})
}

// withScore returns the encoded state of one key with its smoothed score
// replaced by v (statecodec writes floats as 8 little-endian bytes; the
// score in good is 0.5).
func withScore(t *testing.T, good []byte, v float64) []byte {
	t.Helper()
	i := bytes.Index(good, binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.5)))
	require.GreaterOrEqual(t, i, 0, "the score 0.5 is not in the encoded state")
	out := bytes.Clone(good)
	binary.LittleEndian.PutUint64(out[i:], math.Float64bits(v))
	return out
}
