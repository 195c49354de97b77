package pid

import (
	"fmt"
	"math"
	"time"
)

// Mode is the controller's operating mode.
type Mode int

const (
	// Auto computes the output from the error.
	Auto Mode = iota
	// Manual holds the output set by SetManual while tracking the process,
	// so that the return to Auto is bumpless.
	Manual
)

func (m Mode) String() string {
	if m == Manual {
		return "manual"
	}
	return "auto"
}

// MarshalText encodes the mode as "auto" or "manual".
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText decodes "auto" or "manual".
func (m *Mode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "auto":
		*m = Auto
	case "manual":
		*m = Manual
	default:
		return fmt.Errorf("%w: mode %q: want auto or manual", ErrInput, b)
	}
	return nil
}

// State is the controller's record of its last step, kept as evidence of why
// the output moved. It encodes to JSON with lower-case keys.
type State struct {
	Time        time.Time     `json:"time"`
	Mode        Mode          `json:"mode"`
	Setpoint    float64       `json:"setpoint"`
	Measurement float64       `json:"measurement"`
	Error       float64       `json:"error"`     // setpoint - measurement, after the deadband
	P           float64       `json:"p"`         // proportional term
	I           float64       `json:"i"`         // integral term
	D           float64       `json:"d"`         // derivative term
	Unlimited   float64       `json:"unlimited"` // P + I + D before limits
	Output      float64       `json:"output"`    // applied output, after the output and rate limits
	Saturated   bool          `json:"saturated"` // the output limits or the rate limit were active
	Interval    time.Duration `json:"interval"`  // time since the previous step
}

// Controller is a discrete PID controller. It is not safe for concurrent use.
type Controller struct {
	cfg     Config
	mode    Mode
	started bool
	last    State
	deriv   float64 // filtered -dy/dt
	manual  float64
}

// New returns a controller in Auto mode; its first Update only initialises
// the derivative and starts from the P term plus an integral of zero.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg}, nil
}

// Config returns the current configuration.
func (c *Controller) Config() Config { return c.cfg }

// State returns the last step.
func (c *Controller) State() State { return c.last }

// Output returns the last applied output.
func (c *Controller) Output() float64 { return c.last.Output }

func (c *Controller) deadband(e float64) float64 { return deadband(e, c.cfg.Deadband) }

// deadband treats errors within db of zero as zero and subtracts db from
// larger ones.
func deadband(e, db float64) float64 {
	switch {
	case e > db:
		return e - db
	case e < -db:
		return e + db
	}
	return 0
}

// Update takes the setpoint and the measurement at time now and returns the
// new output. Timestamps must not go backwards; a repeated timestamp returns
// the last output unchanged. Bad input is refused with an error wrapping
// ErrInput and leaves the state unchanged.
func (c *Controller) Update(now time.Time, setpoint, measurement float64) (float64, error) {
	if !finite(setpoint) || !finite(measurement) {
		return c.last.Output, fmt.Errorf("%w: setpoint %v, measurement %v: want finite numbers", ErrInput, setpoint, measurement)
	}
	var (
		s     State
		deriv float64
	)
	switch {
	case !c.started:
		s, deriv = c.start(now, setpoint, measurement), c.deriv
	case now.Before(c.last.Time):
		return c.last.Output, fmt.Errorf("%w: time %s is before the last update %s", ErrInput, now.Format(time.RFC3339Nano), c.last.Time.Format(time.RFC3339Nano))
	case now.Equal(c.last.Time):
		return c.last.Output, nil
	default:
		s, deriv = c.step(now, setpoint, measurement)
	}
	// Finite input can still overflow (setpoint minus measurement, the
	// measurement's rate over a short interval, a large gain): an infinite
	// term would make every later output NaN.
	if !finite(deriv) || !finite(s.Error) || !finite(s.P) || !finite(s.I) || !finite(s.D) || !finite(s.Unlimited) {
		return c.last.Output, fmt.Errorf("%w: setpoint %v, measurement %v: the P, I or D term overflows", ErrInput, setpoint, measurement)
	}
	c.started, c.last, c.deriv = true, s, deriv
	return c.last.Output, nil
}

// start handles the first sample: no interval yet, so no I or D
// contribution. After SetManual (even if SetAuto followed before this first
// sample: the last output is then still the manual one) the integral makes
// the output continue from the manual output.
func (c *Controller) start(now time.Time, sp, y float64) State {
	e := c.deadband(sp - y)
	s := State{Time: now, Mode: c.mode, Setpoint: sp, Measurement: y, Error: e}
	s.P = c.cfg.Kp * e
	if c.mode == Manual || c.last.Mode == Manual {
		s.I = c.manual - s.P
	}
	s.Unlimited = s.P + s.I
	s.Output = clamp(s.Unlimited, c.cfg.OutMin, c.cfg.OutMax)
	s.Saturated = s.Output != s.Unlimited
	return s
}

