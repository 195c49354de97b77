package pid

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// simc returns SIMC PI settings for a first-order process with dead time
// (k, tau, theta) and closed-loop time constant tauC (Skogestad 2003).
func simc(k, tau, theta, tauC float64) (kp, ki float64) {
	kp = tau / (k * (tauC + theta))
	ti := math.Min(tau, 4*(tauC+theta))
	return kp, kp / ti
}

func newFOPDT(h float64) *fopdt {
	return &fopdt{k: 2, tau: 10, delay: newDeadTime(2, h)}
}

func mustNew(t *testing.T, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFOPDTSetpointStep: SIMC-tuned PI(D) on K=2, tau=10 s, theta=2 s, for
// regular and irregular ticks; the figures are logged as a table.
func TestFOPDTSetpointStep(t *testing.T) {
	const h = 0.01
	kp, ki := simc(2, 10, 2, 2)
	tests := []struct {
		name         string
		kd           float64
		ticks        func(float64) float64
		maxOvershoot float64 // share of the step
		maxSettling  float64 // seconds into the 2% band
	}{
		{"PI/1s ticks", 0, regular(1), 0.10, 30},
		{"PI/jittered 0.3-1.7s ticks", 0, jittered(1, 0.7, 42), 0.12, 35},
		{"PID/1s ticks", 1.0, regular(1), 0.10, 30},
		{"PI/5s ticks", 0, regular(5), 0.25, 60},
	}
	t.Logf("%-28s %10s %10s %10s", "case", "overshoot", "settle2%", "final err")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Kp, cfg.Ki, cfg.Kd = kp, ki, tt.kd
			cfg.OutMin, cfg.OutMax = -10, 10
			cfg.DerivativeFilter = time.Second
			c := mustNew(t, cfg)
			tr, err := loop(c, newFOPDT(h), h, 120, tt.ticks, func(float64) float64 { return 1 })
			if err != nil {
				t.Fatal(err)
			}
			ov, st, fe := stepMetrics(tr, 0, 1, 0, 0.02)
			t.Logf("%-28s %9.1f%% %9.1fs %9.2f%%", tt.name, 100*ov, st, 100*fe)
			if ov > tt.maxOvershoot {
				t.Errorf("overshoot %.1f%%, want <= %.0f%%", 100*ov, 100*tt.maxOvershoot)
			}
			if st < 0 || st > tt.maxSettling {
				t.Errorf("settling time %.1fs, want <= %.0fs", st, tt.maxSettling)
			}
			if fe > 0.005 {
				t.Errorf("final error %.2f%%, want <= 0.5%%", 100*fe)
			}
		})
	}
}

