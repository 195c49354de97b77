// Package pid is a discrete PID controller for slow control loops such as
// adjusting a concurrency limit or a rate ceiling from a measured signal.
//
// The controller is written the way control engineers expect:
//
//   - the derivative acts on the measurement, not the error, so setpoint steps
//     do not kick the output, and it passes a first-order low-pass filter;
//   - the integral is stored as its contribution to the output, and windup is
//     prevented by back-calculation (the default) or conditional integration;
//   - the output is clamped to [OutMin, OutMax] and its change per second is
//     limited by RateLimit (the bounds win: after SetConfig narrows them, the
//     next output is inside them);
//   - errors inside the Deadband are treated as zero (continuously: the
//     deadband is subtracted from larger errors);
//   - switching from manual to automatic and changing gains are bumpless: the
//     integral is reset so the output continues from where it was;
//   - the sample time comes from the timestamps the caller passes, so ticks may
//     be irregular; the controller never reads a clock.
//
// State returns the P, I and D terms of the last step so callers can record
// why the output moved. MarshalBinary and RestoreController carry the whole
// controller (configuration, mode, integral, filtered derivative, last step)
// to another process, which then continues exactly where it was.
package pid

import "errors"

// Sentinel errors; returned errors wrap one of them.
var (
	// ErrConfig reports an invalid Config field.
	ErrConfig = errors.New("pid: invalid config")
	// ErrInput reports an unusable Update argument (NaN, infinite, so large
	// that a term overflows, time going backwards).
	ErrInput = errors.New("pid: invalid input")
)
