package limit

import (
	"fmt"
	"math"
	"sync"
	"time"

	"governor.dev/governor/sdk/clock"
)

// UtilizationSource reports a utilization between 0 and 1 since its previous
// call. CPUSampler is one.
type UtilizationSource interface {
	Utilization() (float64, error)
}

// CPUSignalOptions tune a CPUSignal.
type CPUSignalOptions struct {
	// Engage turns the signal on when the smoothed utilization reaches it;
	// default 0.8.
	Engage float64
	// Release turns it off again below this (hysteresis); default 0.7, must
	// not exceed Engage.
	Release float64
	// Alpha is the weight of a new sample in the moving average; default 0.3.
	Alpha float64
	// Every is the least time between two samples; calls in between reuse
	// the last decision. Default 250ms.
	Every time.Duration
}

// DefaultCPUSignalOptions returns the defaults.
func DefaultCPUSignalOptions() CPUSignalOptions {
	return CPUSignalOptions{Engage: 0.8, Release: 0.7, Alpha: 0.3, Every: 250 * time.Millisecond}
}

// CPUSignal turns a jittery utilization into a steady overload signal: an
// exponentially weighted moving average with hysteresis (on at Engage, off
// below Release), sampled at most every Every. Its Overloaded method is meant
// for WithOverloadSignal. It is safe for concurrent use.
type CPUSignal struct {
	src UtilizationSource
	clk clock.Clock
	o   CPUSignalOptions

	mu      sync.Mutex
	sampled bool
	last    int64
	ema     float64
	on      bool
	err     error
}

// NewCPUSignal builds a signal over src, timed by clk. Zero fields of o take
// their defaults.
func NewCPUSignal(src UtilizationSource, clk clock.Clock, o CPUSignalOptions) (*CPUSignal, error) {
	if src == nil || clk == nil {
		return nil, fmt.Errorf("%w: NewCPUSignal needs a source and a clock", ErrInvalidOption)
	}
	d := DefaultCPUSignalOptions()
	if o.Engage == 0 {
		o.Engage = d.Engage
	}
	if o.Release == 0 {
		o.Release = min(d.Release, o.Engage)
	}
	if o.Alpha == 0 {
		o.Alpha = d.Alpha
	}
	if o.Every == 0 {
		o.Every = d.Every
	}
	switch {
	case !(o.Engage > 0 && o.Engage <= 1):
		return nil, fmt.Errorf("%w: cpu signal engage must be in (0, 1], got %v", ErrInvalidOption, o.Engage)
	case !(o.Release > 0 && o.Release <= o.Engage):
		return nil, fmt.Errorf("%w: cpu signal release must be in (0, engage %v], got %v", ErrInvalidOption, o.Engage, o.Release)
	case !(o.Alpha > 0 && o.Alpha <= 1):
		return nil, fmt.Errorf("%w: cpu signal alpha must be in (0, 1], got %v", ErrInvalidOption, o.Alpha)
	case o.Every < 0:
		return nil, fmt.Errorf("%w: cpu signal every must not be negative, got %s", ErrInvalidOption, o.Every)
	}
	return &CPUSignal{src: src, clk: clk, o: o}, nil
}

// Overloaded samples the source if Every has passed and reports whether the
// smoothed utilization is over the threshold. A failing source keeps the last
// decision (see Err).
func (s *CPUSignal) Overloaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Nanotime()
	if s.sampled && now-s.last < int64(s.o.Every) {
		return s.on
	}
	u, err := s.src.Utilization()
	s.err = err
	if err != nil || math.IsNaN(u) {
		return s.on
	}
	u = min(max(u, 0), 1)
	if s.sampled {
		s.ema += s.o.Alpha * (u - s.ema)
	} else {
		s.ema = u
	}
	s.sampled, s.last = true, now
	switch {
	case !s.on && s.ema >= s.o.Engage:
		s.on = true
	case s.on && s.ema < s.o.Release:
		s.on = false
	}
	return s.on
}

// Utilization returns the smoothed utilization.
func (s *CPUSignal) Utilization() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ema
}

// Err returns the last error of the source, or nil.
func (s *CPUSignal) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
