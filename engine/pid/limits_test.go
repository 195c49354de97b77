package pid

import (
	"testing"
	"time"
)

// After SetConfig lowers OutMax under the output, the next output is inside
// the new bounds even though RateLimit allows only a small step from the
// previous one: the bounds win.
func TestSetConfigNarrowedLimitsBeatTheRateLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kp, cfg.Ki = 1, 0.1
	cfg.OutMin, cfg.OutMax = 0, 100
	cfg.RateLimit = 1 // per second
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	if out, err := c.Update(t0, 90, 0); err != nil || out != 90 {
		t.Fatalf("first output %v, %v; want 90 (P alone)", out, err)
	}
	cfg.OutMax = 50
	if err := c.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		out, err := c.Update(t0.Add(time.Duration(i)*time.Second), 90, 0)
		if err != nil {
			t.Fatal(err)
		}
		if out != 50 {
			t.Fatalf("step %d: output %v, want the new OutMax 50", i, out)
		}
	}
}

// A manual output above narrowed bounds is clamped by SetConfig, and the
// switch back to Auto continues from the clamped value.
func TestSetConfigNarrowedLimitsClampTheManualOutput(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutMin, cfg.OutMax = 0, 100
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	if err := c.SetManual(80); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Update(t0, 0, 0); err != nil || out != 80 {
		t.Fatalf("manual output %v, %v; want 80", out, err)
	}
	cfg.OutMax = 50
	if err := c.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if got := c.State().Output; got != 50 {
		t.Fatalf("state output %v right after SetConfig, want 50", got)
	}
	out, err := c.Update(t0.Add(time.Second), 0, 0)
	if err != nil || out != 50 {
		t.Fatalf("manual output %v, %v after SetConfig; want 50", out, err)
	}
	c.SetAuto()
	if out, err = c.Update(t0.Add(2*time.Second), 0, 0); err != nil || out != 50 {
		t.Fatalf("first Auto output %v, %v; want a bumpless 50", out, err)
	}
}

// A gap between updates does not bank output change: after ten minutes
// without a sample the output moves at most RateLimit x MaxInterval.
func TestRateLimitAfterAGap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kp, cfg.Ki = 1, 0
	cfg.OutMin, cfg.OutMax = 0, 1000
	cfg.RateLimit = 1 // per second
	cfg.MaxInterval = time.Minute
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	if err := c.SetManual(100); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(t0, 0, 0); err != nil {
		t.Fatal(err)
	}
	c.SetAuto()
	out, err := c.Update(t0.Add(10*time.Minute), 900, 0) // P alone asks for 900
	if err != nil {
		t.Fatal(err)
	}
	if out != 160 {
		t.Fatalf("output %v after a 10-minute gap, want 100 + 1/s x 60 s = 160", out)
	}
}

// SetManual before the first Update reports the manual output; a SetConfig
// that then narrows the bounds clamps what State and Output report too, not
// only what the first Update will return.
func TestSetConfigNarrowedLimitsClampTheManualOutputBeforeTheFirstUpdate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutMin, cfg.OutMax = 0, 100
	c := mustNew(t, cfg)
	if err := c.SetManual(80); err != nil {
		t.Fatal(err)
	}
	cfg.OutMax = 50
	if err := c.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if s := c.State(); c.Output() != 50 || s.Output != 50 || s.Unlimited != 50 {
		t.Fatalf("output %v, state %+v after SetConfig lowered OutMax to 50; want 50", c.Output(), s)
	}
	if out, err := c.Update(time.Unix(0, 0), 0, 0); err != nil || out != 50 {
		t.Fatalf("first output %v, %v; want the manual 50", out, err)
	}
}