// TestIntegratingPlant: PI on dy/dt = 0.5 (u(t-1) - load) follows a setpoint
// step and rejects a load step without steady-state error.
func TestIntegratingPlant(t *testing.T) {
	const h = 0.01
	// SIMC for an integrating process k/s e^{-theta s}: Kc = 1/(k(tauC+theta)), Ti = 4(tauC+theta).
	k, theta, tauC := 0.5, 1.0, 1.0
	kp := 1 / (k * (tauC + theta))
	ki := kp / (4 * (tauC + theta))
	cfg := DefaultConfig()
	cfg.Kp, cfg.Ki, cfg.Kd = kp, ki, 0
	cfg.OutMin, cfg.OutMax = -10, 10
	c := mustNew(t, cfg)
	p := &integrating{k: k, delay: newDeadTime(theta, h)}
	var tr trace
	// setpoint step at 0, load step of 0.5 at 60 s
	tr, err := loop(c, loadAt(p, 60, 0.5), h, 150, regular(0.5), func(float64) float64 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	ov, st, _ := stepMetrics(cut(tr, 0, 60), 0, 1, 0, 0.02)
	// After the load step, the measurement dips and must come back.
	dip, rec := 0.0, -1.0
	for i, tm := range tr.t {
		if tm < 60 {
			continue
		}
		dip = math.Max(dip, 1-tr.y[i])
		if math.Abs(tr.y[i]-1) > 0.02 {
			rec = tm - 60
		}
	}
	fe := math.Abs(tr.y[len(tr.y)-1] - 1)
	t.Logf("setpoint step: overshoot %.1f%%, settling(2%%) %.1fs; load step 0.5: dip %.3f, recovery(2%%) %.1fs, final error %.4f", 100*ov, st, dip, rec, fe)
	if ov > 0.45 || st < 0 || st > 40 {
		t.Errorf("setpoint step: overshoot %.1f%% (want <= 45%%), settling %.1fs (want <= 40s)", 100*ov, st)
	}
	if rec < 0 || rec > 50 || fe > 0.005 {
		t.Errorf("load step: recovery %.1fs (want <= 50s), final error %.4f (want <= 0.005)", rec, fe)
	}
}

// loadAt applies a load step to an integrating plant at time at.
func loadAt(p *integrating, at, load float64) plant {
	return &timedLoad{p: p, at: at, load: load}
}

type timedLoad struct {
	p        *integrating
	at, load float64
	t        float64
}

func (l *timedLoad) step(u, h float64) {
	l.t += h
	if l.t >= l.at {
		l.p.load = l.load
	}
	l.p.step(u, h)
}
func (l *timedLoad) output() float64 { return l.p.output() }

func cut(tr trace, from, to float64) trace {
	var out trace
	for i, t := range tr.t {
		if t >= from && t < to {
			out.t = append(out.t, t)
			out.y = append(out.y, tr.y[i])
			out.u = append(out.u, tr.u[i])
			out.sp = append(out.sp, tr.sp[i])
		}
	}
	return out
}

// TestSaturationRecovery: the setpoint is out of reach (output limited to
// [0, 0.6], so y <= 1.2) for 100 s, then drops to 0.8. With anti-windup the
// loop recovers promptly; without, the wound-up integral holds the output at
// its limit long after.
func TestSaturationRecovery(t *testing.T) {
	const h = 0.01
	kp, ki := simc(2, 10, 2, 2)
	sp := func(t float64) float64 {
		if t < 100 {
			return 1.5
		}
		return 0.8
	}
	recovery := map[AntiWindup]float64{}
	t.Logf("%-18s %12s %12s %10s", "anti-windup", "undershoot", "settle2%", "final err")
	for _, aw := range []AntiWindup{BackCalculation, Conditional, None} {
		cfg := DefaultConfig()
		cfg.Kp, cfg.Ki = kp, ki
		cfg.OutMin, cfg.OutMax = 0, 0.6
		cfg.AntiWindup = aw
		c := mustNew(t, cfg)
		tr, err := loop(c, newFOPDT(h), h, 300, regular(1), sp)
		if err != nil {
			t.Fatal(err)
		}
		for i, u := range tr.u {
			if u < cfg.OutMin || u > cfg.OutMax {
				t.Fatalf("%s: output %v outside [%v, %v] at %.1fs", aw, u, cfg.OutMin, cfg.OutMax, tr.t[i])
			}
		}
		after := cut(tr, 100, 300)
		under := 0.0
		for _, y := range after.y {
			under = math.Max(under, (0.8-y)/0.4)
		}
		_, st, fe := stepMetrics(after, 100, 0.8, 1.2, 0.02)
		recovery[aw] = st
		t.Logf("%-18s %11.1f%% %11.1fs %9.2f%%", aw, 100*under, st, 100*fe)
		if aw != None && (st < 0 || st > 40 || fe > 0.005) {
			t.Errorf("%s: settling %.1fs (want <= 40s), final error %.2f%%", aw, st, 100*fe)
		}
	}
	if recovery[None] >= 0 && recovery[None] < 2*recovery[BackCalculation] {
		t.Errorf("windup not demonstrated: no anti-windup settles in %.1fs, back-calculation in %.1fs", recovery[None], recovery[BackCalculation])
	}
}

func TestLimitsAndRateLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kp, cfg.Ki = 5, 1
	cfg.OutMin, cfg.OutMax = -1, 2
	cfg.RateLimit = 0.1 // per second
	c := mustNew(t, cfg)
	t0 := time.Unix(0, 0)
	prev, _ := c.Update(t0, 0, 0)
	ticks := jittered(1, 0.9, 7)
	at := 0.0
	for i := range 200 {
		next := ticks(at)
		sp := 10.0
		if i >= 100 {
			sp = -10
		}
		out, err := c.Update(t0.Add(time.Duration(next*1e9)), sp, 0)
		if err != nil {
			t.Fatal(err)
		}
		if out < cfg.OutMin || out > cfg.OutMax {
			t.Fatalf("step %d: output %v outside [%v, %v]", i, out, cfg.OutMin, cfg.OutMax)
		}
		dt := c.State().Interval.Seconds()
		if d := math.Abs(out - prev); d > cfg.RateLimit*dt+1e-12 {
			t.Fatalf("step %d: output moved %v in %.3fs, rate limit %v/s", i, d, dt, cfg.RateLimit)
		}
		if s := c.State(); !s.Saturated {
			t.Fatalf("step %d: state not marked saturated: %+v", i, s)
		}
		prev, at = out, next
	}
}

