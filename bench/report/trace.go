package report

import (
	"fmt"

	"governor.dev/governor/sdk/limit"
)

// LimitStater is a limiter that exposes its adaptive limit's state after
// its last decided window (Governor's adapters, live and simulated).
type LimitStater interface {
	LimitState() (limit.Snapshot, bool)
}

// LimitState is the BENCH_TRACE view of x's adaptive limit, the same in both
// modes: the no-load RTT estimate, the last window's average RTT, the learned
// limit, whether a probe runs, and the probes, stall cuts and windows so far.
// Empty when x is not a LimitStater or has no state yet.
func LimitState(x any) string {
	in, ok := x.(LimitStater)
	if !ok {
		return ""
	}
	s, ok := in.LimitState()
	if !ok {
		return ""
	}
	return fmt.Sprintf(" noload=%.1fms window_rtt=%.1fms learned=%d probing=%t probes=%d stalls=%d windows=%d",
		s.NoLoadRTT.Seconds()*1e3, s.SampleRTT.Seconds()*1e3, s.Learned, s.Probing, s.Probes, s.Stalls, s.Windows)
}
