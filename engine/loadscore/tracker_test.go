package loadscore

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"governor.dev/governor/engine/signals"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cpuOnly scores CPU alone, so the raw score is the CPU use (of 1 core).
func cpuOnly(t *testing.T) *Tracker {
	tr, err := New(Options{Weights: Weights{CPU: 1}, HalfLife: 30 * time.Second, MaxGap: 5 * time.Minute})
	require.NoError(t, err)
	return tr
}

func cpu(v float64) *signals.Entry {
	return entry("s", map[signals.Signal]float64{signals.CPU: v})
}

func unknownCPU() *signals.Entry { return entry("s", nil) }

// With a 30 s half-life, each 30 s step keeps half the old value:
// 0.2 → ½·0.2+½·1 = 0.6 → 0.8 → 0.9 (above 0.8: act), then down through
// the band between the thresholds (held) to 0.3 (below 0.5: release). At
// exactly 0.8 nothing happens: the rule is "above".
func TestSmoothingAndHysteresis(t *testing.T) {
	tr := cpuOnly(t)
	steps := []struct {
		sec        int
		e          *signals.Entry
		value      float64
		known      bool
		overloaded bool
		changed    bool
	}{
		{0, cpu(0.2), 0.2, true, false, false},
		{30, cpu(1), 0.6, true, false, false},
		{60, cpu(1), 0.8, true, false, false},
		{90, cpu(1), 0.9, true, true, true},
		{105, unknownCPU(), 0.9, false, true, false}, // unknown: no change either way
		{120, cpu(0.7), 0.8, true, true, false},      // 30 s after the last known score
		{150, cpu(0.4), 0.6, true, true, false},      // between the thresholds: hold
		{180, cpu(0), 0.3, true, false, true},        // below 0.5: release
		{210, cpu(0.9), 0.6, true, false, false},     // between the thresholds: hold
		{240, cpu(1), 0.8, true, false, false},
		{270, cpu(1), 0.9, true, true, true},
	}
	for _, st := range steps {
		at := t0.Add(time.Duration(st.sec) * time.Second)
		sc := tr.Observe(at, st.e)
		require.InDelta(t, st.value, sc.Value, 1e-12, "t=%ds", st.sec)
		require.Equal(t, st.known, sc.Known, "t=%ds", st.sec)
		require.Equal(t, st.overloaded, sc.Overloaded, "t=%ds", st.sec)
		require.Equal(t, st.changed, sc.Changed, "t=%ds", st.sec)
	}
}

// Irregular intervals weigh by elapsed time: one 60 s step equals two 30 s
// steps with the same input.
func TestSmoothingUsesElapsedTime(t *testing.T) {
	a, b := cpuOnly(t), cpuOnly(t)
	a.Observe(t0, cpu(0))
	b.Observe(t0, cpu(0))
	a.Observe(t0.Add(30*time.Second), cpu(1))
	ra := a.Observe(t0.Add(60*time.Second), cpu(1))
	rb := b.Observe(t0.Add(60*time.Second), cpu(1))
	require.InDelta(t, 0.75, ra.Value, 1e-12)
	require.InDelta(t, 0.75, rb.Value, 1e-12)
}

func TestLongGapStartsAfresh(t *testing.T) {
	tr := cpuOnly(t)
	tr.Observe(t0, cpu(1))
	sc := tr.Observe(t0.Add(time.Second), cpu(1))
	require.True(t, sc.Overloaded)
	sc = tr.Observe(t0.Add(2*time.Minute), unknownCPU())
	require.True(t, sc.Overloaded, "a short outage keeps the state")
	require.Equal(t, 1.0, sc.Value)
	require.False(t, sc.Known)
	sc = tr.Observe(t0.Add(6*time.Minute), unknownCPU())
	require.False(t, sc.Overloaded, "after MaxGap without data the state is dropped")
	require.True(t, math.IsNaN(sc.Value))
	sc = tr.Observe(t0.Add(7*time.Minute), cpu(0.3))
	require.Equal(t, 0.3, sc.Value, "the first known score after a reset is taken as is")
}

