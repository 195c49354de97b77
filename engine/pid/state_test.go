package pid

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRestoreContinuesExactly: a controller restored from another's state
// at any step (auto, manual, after a gain change, saturated and rate
// limited) returns exactly the outputs and terms the original does from
// then on.
func TestRestoreContinuesExactly(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := DefaultConfig()
	cfg.Kp, cfg.Ki, cfg.Kd = -40, -8, -5
	cfg.OutMin, cfg.OutMax, cfg.RateLimit, cfg.Deadband = 50, 400, 3, 0.01
	measure := func(i int) float64 { return 0.7 + 0.3*math.Sin(float64(i)/7) + 0.01*float64(i%3) }
	for _, tt := range []struct {
		name string
		at   int // the step after which the state is copied
		prep func(c *Controller)
	}{
		{"fresh", 0, func(*Controller) {}},
		{"auto", 25, func(*Controller) {}},
		{"manual", 25, func(c *Controller) { _ = c.SetManual(180) }},
		{"gains changed", 25, func(c *Controller) {
			g := c.Config()
			g.Kp, g.Ki = -60, -12
			_ = c.SetConfig(g)
		}},
		{"conditional anti-windup", 40, func(c *Controller) {
			g := c.Config()
			g.AntiWindup, g.TrackingTime = Conditional, 0
			_ = c.SetConfig(g)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, cfg)
			for i := range tt.at {
				if _, err := a.Update(t0.Add(time.Duration(i)*10*time.Second), 0.7, measure(i)); err != nil {
					t.Fatal(err)
				}
			}
			tt.prep(a)
			data, err := a.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			b, err := RestoreController(data)
			if err != nil {
				t.Fatal(err)
			}
			if b.State() != a.State() || b.Mode() != a.Mode() || b.Config() != a.Config() {
				t.Fatalf("restored state %+v mode %v, want %+v mode %v", b.State(), b.Mode(), a.State(), a.Mode())
			}
			again, _ := b.MarshalBinary()
			if string(again) != string(data) {
				t.Fatal("the restored controller encodes to other bytes")
			}
			for i := tt.at; i < tt.at+60; i++ {
				now := t0.Add(time.Duration(i)*10*time.Second + time.Duration(i%4)*time.Second)
				if i == tt.at+30 {
					a.SetAuto()
					b.SetAuto()
				}
				oa, ea := a.Update(now, 0.7, measure(i))
				ob, eb := b.Update(now, 0.7, measure(i))
				if math.Float64bits(oa) != math.Float64bits(ob) || (ea == nil) != (eb == nil) || a.State() != b.State() {
					t.Fatalf("step %d: restored %v %+v, original %v %+v", i, ob, b.State(), oa, a.State())
				}
			}
		})
	}
}

func TestRestoreControllerRefuses(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	if _, err := c.Update(time.Unix(100, 0), 0.7, 0.5); err != nil {
		t.Fatal(err)
	}
	good, _ := c.MarshalBinary()
	badCfg := mustNew(t, DefaultConfig())
	badCfg.cfg.MaxInterval = 0 // as an older or corrupt writer might
	zeroInterval, _ := badCfg.MarshalBinary()
	// A manual output outside the limits, which SetManual and SetConfig
	// never leave but Update would return.
	cfg := DefaultConfig()
	cfg.OutMin, cfg.OutMax = 50, 400
	manual := mustNew(t, cfg)
	_ = manual.SetManual(100)
	manual.manual = 1000
	manualOutside, _ := manual.MarshalBinary()
	for _, tt := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"other version", append([]byte{StateVersion + 1}, good[1:]...), "format version 2, want 1"},
		{"truncated", good[:len(good)-1], "interval: truncated"},
		{"trailing", append(append([]byte{}, good...), 0), "1 trailing bytes"},
		{"invalid config", zeroInterval, "MaxInterval 0s: want > 0"},
		{"manual output outside the limits", manualOutside, "manual output 1000: want within [OutMin 50, OutMax 400]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RestoreController(tt.b)
			if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want ErrState and %q", err, tt.want)
			}
		})
	}
}

// FuzzRestoreController: arbitrary bytes never panic; what is accepted
// encodes again to a state that restores to the same controller, and it
// keeps working: its next output is within its limits.
//
// The seeds are valid states: a fresh controller, one that ran, one put in
// manual mode.
func FuzzRestoreController(f *testing.F) {
	c, _ := New(DefaultConfig())
	b, _ := c.MarshalBinary()
	f.Add(b)
	for i := range 5 {
		_, _ = c.Update(time.Unix(int64(i*10), 0), 0.7, 0.5+0.1*float64(i))
	}
	b, _ = c.MarshalBinary()
	f.Add(b)
	_ = c.SetManual(0.3)
	b, _ = c.MarshalBinary()
	f.Add(b)
	pending, _ := New(DefaultConfig()) // manual, then auto before the first Update
	_ = pending.SetManual(0.4)
	pending.SetAuto()
	b, _ = pending.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := RestoreController(b)
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v does not wrap ErrState", err)
			}
			return
		}
		enc, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		again, err := RestoreController(enc)
		if err != nil || again.State() != c.State() || again.Config() != c.Config() {
			t.Fatalf("accepted state does not survive a round trip: %v", err)
		}
		cfg := c.Config()
		if out, err := c.Update(c.State().Time.Add(time.Second), 0.7, 0.5); err == nil && !(out >= cfg.OutMin && out <= cfg.OutMax) {
			t.Fatalf("output %v outside [%v, %v] after a restore", out, cfg.OutMin, cfg.OutMax)
		}
	})
}

// BenchmarkMarshal is the cost of encoding one controller, as the engine
// does for every service each cycle.
func BenchmarkMarshal(b *testing.B) {
	c, _ := New(DefaultConfig())
	_, _ = c.Update(time.Unix(10, 0), 0.7, 0.5)
	_, _ = c.Update(time.Unix(20, 0), 0.7, 0.6)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.AppendBinary(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}
