package limit

import (
	"fmt"
	"math"
	"time"
)

// Option adjusts a limiter built by New.
type Option func(*options) error

type options struct {
	initial    int
	window     int64
	minSamples int
	seed       uint64
	seeded     bool
	signal     func() bool
	hold       int64
	shards     int
	noLoad     time.Duration
	maxTP      float64
}

func defaultOptions() options {
	return options{
		window:     int64(DefaultWindow),
		minSamples: DefaultMinSamples,
		hold:       int64(time.Second),
	}
}

// WithInitialLimit starts the limiter at n instead of cfg.Initial, for
// example to carry a learned limit across a rule change. n is clamped into
// [Min, Max]; it must be at least 1.
func WithInitialLimit(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: initial limit must be at least 1, got %d", ErrInvalidOption, n)
		}
		o.initial = n
		return nil
	}
}

// WithSnapshot starts the limiter from another limiter's learned state
// (Inspector.Snapshot): its learned limit (as WithInitialLimit), its no-load
// RTT and, for Little's law, its maximum throughput. Carrying the no-load RTT
// across a rule change matters: re-learning it on a loaded service would
// start from an inflated value. A zero Snapshot changes nothing; a negative
// field, or a MaxThroughput that is not a finite number, is an error naming
// the field.
func WithSnapshot(s Snapshot) Option {
	return func(o *options) error {
		switch {
		case s.Learned < 0:
			return fmt.Errorf("%w: snapshot Learned must not be negative, got %d", ErrInvalidOption, s.Learned)
		case s.NoLoadRTT < 0:
			return fmt.Errorf("%w: snapshot NoLoadRTT must not be negative, got %s", ErrInvalidOption, s.NoLoadRTT)
		case !(s.MaxThroughput >= 0 && s.MaxThroughput <= math.MaxFloat64):
			// An infinite throughput turns NaN at the first window that
			// uses the limit, and Little's law stops moving.
			return fmt.Errorf("%w: snapshot MaxThroughput must be finite and not negative, got %v", ErrInvalidOption, s.MaxThroughput)
		}
		if s.Learned > 0 {
			o.initial = s.Learned
		}
		o.noLoad, o.maxTP = s.NoLoadRTT, s.MaxThroughput
		return nil
	}
}

// WithWindow sets the length of a sampling window (default 100 ms, between
// 1 ms and 10 s).
func WithWindow(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond || d > 10*time.Second {
			return fmt.Errorf("%w: window must be between 1ms and 10s, got %s", ErrInvalidOption, d)
		}
		o.window = int64(d)
		return nil
	}
}

// WithMinSamples sets how many samples a window needs before it may change
// the limit (default 10, between 1 and 100000).
func WithMinSamples(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 100000 {
			return fmt.Errorf("%w: min samples must be between 1 and 100000, got %d", ErrInvalidOption, n)
		}
		o.minSamples = n
		return nil
	}
}

// WithSeed seeds the jitter of the probe schedule. By default the seed is
// the clock reading when the first window starts, which differs between
// instances (so they do not all probe at once) and repeats in a simulation
// on a fake clock.
func WithSeed(seed uint64) Option {
	return func(o *options) error {
		o.seed, o.seeded = seed, true
		return nil
	}
}

// WithOverloadSignal engages Little's law while f reports true (and for the
// hold time after). f is called once per window, never on the hot path; it
// replaces the default queueing signal. CPUSignal.Overloaded fits here.
// Ignored by the other algorithms.
func WithOverloadSignal(f func() bool) Option {
	return func(o *options) error {
		if f == nil {
			return fmt.Errorf("%w: overload signal must not be nil", ErrInvalidOption)
		}
		o.signal = f
		return nil
	}
}

// WithHold sets how long Little's law stays engaged after the overload signal
// was last on (default 1 s, between 0 and 1 min).
func WithHold(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 || d > time.Minute {
			return fmt.Errorf("%w: hold must be between 0 and 1m, got %s", ErrInvalidOption, d)
		}
		o.hold = int64(d)
		return nil
	}
}

// WithShards sets the number of sample shards (rounded up to a power of two,
// between 1 and 1024). The default is 8 x GOMAXPROCS, at least 16.
func WithShards(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("%w: shards must be between 1 and 1024, got %d", ErrInvalidOption, n)
		}
		o.shards = n
		return nil
	}
}