// Dropping the history of a key that was overloaded releases it, and the
// score says so (Changed), as for a release by the thresholds.
func TestDroppedHistoryReportsTheRelease(t *testing.T) {
	tr := cpuOnly(t)
	sc := tr.Observe(t0, cpu(0.95))
	require.True(t, sc.Overloaded)
	require.True(t, sc.Changed)
	sc = tr.Observe(t0.Add(time.Minute), cpu(0.95))
	require.True(t, sc.Overloaded)
	require.False(t, sc.Changed)
	sc = tr.Observe(t0.Add(10*time.Minute), unknownCPU())
	require.False(t, sc.Overloaded)
	require.True(t, sc.Changed, "overloaded went to false")
	sc = tr.Observe(t0.Add(11*time.Minute), unknownCPU())
	require.False(t, sc.Changed)
	// Dropped and at once overloaded again by a known score: no change.
	tr.Observe(t0.Add(12*time.Minute), cpu(0.95))
	sc = tr.Observe(t0.Add(20*time.Minute), cpu(0.95))
	require.True(t, sc.Overloaded)
	require.False(t, sc.Changed, "still overloaded")
}

func TestUpdateSnapshot(t *testing.T) {
	tr, err := New(Options{})
	require.NoError(t, err)
	mk := func(svc, inst string, c float64) *signals.Entry {
		e := entry(svc, map[signals.Signal]float64{signals.CPU: c, signals.Memory: 512 * mib, signals.LatencyP99: 0.125})
		e.Key.Instance = inst
		return e
	}
	snap := &signals.Snapshot{At: t0, Scope: signals.PerInstance, Entries: map[signals.Key]*signals.Entry{}}
	for _, e := range []*signals.Entry{mk("b", "i1", 1), mk("a", "i2", 0), mk("a", "i1", 0.5)} {
		snap.Entries[e.Key] = e
	}
	got := tr.Update(snap)
	require.Len(t, got, 3)
	require.Equal(t, []signals.Key{{Service: "a", Instance: "i1"}, {Service: "a", Instance: "i2"}, {Service: "b", Instance: "i1"}}, []signals.Key{got[0].Key, got[1].Key, got[2].Key})
	// 0.4·cpu + 0.3·0.5 + 0.3·0.5
	require.InDelta(t, 0.5, got[0].Value, 1e-12)
	require.InDelta(t, 0.3, got[1].Value, 1e-12)
	require.InDelta(t, 0.7, got[2].Value, 1e-12)

	// Keys absent for longer than MaxGap are forgotten.
	tr.Update(&signals.Snapshot{At: t0.Add(10 * time.Minute), Entries: map[signals.Key]*signals.Entry{}})
	require.Empty(t, tr.keys)
}

// A known reading that is NaN (a snapshot not built by signals.Reader) is
// an unknown term: it neither becomes the score nor stays in the smoothed
// average for good, and the state still encodes for a takeover.
func TestNonFiniteInputDoesNotPoisonTheAverage(t *testing.T) {
	tr := cpuOnly(t)
	tr.Observe(t0, cpu(0.5))
	nan := cpu(0)
	nan.Values[signals.CPU] = signals.KnownValue(math.NaN())
	sc := tr.Observe(t0.Add(30*time.Second), nan)
	require.False(t, sc.Raw.Known)
	require.Equal(t, "unknown (not_finite: NaN)", sc.Raw.Terms[0].Reason)
	require.InDelta(t, 0.5, sc.Value, 1e-12)
	sc = tr.Observe(t0.Add(60*time.Second), cpu(1))
	require.InDelta(t, 0.875, sc.Value, 1e-12) // 60 s after the last known score
	_, err := tr.MarshalBinary()
	require.NoError(t, err)
}

// TestForgottenServiceStartsAfresh: a tracker told to forget a service
// drops every key of it (the service's and its instances'), at once rather
// than after MaxGap, and keeps the others. Back within MaxGap, the service
// starts afresh: its first score is its raw score, not released from an
// overloaded state it had before.
func TestForgottenServiceStartsAfresh(t *testing.T) {
	tr := cpuOnly(t)
	inst := cpu(1)
	inst.Key.Instance = "" // the service-level key
	other := entry("other", map[signals.Signal]float64{signals.CPU: 0.3})
	for i := range 4 {
		at := t0.Add(time.Duration(i) * 30 * time.Second)
		tr.Observe(at, cpu(1))
		tr.Observe(at, inst)
		tr.Observe(at, other)
	}
	require.True(t, tr.Observe(t0.Add(2*time.Minute), cpu(1)).Overloaded)

	tr.Forget("s")
	require.Len(t, tr.keys, 1, "only other is kept")
	_, ok := tr.keys[other.Key]
	require.True(t, ok)

	sc := tr.Observe(t0.Add(3*time.Minute), cpu(0.6))
	require.InDelta(t, 0.6, sc.Value, 1e-12, "a fresh start, not smoothed with the forgotten history")
	require.False(t, sc.Overloaded, "0.6 does not act on a fresh key")
	require.False(t, sc.Changed)

	tr.Forget("nobody") // forgetting an unknown service is a no-op
	require.Len(t, tr.keys, 2)
}
