package thresholds

import (
	"math/rand/v2"
	"testing"
)

// TestCorroborate checks which surprisals keep 1-LoneDamping of themselves:
// those from a feature that needs corroboration when no other feature
// reaches CorroborationLevel of the "not seen within memory" level, and
// those of a feature below its MinValue (a point residual of a few spreads,
// a new high or low by a hair, a small volatility ratio).
func TestCorroborate(t *testing.T) {
	d := mustDetector(t)
	u := d.unseen
	level := d.opt.CorroborationLevel * u
	tests := []struct {
		name     string
		f        Feature
		second   float64
		surprise float64
		damped   bool
	}{
		{"lone drift", DriftUp, 0, 10, true},
		{"drift with weak company", DriftUp, 0.99 * level, 10, true},
		{"drift corroborated", DriftUp, level, 10, false},
		{"lone new high", EnvelopeUp, 0.1 * u, 10, true},
		{"new high corroborated", EnvelopeUp, 0.9 * u, 10, false},
		{"corroborated new high by a hair", EnvelopeUp, 0.9 * u, 0.5 * d.opt.MinValue[EnvelopeDown], true},
		{"new low by a hair", EnvelopeDown, 0, 0.5 * d.opt.MinValue[EnvelopeDown], true},
		{"new low by a margin", EnvelopeDown, 0, d.opt.MinValue[EnvelopeDown], false},
		{"lone point residual", PointUp, 0, 10, false},
		{"small point residual", PointUp, 0, 0.99 * d.opt.MinValue[PointUp], true},
		{"small corroborated point residual", PointDown, u, 2, true},
		{"point residual at the minimum", PointDown, 0, d.opt.MinValue[PointUp], false},
		{"small volatility ratio", VolatilityUp, u, 0.5, true},
		{"large volatility ratio", VolatilityUp, 0, 5, false},
		{"drift has no minimum", DriftUp, u, 1e-6, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := d.corroborate(u, tt.second, tt.f, tt.surprise)
			want := u
			if tt.damped {
				want = u * (1 - d.opt.LoneDamping)
			}
			if got != want {
				t.Fatalf("corroborate(%v, %v, %s, %v) = %v, want %v", u, tt.second, tt.f, tt.surprise, got, want)
			}
		})
	}
	opt := DefaultOptions()
	opt.LoneDamping = 0
	off, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	if got := off.corroborate(u, 0, DriftUp, 10); got != u {
		t.Fatalf("LoneDamping 0: corroborate = %v, want %v unchanged", got, u)
	}
}

// TestLoneDriftDamped feeds a noisy series that starts to drift slowly
// upwards, which the drift feature sees before any other, with and without
// LoneDamping (echo damping and MinValue off, so only corroboration
// differs): with
// it, the drift's lone alarms score lower and nothing scores higher.
func TestLoneDriftDamped(t *testing.T) {
	run := func(loneDamping float64) []Result {
		opt := DefaultOptions()
		opt.LoneDamping = loneDamping
		opt.EchoWindow, opt.MinValue = 0, [NumFeatures]float64{}
		d, err := New(opt)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 7))
		out := make([]Result, 3000)
		for i := range out {
			v := 100 + rng.NormFloat64()
			if i >= 2000 {
				v += float64(i-2000) * 0.004
			}
			out[i] = d.Observe(every5m(i), v)
		}
		return out
	}
	off, on := run(0), run(DefaultOptions().LoneDamping)
	lowered := 0
	for i := range on {
		if on[i].Score > off[i].Score {
			t.Fatalf("sample %d: %.5f with lone damping, %.5f without: want no increase", i, on[i].Score, off[i].Score)
		}
		if on[i].Score < off[i].Score {
			lowered++
			if on[i].Feature != DriftUp && on[i].Feature != EnvelopeUp {
				t.Errorf("sample %d lowered but scored by %s", i, on[i].Feature)
			}
		}
	}
	if lowered == 0 {
		t.Fatal("no lone drift alarm was lowered")
	}
	t.Logf("%d samples lowered", lowered)
}
