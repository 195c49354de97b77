package thresholds

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestVolatilityFeature: a series that keeps its level but becomes restless
// is invisible to level features yet raises VolatilityUp; one that goes
// still raises VolatilityDown.
func TestVolatilityFeature(t *testing.T) {
	tests := []struct {
		name    string
		feature Feature
		noise   func(i int) float64 // noise amplitude at sample i
	}{
		{"restless", VolatilityUp, func(i int) float64 {
			if i >= 2000 {
				return 3
			}
			return 1
		}},
		{"still", VolatilityDown, func(i int) float64 {
			if i >= 2000 {
				return 0.05
			}
			return 1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := DefaultOptions()
			opt.Weights = [NumFeatures]float64{}
			opt.Weights[tt.feature] = 1
			d, err := New(opt)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 7))
			rs := run(d, 2300, func(i int) float64 { return 50 + tt.noise(i)*rng.NormFloat64() })
			before, after := maxScore(rs, opt.Warmup, 2000), maxScore(rs, 2000, 2300)
			t.Logf("max score before %.4f, after %.4f", before, after)
			if !(after > before) {
				t.Errorf("%s change not found: max %.4f after, %.4f before", tt.name, after, before)
			}
		})
	}
}

func TestVolatilityUpdate(t *testing.T) {
	v := volatility{alpha: 0.5, longAlpha: 0.5}
	v.prev = 10
	tests := []struct {
		x, up float64
	}{
		{12, 1},   // the first step sets both averages to 2
		{14, 1},   // a step of 2: both stay at 2
		{24, 1.2}, // a step of 10: recent 6; typical takes it clipped to 4*2, so 5
	}
	for i, tt := range tests {
		up, down := v.update(tt.x, 0)
		if math.Abs(up-tt.up) > 1e-6 || math.Abs(up*down-1) > 1e-6 {
			t.Errorf("step %d: up %v down %v, want up %v and down 1/up", i, up, down, tt.up)
		}
	}
}

// TestEchoDamped: the second of two identical fresh events within
// EchoWindow samples scores below the first; with the damping off, or the
// events further apart, it does not.
func TestEchoDamped(t *testing.T) {
	tests := []struct {
		name   string
		window int
		gap    int
		damped bool
	}{
		{"close", 5, 2, true},
		{"apart", 5, 40, false},
		{"off", 0, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := DefaultOptions()
			opt.EchoWindow = tt.window
			d, err := New(opt)
			if err != nil {
				t.Fatal(err)
			}
			s := d.unseen // a surprisal at the "not seen within memory" level
			first := d.damp(s)
			for range tt.gap - 1 {
				d.damp(0)
			}
			second := d.damp(s)
			if first != s {
				t.Fatalf("first event damped: %v, want %v", first, s)
			}
			if got := second < s; got != tt.damped {
				t.Errorf("second event %v (first %v): damped %v, want %v", second, s, got, tt.damped)
			}
		})
	}
}