func TestDeadband(t *testing.T) {
	tests := []struct {
		name      string
		err       float64
		wantError float64
	}{
		{"inside", 0.05, 0},
		{"edge", 0.1, 0},
		{"above", 0.3, 0.2},
		{"below", -0.3, -0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Kp, cfg.Ki = 1, 1
			cfg.OutMin, cfg.OutMax = -10, 10
			cfg.Deadband = 0.1
			c := mustNew(t, cfg)
			t0 := time.Unix(0, 0)
			for i := range 10 {
				if _, err := c.Update(t0.Add(time.Duration(i)*time.Second), tt.err, 0); err != nil {
					t.Fatal(err)
				}
			}
			s := c.State()
			if math.Abs(s.Error-tt.wantError) > 1e-12 {
				t.Errorf("error %v, want %v", s.Error, tt.wantError)
			}
			if wantI := 9 * tt.wantError; math.Abs(s.I-wantI) > 1e-9 {
				t.Errorf("integral %v, want %v", s.I, wantI)
			}
		})
	}
}

// TestDerivativeOnMeasurement: a setpoint step gives no derivative kick; a
// measurement ramp gives D = -Kd * slope once the filter has settled.
func TestDerivativeOnMeasurement(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kp, cfg.Ki, cfg.Kd = 1, 0, 2
	cfg.OutMin, cfg.OutMax = -100, 100
	cfg.DerivativeFilter = 2 * time.Second
	c := mustNew(t, cfg)
	t0 := time.Unix(0, 0)
	c.Update(t0, 0, 0)
	c.Update(t0.Add(time.Second), 5, 0) // setpoint step
	if s := c.State(); s.D != 0 || s.P != 5 {
		t.Fatalf("setpoint step: P %v D %v, want P 5 D 0 (no derivative kick)", s.P, s.D)
	}
	y := 0.0
	for i := 2; i < 60; i++ {
		y += 0.5 // slope 0.5 per second
		c.Update(t0.Add(time.Duration(i)*time.Second), 5, y)
	}
	if s := c.State(); math.Abs(s.D-(-1)) > 1e-3 {
		t.Errorf("ramp: D %v, want -Kd*slope = -1", s.D)
	}
	// The filter smooths a single-sample spike in the measurement.
	c.Update(t0.Add(60*time.Second), 5, y+10)
	if s := c.State(); math.Abs(s.D) > 2*10/3.0+1 {
		t.Errorf("spike: D %v, want attenuated by the filter (unfiltered would be -20)", s.D)
	}
}

// TestBumplessManualToAuto: the output right after switching back to Auto
// equals the manual output (up to one step of integral and P/D change).
func TestBumplessManualToAuto(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kp, cfg.Ki, cfg.Kd = 2, 0.5, 1
	cfg.OutMin, cfg.OutMax = -100, 100
	c := mustNew(t, cfg)
	t0 := time.Unix(0, 0)
	if err := c.SetManual(7); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		out, _ := c.Update(t0.Add(time.Duration(i)*time.Second), 3, 1) // constant error 2
		if out != 7 {
			t.Fatalf("manual: output %v, want 7", out)
		}
	}
	c.SetAuto()
	out, _ := c.Update(t0.Add(20*time.Second), 3, 1)
	// Only this step's integral (Ki*e*dt = 0.5*2*1 = 1) may move the output.
	if math.Abs(out-8) > 1e-9 {
		t.Errorf("first auto output %v, want 8 (7 + one integral step)", out)
	}
}

// TestBumplessGainChange: changing gains does not move the output by itself.
func TestBumplessGainChange(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kp, cfg.Ki, cfg.Kd = 1, 0.2, 0.5
	cfg.OutMin, cfg.OutMax = -100, 100
	c := mustNew(t, cfg)
	t0 := time.Unix(0, 0)
	y := 0.0
	for i := range 30 {
		y += 0.1
		c.Update(t0.Add(time.Duration(i)*time.Second), 5, y)
	}
	before := c.State()
	cfg.Kp, cfg.Kd = 4, 2
	if err := c.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if after := c.State(); math.Abs(after.P+after.I+after.D-before.Unlimited) > 1e-9 {
		t.Fatalf("gain change moved P+I+D from %v to %v", before.Unlimited, after.P+after.I+after.D)
	}
	// Next step with an unchanged measurement trend moves only by the usual
	// small step, not by the gain ratio.
	y += 0.1
	out, _ := c.Update(t0.Add(30*time.Second), 5, y)
	if math.Abs(out-before.Output) > 0.5 {
		t.Errorf("output jumped from %v to %v after a gain change", before.Output, out)
	}
}

