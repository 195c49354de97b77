package limit

import (
	"errors"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Limiter is an adaptive concurrency limit.
type Limiter interface {
	// Limit returns the current limit (>= 1). Cheap: an atomic load.
	Limit() int
	// Observe records one finished request: now and rtt in nanoseconds (now
	// from the caller's clock.Clock.Nanotime, so the limiter never reads the
	// clock itself on the hot path), inflight = requests in flight when this
	// one was admitted (including itself), dropped = it failed because of
	// overload (timeout, rejected downstream). Lock-free and allocation-free.
	Observe(now, rtt int64, inflight int, dropped bool)
}

// HintedObserver is implemented by every limiter of this package: Observe
// with the caller's shard choice, so that a caller that already sharded the
// request (the admission core) does not pay for a second random pick.
// ObserveShard(hint, ...) records exactly what Observe(...) records.
type HintedObserver interface {
	ObserveShard(hint uint32, now, rtt int64, inflight int, dropped bool)
}

// RefusalObserver is implemented by every limiter of this package: the
// admission core calls Refused when it refuses a request because the limit
// (its class's share of it) is full. It is how the limiter learns of a stall,
// which Observe alone cannot show: when a dependency becomes many times
// slower, no request finishes for a while, so no sample arrives, while the
// limit fills and refuses. If no request has finished for the stall time
// (the longest of a window, 4 x the no-load RTT and the last window's
// average RTT) past the end of the current window and past the first
// refusal after it, Refused halves an enforced limit at once; once per
// stall, that is until a request finishes again. (Before that refusal
// nothing need have been in flight: a burst after a quiet spell is no
// stall.) During a probe the stall must also last 4 x the probe's fastest
// window; it then abandons the probe and cuts. A GC-like pause shorter than
// a window never counts. Lock-free and allocation-free: an atomic load unless a window is
// overdue.
type RefusalObserver interface {
	Refused(now int64)
}

// Inspector is implemented by every limiter of this package: a consistent
// enough view of its state for metrics, tests and the laboratory.
type Inspector interface {
	Snapshot() Snapshot
}

// Snapshot is the state of a limiter after its last decided window.
type Snapshot struct {
	Limit     int           // the limit Limit returns
	Learned   int           // the learned limit (differs from Limit while Little's law is not engaged)
	NoLoadRTT time.Duration // the no-load round-trip time estimate; 0 before the first window
	SampleRTT time.Duration // the last decided window's average round-trip time
	Probing   bool          // a no-load probe is running
	Engaged   bool          // the limit is enforced (always true except for Little's law)
	Windows   int64         // windows that led to a decision
	Probes    int64         // probes completed
	Stalls    int64         // stall cuts (see RefusalObserver)
	// MaxThroughput is Little's law's largest recent throughput, requests/s.
	MaxThroughput float64
}

// Errors. Every error of this package wraps one of them.
var (
	// ErrInvalidConfig: the rules.Concurrency given to New is invalid.
	ErrInvalidConfig = errors.New("limit: invalid config")
	// ErrInvalidOption: an Option was given an invalid value.
	ErrInvalidOption = errors.New("limit: invalid option")
)

// New builds the algorithm named by cfg.Algorithm ("gradient" default,
// "little", "fixed"), with the defaults documented in rules.Concurrency, or an
// error wrapping ErrInvalidConfig or ErrInvalidOption that names the bad field.
// clk only starts the first window (nil: the first Observe starts it); after
// that, time comes from the now passed to Observe, which must come from the
// same clock.
func New(cfg rules.Concurrency, clk clock.Clock, opts ...Option) (Limiter, error) {
	p, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.initial > 0 {
		p.initial = min(max(o.initial, p.min), p.max)
	}
	switch cfg.Algorithm {
	case rules.AlgorithmFixed:
		return newFixed(p.max), nil
	case rules.AlgorithmLittle:
		return newLittle(p, o, clk), nil
	default:
		return newGradient(p, o, clk), nil
	}
}
