package pid

import (
	"math"
	"testing"
	"time"
)

// A deadband change is as bumpless as a gain change: with the measurement
// and setpoint unchanged (and no integral action to move it), the next
// output is the one before the change.
func TestSetConfigDeadbandChangeIsBumpless(t *testing.T) {
	for _, db := range []float64{0.1, 0.6} { // narrower than the error, and wider
		cfg := DefaultConfig()
		cfg.Kp, cfg.Ki = 1, 0.1
		cfg.OutMin, cfg.OutMax = -100, 100
		c := mustNew(t, cfg)
		t0 := time.Unix(0, 0)
		for i := range 5 {
			if _, err := c.Update(t0.Add(time.Duration(i)*time.Second), 1, 0.5); err != nil {
				t.Fatal(err)
			}
		}
		before := c.Output()
		cfg.Ki, cfg.AntiWindup = 0, Conditional
		cfg.Deadband = db
		if err := c.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		out, err := c.Update(t0.Add(5*time.Second), 1, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(out-before) > 1e-12 {
			t.Errorf("deadband %v: the change moved the output from %v to %v", db, before, out)
		}
	}
}

// SetManual and then SetAuto before the first Update: that first Update
// starts from the manual output, as it does when an Update came between.
func TestSetAutoBeforeTheFirstUpdateStartsFromTheManualOutput(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutMin, cfg.OutMax = 0, 10
	c := mustNew(t, cfg)
	if err := c.SetManual(7); err != nil {
		t.Fatal(err)
	}
	c.SetAuto()
	out, err := c.Update(time.Unix(10, 0), 0.7, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(out-7) > 1e-12 || c.Mode() != Auto || c.State().Mode != Auto {
		t.Fatalf("first output %v in mode %v (step %v), want 7 in auto", out, c.Mode(), c.State().Mode)
	}
	// A fresh controller still starts from the P term alone.
	fresh := mustNew(t, cfg)
	if out, _ := fresh.Update(time.Unix(10, 0), 0.7, 0.5); math.Abs(out-cfg.Kp*0.2) > 1e-12 {
		t.Fatalf("fresh controller: first output %v, want Kp*e = %v", out, cfg.Kp*0.2)
	}
}

// Reset in Manual forgets the process but not the manual output: Output
// reports it until the next Update, which returns it too.
func TestResetInManualKeepsTheManualOutput(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	if err := c.SetManual(0.6); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(time.Unix(10, 0), 0.7, 0.5); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	if got := c.Output(); got != 0.6 {
		t.Fatalf("after Reset: Output %v, want the manual 0.6", got)
	}
	if out, _ := c.Update(time.Unix(20, 0), 0.7, 0.4); out != 0.6 {
		t.Fatalf("first Update after Reset: %v, want 0.6", out)
	}
}
