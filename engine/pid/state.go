package pid

import (
	"errors"
	"fmt"
	"math"
	"time"

	"governor.dev/governor/internal/statecodec"
)

// ErrState reports a controller state that cannot be restored: truncated
// or corrupt bytes, another format version, an invalid configuration or
// mode. Returned errors wrap it and say what is wrong.
var ErrState = errors.New("pid: cannot restore state")

// StateVersion is the format version of the bytes MarshalBinary writes.
const StateVersion = 1

// MarshalBinary encodes the whole controller: its configuration, mode,
// manual output, filtered derivative and last step, so that
// RestoreController continues exactly where this one is (the next Update
// of both returns the same output, bit for bit). Times keep their instant,
// not their location or monotonic reading.
func (c *Controller) MarshalBinary() ([]byte, error) {
	return c.AppendBinary(make([]byte, 0, 192))
}

// AppendBinary appends what MarshalBinary returns to b.
func (c *Controller) AppendBinary(b []byte) ([]byte, error) {
	if !finite(c.manual) || !finite(c.deriv) {
		return b, fmt.Errorf("pid: state: manual output %v, derivative %v: want finite numbers", c.manual, c.deriv)
	}
	e := statecodec.Enc{B: append(b, StateVersion)}
	cfg := &c.cfg
	e.F(cfg.Kp)
	e.F(cfg.Ki)
	e.F(cfg.Kd)
	e.I(int64(cfg.DerivativeFilter))
	e.F(cfg.OutMin)
	e.F(cfg.OutMax)
	e.F(cfg.RateLimit)
	e.F(cfg.Deadband)
	e.U(uint64(cfg.AntiWindup))
	e.I(int64(cfg.TrackingTime))
	e.I(int64(cfg.MaxInterval))
	e.U(uint64(c.mode))
	e.Bool(c.started)
	e.F(c.manual)
	e.F(c.deriv)
	s := &c.last
	e.Time(s.Time)
	e.U(uint64(s.Mode))
	for _, v := range [...]float64{s.Setpoint, s.Measurement, s.Error, s.P, s.I, s.D, s.Unlimited, s.Output} {
		if !finite(v) {
			return b, fmt.Errorf("pid: state: last step %+v: want finite terms", *s)
		}
		e.F(v)
	}
	e.Bool(s.Saturated)
	e.I(int64(s.Interval))
	return e.B, nil
}

// RestoreController returns the controller MarshalBinary encoded in b. A
// state that cannot be restored is refused with an error wrapping
// ErrState.
func RestoreController(b []byte) (*Controller, error) {
	d := statecodec.Dec{B: b, Sentinel: ErrState}
	if len(b) == 0 {
		d.Fail("empty")
		return nil, d.Err
	}
	if b[0] != StateVersion {
		d.Fail("format version %d, want %d", b[0], StateVersion)
		return nil, d.Err
	}
	d.B = b[1:]
	var cfg Config
	cfg.Kp, cfg.Ki, cfg.Kd = d.F("Kp"), d.F("Ki"), d.F("Kd")
	cfg.DerivativeFilter = time.Duration(d.I("DerivativeFilter"))
	cfg.OutMin, cfg.OutMax = d.F("OutMin"), d.F("OutMax")
	cfg.RateLimit, cfg.Deadband = d.F("RateLimit"), d.F("Deadband")
	cfg.AntiWindup = AntiWindup(min(d.U("AntiWindup"), math.MaxInt32))
	cfg.TrackingTime = time.Duration(d.I("TrackingTime"))
	cfg.MaxInterval = time.Duration(d.I("MaxInterval"))
	c := &Controller{cfg: cfg}
	c.mode = mode(&d, "mode")
	c.started = d.Bool("started")
	c.manual, c.deriv = d.F("manual output"), d.F("derivative")
	s := &c.last
	s.Time = d.Time("last update")
	s.Mode = mode(&d, "last step mode")
	s.Setpoint, s.Measurement, s.Error = d.F("setpoint"), d.F("measurement"), d.F("error")
	s.P, s.I, s.D = d.F("P"), d.F("I"), d.F("D")
	s.Unlimited, s.Output = d.F("unlimited output"), d.F("output")
	s.Saturated = d.Bool("saturated")
	s.Interval = time.Duration(d.I("interval"))
	if err := d.End(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	if s.Interval < 0 {
		return nil, fmt.Errorf("%w: interval %s: want >= 0", ErrState, s.Interval)
	}
	// SetManual and SetConfig keep the manual output within the limits;
	// outside them it is corrupt, and Update would return it.
	if (c.mode == Manual || s.Mode == Manual) && (c.manual < cfg.OutMin || c.manual > cfg.OutMax) {
		return nil, fmt.Errorf("%w: manual output %v: want within [OutMin %v, OutMax %v]", ErrState, c.manual, cfg.OutMin, cfg.OutMax)
	}
	return c, nil
}

func mode(d *statecodec.Dec, what string) Mode {
	m := d.U(what)
	if d.Err == nil && m > uint64(Manual) {
		d.Fail("%s %d: want 0 (auto) or 1 (manual)", what, m)
		return Auto
	}
	return Mode(m)
}
