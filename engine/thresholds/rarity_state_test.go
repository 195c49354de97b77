package thresholds

import (
	"errors"
	"testing"
	"time"
)

// A detector state whose rarity histograms hold negative counts (a flipped
// sign bit of a stored float) is corrupt: no sequence of Observe calls
// produces it, and restored it would make the detector blind (every
// surprisal NaN, a 1000x spike scored 0). UnmarshalBinary refuses it with
// ErrState, as the Sketch decoder refuses negative counts.
func TestDetectorStateWithNegativeRarityRefused(t *testing.T) {
	opt := DefaultOptions()
	opt.Warmup = 50
	d, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1.7e9, 0)
	for i := range 400 {
		d.Observe(t0.Add(time.Duration(i)*time.Minute), 100+float64(i%7))
	}
	// Sanity: the healthy detector sees a spike.
	good, _ := d.MarshalBinary()
	probe, err := RestoreDetector(opt, good)
	if err != nil {
		t.Fatal(err)
	}
	if s := probe.Observe(t0.Add(400*time.Minute), 1e5).Score; s < 0.8 {
		t.Fatalf("setup: spike scores %v on the original detector", s)
	}

	// Corrupt the stored bytes: flip the sign of every rarity total (what
	// flipping one bit of each of those stored float64s does).
	for i := range d.rare {
		d.rare[i].total = -d.rare[i].total
	}
	b, err := d.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err = r.UnmarshalBinary(b); !errors.Is(err, ErrState) {
		s := r.Observe(t0.Add(400*time.Minute), 1e5).Score
		t.Fatalf("state with negative rarity totals: err %v, want ErrState; the restored detector scores a 1000x spike %v", err, s)
	}
}
