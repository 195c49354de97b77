package pid

import (
	"fmt"
	"math"
	"time"
)

// AntiWindup selects how the integral is kept from winding up while the
// output is limited.
type AntiWindup int

const (
	// BackCalculation feeds the difference between the applied and the
	// unlimited output back into the integral with time constant TrackingTime.
	BackCalculation AntiWindup = iota
	// Conditional stops integrating while the output is limited and the error
	// would push it further into the limit.
	Conditional
	// None integrates unconditionally; only for comparison in tests.
	None
)

func (a AntiWindup) String() string {
	switch a {
	case BackCalculation:
		return "back-calculation"
	case Conditional:
		return "conditional"
	case None:
		return "none"
	}
	return fmt.Sprintf("AntiWindup(%d)", int(a))
}

// Config holds the controller's gains and limits. Times are in seconds of the
// timestamps passed to Update.
type Config struct {
	// Kp, Ki and Kd are the proportional, integral (per second) and derivative
	// (seconds) gains of the parallel form u = Kp*e + Ki*∫e dt - Kd*dy/dt.
	// The error is setpoint minus measurement; use negative gains for a
	// reverse-acting loop, where more output lowers the measurement.
	Kp, Ki, Kd float64
	// DerivativeFilter is the time constant of the low-pass filter on the
	// derivative; 0 means no filtering.
	DerivativeFilter time.Duration
	// OutMin and OutMax bound the output.
	OutMin, OutMax float64
	// RateLimit is the largest output change per second; 0 means unlimited.
	// Seconds are counted up to MaxInterval per step: after a long gap the
	// output moves at most RateLimit x MaxInterval.
	RateLimit float64
	// Deadband is the error magnitude treated as zero.
	Deadband float64
	// AntiWindup selects the windup protection; TrackingTime is the
	// back-calculation time constant (default: sqrt(Ti*Td), or Ti when there is
	// no derivative term, as Åström and Hägglund suggest).
	AntiWindup   AntiWindup
	TrackingTime time.Duration
	// MaxInterval caps the time step used for integration, filtering and
	// the rate limit, so a long gap between ticks (a stalled scrape, say)
	// does not dump a large integral step or a large output change. Default
	// 1 minute.
	MaxInterval time.Duration
}

// DefaultConfig returns a conservative PI configuration with output in
// [0, 1]; set the gains and limits for the loop at hand.
func DefaultConfig() Config {
	return Config{
		Kp: 0.5, Ki: 0.1,
		OutMin: 0, OutMax: 1,
		DerivativeFilter: 5 * time.Second,
		AntiWindup:       BackCalculation,
		MaxInterval:      time.Minute,
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case !finite(c.Kp):
		return fmt.Errorf("%w: Kp %v: want a finite number", ErrConfig, c.Kp)
	case !finite(c.Ki):
		return fmt.Errorf("%w: Ki %v: want a finite number", ErrConfig, c.Ki)
	case !finite(c.Kd):
		return fmt.Errorf("%w: Kd %v: want a finite number", ErrConfig, c.Kd)
	case c.Kp == 0 && c.Ki == 0 && c.Kd == 0:
		return fmt.Errorf("%w: Kp, Ki, Kd: all zero, the controller would do nothing", ErrConfig)
	case c.Ki != 0 && c.Kp != 0 && (c.Ki > 0) != (c.Kp > 0):
		return fmt.Errorf("%w: Ki %v: sign differs from Kp %v", ErrConfig, c.Ki, c.Kp)
	case c.DerivativeFilter < 0:
		return fmt.Errorf("%w: DerivativeFilter %v: want >= 0", ErrConfig, c.DerivativeFilter)
	case !finite(c.OutMin) || !finite(c.OutMax) || !(c.OutMin < c.OutMax):
		return fmt.Errorf("%w: OutMin %v, OutMax %v: want finite OutMin < OutMax", ErrConfig, c.OutMin, c.OutMax)
	case !finite(c.RateLimit) || c.RateLimit < 0:
		return fmt.Errorf("%w: RateLimit %v: want a finite number >= 0", ErrConfig, c.RateLimit)
	case !finite(c.Deadband) || c.Deadband < 0:
		return fmt.Errorf("%w: Deadband %v: want a finite number >= 0", ErrConfig, c.Deadband)
	case c.AntiWindup < BackCalculation || c.AntiWindup > None:
		return fmt.Errorf("%w: AntiWindup %d: unknown mode", ErrConfig, int(c.AntiWindup))
	case c.TrackingTime < 0:
		return fmt.Errorf("%w: TrackingTime %v: want >= 0 (0 picks the default)", ErrConfig, c.TrackingTime)
	case c.MaxInterval <= 0:
		return fmt.Errorf("%w: MaxInterval %v: want > 0", ErrConfig, c.MaxInterval)
	}
	return nil
}

// trackingSeconds is the back-calculation time constant in seconds.
func (c Config) trackingSeconds() float64 {
	if c.TrackingTime > 0 {
		return c.TrackingTime.Seconds()
	}
	if c.Ki == 0 {
		return 0
	}
	ti := c.Kp / c.Ki
	if c.Kp == 0 {
		ti = 1 / math.Abs(c.Ki)
	}
	ti = math.Abs(ti)
	if c.Kd != 0 && c.Kp != 0 {
		td := math.Abs(c.Kd / c.Kp)
		return math.Sqrt(ti * td)
	}
	return ti
}
