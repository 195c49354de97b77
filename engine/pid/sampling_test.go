package pid

import (
	"math"
	"testing"
	"time"
)

// A missed cycle (an interval twice as long) does not disturb the
// derivative of a ramp, filtered or not; an interval of 1ns gives finite
// terms, and a repeated timestamp returns the last output unchanged.
func TestDerivativeWithMissedCyclesAndTinyIntervals(t *testing.T) {
	for _, tf := range []time.Duration{0, 5 * time.Second} {
		cfg := DefaultConfig()
		cfg.Kp, cfg.Ki, cfg.Kd = 1, 0.1, 2
		cfg.OutMin, cfg.OutMax = -1e9, 1e9
		cfg.DerivativeFilter = tf
		c := mustNew(t, cfg)
		at, y := time.Unix(0, 0), 0.0
		for i := range 60 {
			d := time.Second
			if i%5 == 0 {
				d = 2 * time.Second
			}
			at = at.Add(d)
			y += 0.5 * d.Seconds() // slope 0.5 per second
			if _, err := c.Update(at, 5, y); err != nil {
				t.Fatal(err)
			}
		}
		if s := c.State(); math.Abs(s.D-(-1)) > 1e-4 {
			t.Errorf("filter %v: D %v on a ramp with missed cycles, want -Kd*slope = -1", tf, s.D)
		}
		out, err := c.Update(at.Add(time.Nanosecond), 5, y+1e-9)
		if s := c.State(); err != nil || !finite(out) || !finite(s.D) || !finite(s.I) {
			t.Fatalf("filter %v: 1ns interval: output %v, err %v, state %+v", tf, out, err, s)
		}
		again, err := c.Update(at.Add(time.Nanosecond), 5, y+7)
		if err != nil || again != out {
			t.Fatalf("filter %v: repeated timestamp: %v, %v; want %v unchanged", tf, again, err, out)
		}
		if _, err := c.Update(at, 5, y); err == nil {
			t.Fatalf("filter %v: time going backwards accepted", tf)
		}
	}
}

// While the output is held at its limit by an error that pushes into it,
// the integral never holds more than the limit itself (back-calculation
// settles it there, conditional integration stops it), also when the rate
// limit is what saturates the output at first.
func TestIntegralDoesNotWindPastTheLimit(t *testing.T) {
	for _, aw := range []AntiWindup{BackCalculation, Conditional} {
		for _, rate := range []float64{0, 0.01} {
			cfg := DefaultConfig()
			cfg.Kp, cfg.Ki = 0.5, 0.1
			cfg.OutMin, cfg.OutMax = 0, 1
			cfg.AntiWindup, cfg.RateLimit = aw, rate
			c := mustNew(t, cfg)
			t0 := time.Unix(0, 0)
			for i := range 500 {
				if _, err := c.Update(t0.Add(time.Duration(i)*time.Second), 5, 0); err != nil {
					t.Fatal(err)
				}
				if s := c.State(); s.I > cfg.OutMax+1e-9 {
					t.Fatalf("%v, rate limit %v: step %d: integral %v past OutMax", aw, rate, i, s.I)
				}
			}
			// The error reverses: the output leaves the limit at once.
			out, _ := c.Update(t0.Add(500*time.Second), 0, 0.5)
			if !(out < cfg.OutMax) {
				t.Errorf("%v, rate limit %v: output %v still at the limit after the error reversed", aw, rate, out)
			}
		}
	}
}