// step computes the next state and filtered derivative; Update keeps them.
func (c *Controller) step(now time.Time, sp, y float64) (State, float64) {
	cfg := &c.cfg
	prev := c.last
	interval := now.Sub(prev.Time)
	dt := min(interval, cfg.MaxInterval).Seconds()
	e := c.deadband(sp - y)

	// Derivative on measurement, low-pass filtered: the rate uses the whole
	// interval (the measurement really moved that much), the filter the
	// capped one.
	rate := -(y - prev.Measurement) / interval.Seconds()
	deriv := rate
	if tf := cfg.DerivativeFilter.Seconds(); tf > 0 {
		deriv = c.deriv + dt/(tf+dt)*(rate-c.deriv)
	}

	s := State{Time: now, Mode: c.mode, Setpoint: sp, Measurement: y, Error: e, Interval: interval}
	s.P = cfg.Kp * e
	if cfg.Kd != 0 {
		s.D = cfg.Kd * deriv
	}

	if c.mode == Manual {
		// Track: the integral absorbs whatever makes P+I+D equal the manual
		// output, so switching to Auto starts exactly there.
		s.I = c.manual - s.P - s.D
		s.Unlimited = c.manual
		s.Output = c.manual
		return s, deriv
	}

	integ := prev.I + cfg.Ki*e*dt
	s.Unlimited = s.P + integ + s.D
	out := clamp(s.Unlimited, cfg.OutMin, cfg.OutMax)
	if cfg.RateLimit > 0 {
		step := cfg.RateLimit * dt // a gap in the samples does not bank change
		// The bounds win over the rate limit: after SetConfig narrowed
		// them, a step from the previous output could leave them.
		out = clamp(clamp(out, prev.Output-step, prev.Output+step), cfg.OutMin, cfg.OutMax)
	}
	s.Saturated = out != s.Unlimited
	switch cfg.AntiWindup {
	case BackCalculation:
		if tt := cfg.trackingSeconds(); s.Saturated && tt > 0 {
			integ += math.Min(dt/tt, 1) * (out - s.Unlimited)
		}
	case Conditional:
		// Undo this step's integration if the output is limited and the error
		// pushes further into the limit.
		if s.Saturated && (cfg.Ki*e > 0) == (s.Unlimited > out) {
			integ = prev.I
		}
	}
	s.I = integ
	s.Output = out
	return s, deriv
}

// SetManual switches to Manual mode with the given output, clamped to the
// output limits. While in Manual, Update returns this output and tracks the
// process so that SetAuto is bumpless.
func (c *Controller) SetManual(output float64) error {
	if !finite(output) {
		return fmt.Errorf("%w: manual output %v: want a finite number", ErrInput, output)
	}
	c.mode = Manual
	c.manual = clamp(output, c.cfg.OutMin, c.cfg.OutMax)
	c.last.Mode = Manual
	c.last.I = c.manual - c.last.P - c.last.D
	c.last.Unlimited, c.last.Output = c.manual, c.manual
	return nil
}

// SetAuto returns to automatic control. The integral already holds the
// manual output minus P and D, so the next output continues from it. Before
// the first Update the last step stays a manual one (State().Mode is
// Manual) until that Update, which starts from the manual output.
func (c *Controller) SetAuto() {
	c.mode = Auto
	if c.started {
		c.last.Mode = Auto
	}
}

// Mode returns the current mode.
func (c *Controller) Mode() Mode { return c.mode }

// SetConfig replaces the configuration. If the new one is invalid nothing
// changes. Gain changes are bumpless: the integral absorbs the change of the P
// and D terms at the last step, so the output does not jump. Narrower output
// limits take effect at once: a manual output outside them is clamped, and
// in Auto the next output is inside them whatever RateLimit allows.
func (c *Controller) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	c.manual = clamp(c.manual, cfg.OutMin, cfg.OutMax)
	if c.started {
		// The error under the new deadband, so that a deadband change
		// does not move the next output either.
		s := &c.last
		s.Error = deadband(s.Setpoint-s.Measurement, cfg.Deadband)
		p := cfg.Kp * s.Error
		d := 0.0
		if cfg.Kd != 0 {
			d = cfg.Kd * c.deriv
		}
		s.I += (s.P - p) + (s.D - d)
		s.P, s.D = p, d
		s.Unlimited = s.P + s.I + s.D
	}
	if c.mode == Manual {
		// Before the first Update too: the output SetManual reported.
		s := &c.last
		s.I = c.manual - s.P - s.D
		s.Unlimited, s.Output = c.manual, c.manual
	}
	c.cfg = cfg
	return nil
}

// Reset forgets all state; the next Update starts afresh. The mode is kept,
// and in Manual the output stays the manual one.
func (c *Controller) Reset() {
	c.started = false
	c.deriv = 0
	c.last = State{Mode: c.mode}
	if c.mode == Manual {
		c.last.I, c.last.Unlimited, c.last.Output = c.manual, c.manual, c.manual
	}
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }
