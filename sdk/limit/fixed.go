package limit

// Fixed is a static limit, the baseline the adaptive limiters are compared
// with. Observe does nothing.
type Fixed struct{ n int }

var (
	_ Limiter         = (*Fixed)(nil)
	_ Inspector       = (*Fixed)(nil)
	_ HintedObserver  = (*Fixed)(nil)
	_ RefusalObserver = (*Fixed)(nil)
)

func newFixed(n int) *Fixed { return &Fixed{n: max(n, 1)} }

// Limit returns the fixed limit.
func (f *Fixed) Limit() int { return f.n }

// Observe does nothing.
func (f *Fixed) Observe(now, rtt int64, inflight int, dropped bool) {}

// Snapshot returns the fixed limit.
func (f *Fixed) Snapshot() Snapshot {
	return Snapshot{Limit: f.n, Learned: f.n, Engaged: true}
}

// ObserveShard does nothing.
func (f *Fixed) ObserveShard(hint uint32, now, rtt int64, inflight int, dropped bool) {}

// Refused does nothing: the limit is fixed.
func (*Fixed) Refused(int64) {}