// TestStateJSON: the evidence the engine records round-trips through JSON.
func TestStateJSON(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Update(t0, 0.5, 0.1)
	c.Update(t0.Add(2*time.Second), 0.5, 0.2)
	c.SetManual(0.3)
	b, err := json.Marshal(c.State())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"p":`, `"i":`, `"d":`, `"mode":"manual"`, `"interval":2000000000`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil || back != c.State() {
		t.Fatalf("round trip: %+v, %v; want %+v", back, err, c.State())
	}
	if err := json.Unmarshal([]byte(`{"mode":"cruise"}`), &back); !errors.Is(err, ErrInput) {
		t.Fatalf("bad mode: err %v, want ErrInput", err)
	}
}

func TestBadInput(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	t0 := time.Unix(100, 0)
	if _, err := c.Update(t0, 0.5, 0.2); err != nil {
		t.Fatal(err)
	}
	before := c.State()
	tests := []struct {
		name  string
		at    time.Time
		sp, y float64
	}{
		{"NaN measurement", t0.Add(time.Second), 0.5, math.NaN()},
		{"Inf setpoint", t0.Add(time.Second), math.Inf(1), 0},
		{"time backwards", t0.Add(-time.Second), 0.5, 0.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Update(tt.at, tt.sp, tt.y); !errors.Is(err, ErrInput) {
				t.Fatalf("err %v, want ErrInput", err)
			}
			if c.State() != before {
				t.Fatalf("state changed on bad input")
			}
		})
	}
	// A repeated timestamp leaves the output unchanged.
	if out, err := c.Update(t0, 0.9, 0.9); err != nil || out != before.Output {
		t.Fatalf("repeated timestamp: out %v err %v, want %v nil", out, err, before.Output)
	}
}

// TestOverflowingInputRefused: finite input whose error, rate or terms
// overflow float64 is refused like NaN and leaves the state unchanged;
// accepted, it made every later output NaN and the state unsavable.
func TestOverflowingInputRefused(t *testing.T) {
	t0 := time.Unix(100, 0)
	tests := []struct {
		name    string
		started bool
		sp, y   float64
	}{
		{"first sample: error overflows", false, -math.MaxFloat64, math.MaxFloat64},
		{"error overflows", true, -math.MaxFloat64, math.MaxFloat64},
		{"derivative overflows", true, 0.5, math.MaxFloat64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Kd = 0.1
			c := mustNew(t, cfg)
			if tt.started {
				if _, err := c.Update(t0, 0.5, -math.MaxFloat64/2); err != nil {
					t.Fatal(err)
				}
			}
			before, deriv := c.State(), c.deriv
			if _, err := c.Update(t0.Add(time.Second), tt.sp, tt.y); !errors.Is(err, ErrInput) {
				t.Fatalf("err %v, want ErrInput; state %+v", err, c.State())
			}
			if c.State() != before || c.deriv != deriv {
				t.Fatalf("state %+v after refused input, want %+v", c.State(), before)
			}
			if out, err := c.Update(t0.Add(2*time.Second), 0.5, 0.5); err != nil || math.IsNaN(out) {
				t.Fatalf("next output %v, %v; want a number", out, err)
			}
			if _, err := c.MarshalBinary(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	mod := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"nan kp", mod(func(c *Config) { c.Kp = math.NaN() }), "Kp"},
		{"all zero", mod(func(c *Config) { c.Kp, c.Ki, c.Kd = 0, 0, 0 }), "all zero"},
		{"mixed signs", mod(func(c *Config) { c.Ki = -1 }), "Ki"},
		{"limits", mod(func(c *Config) { c.OutMin = 2 }), "OutMin"},
		{"rate", mod(func(c *Config) { c.RateLimit = -1 }), "RateLimit"},
		{"deadband", mod(func(c *Config) { c.Deadband = -1 }), "Deadband"},
		{"filter", mod(func(c *Config) { c.DerivativeFilter = -1 }), "DerivativeFilter"},
		{"antiwindup", mod(func(c *Config) { c.AntiWindup = 9 }), "AntiWindup"},
		{"maxinterval", mod(func(c *Config) { c.MaxInterval = 0 }), "MaxInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if !errors.Is(err, ErrConfig) || !contains(err.Error(), tt.field) {
				t.Fatalf("err %v, want ErrConfig naming %s", err, tt.field)
			}
			if _, err := New(tt.cfg); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
	c := mustNew(t, DefaultConfig())
	if err := c.SetConfig(tests[0].cfg); err == nil || c.Config() != DefaultConfig() {
		t.Fatal("SetConfig applied an invalid config")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
