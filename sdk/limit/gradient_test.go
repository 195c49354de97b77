package limit

import (
	"math"
	"testing"
	"time"

	"governor.dev/governor/sdk/rules"
)

// win describes one 100 ms window of identical samples.
type win struct {
	rtt      time.Duration
	inflight int
}

var (
	quiet = win{10 * time.Millisecond, 2}   // the no-load RTT, far below the limit
	mild  = win{20 * time.Millisecond, 2}   // above the tolerance, but without load
	busy  = win{10 * time.Millisecond, 18}  // the limit in use, no queueing
	crowd = win{20 * time.Millisecond, 18}  // the limit in use, 2x the no-load RTT
	stall = win{100 * time.Millisecond, 18} // 10x: a pause, or a step if it lasts
	tail  = win{60 * time.Millisecond, 18}  // the backlog a pause leaves, draining
)

// feed plays windows of 20 samples each into c, the last sample of each
// window at its end so that it closes the window, and returns the limit
// after every window.
func feed(c *core, from int64, ws ...win) []int {
	const n, length = 20, int64(100 * time.Millisecond)
	limits := make([]int, 0, len(ws))
	for k, w := range ws {
		start := from + int64(k)*length
		for i := range int64(n) {
			c.Observe(start+(i+1)*length/n, int64(w.rtt), w.inflight, false)
		}
		limits = append(limits, c.Limit())
	}
	return limits
}

func repeat(w win, n int) []win {
	ws := make([]win, n)
	for i := range ws {
		ws[i] = w
	}
	return ws
}

// The gradient's answer to slow windows, by the windows before them: one
// slow window never cuts (a pause), nor does one that follows a window
// without load (at low load the mean RTT is above the tolerance often, and
// that must not confirm a pause); a second window several times the no-load
// RTT halves the limit at once (a latency step), while moderate congestion
// moves it by bounded, smoothed steps.
func TestGradientSlowWindows(t *testing.T) {
	warm := repeat(quiet, 5)
	tests := []struct {
		name   string
		ws     []win
		lo, hi int // the limit after the last window
	}{
		{"a lone pause does not cut", append(append(warm, stall), quiet, quiet), 20, 20},
		{"a pause after a slow window without load does not cut", append(append(warm, mild, stall), quiet, quiet), 20, 20},
		{"a 10x step halves the limit on its second window", append(warm, stall, stall), 10, 10},
		{"then waits a round trip before cutting again", append(warm, stall, stall, stall), 10, 10},
		{"and cuts again after it", append(warm, stall, stall, stall, stall), 5, 5},
		{"the draining tail of a pause cuts by a smoothed step only", append(append(warm, stall), tail), 11, 19},
		{"2x congestion cuts by a smoothed step", append(warm, crowd, crowd), 11, 19},
		{"no congestion keeps the limit", append(warm, busy, busy), 20, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCore(t, rules.Concurrency{}, WithSeed(1))
			limits := feed(c, 0, tt.ws...)
			if got := limits[len(limits)-1]; got < tt.lo || got > tt.hi {
				t.Fatalf("limit after the windows %v = %d, want within [%d, %d]", limits, got, tt.lo, tt.hi)
			}
			if nl := c.Snapshot().NoLoadRTT; nl != quiet.rtt {
				t.Fatalf("no-load RTT %v, want %v", nl, quiet.rtt)
			}
		})
	}
}

// A lone slow window (a pause) does not start a due probe: the probe would
// take the pause for the no-load RTT.
func TestPauseDoesNotStartAProbe(t *testing.T) {
	c := newTestCore(t, rules.Concurrency{}, WithSeed(1))
	// Four seconds without load: the first probe (due about 3 s in) waits
	// for a window that uses the limit.
	limits := feed(c, 0, repeat(quiet, 40)...)
	if s := c.Snapshot(); s.Probing || s.Probes != 0 || limits[len(limits)-1] != 20 {
		t.Fatalf("probing %v after %d probes on idle windows, limit %d", s.Probing, s.Probes, limits[len(limits)-1])
	}
	feed(c, 4*int64(time.Second), stall)
	if s := c.Snapshot(); s.Probing || c.Limit() != 20 {
		t.Fatalf("a pause window started a probe (probing %v, limit %d)", s.Probing, c.Limit())
	}
	// The next window that uses the limit without a pause starts it.
	feed(c, 4*int64(time.Second)+int64(100*time.Millisecond), busy)
	if s := c.Snapshot(); !s.Probing {
		t.Fatalf("the due probe did not start on a busy window (limit %d)", c.Limit())
	}
}

// At Min the limit cannot halve any more, so an episode of congestion that a
// limit held at Min does not relieve is judged like a halving: the no-load
// RTT is stale (the server got slower), and a probe adopts the slower one
// instead of leaving the limit at Min until the next probe interval.
func TestCongestionAtMinReprobes(t *testing.T) {
	c := newTestCore(t, rules.Concurrency{Initial: 4, Min: 4}, WithSeed(1))
	feed(c, 0, repeat(win{10 * time.Millisecond, 1}, 5)...)
	if nl := c.Snapshot().NoLoadRTT; nl != 10*time.Millisecond {
		t.Fatalf("no-load RTT %v, want 10ms", nl)
	}
	slow := win{30 * time.Millisecond, 4}
	limits := feed(c, 5*int64(100*time.Millisecond), repeat(slow, 10)...)
	if nl := c.Snapshot().NoLoadRTT; nl < 25*time.Millisecond {
		t.Fatalf("no-load RTT still %v after 10 windows at Min 3x slower (limits %v)", nl, limits)
	}
}

// A service at 60% of a slow database's 32 connections: ~10 requests in
// flight on average at a 30 ms RTT, and in every window one burst that
// reaches the busy share of the limit. The limit has room for those bursts:
// it must not grow on them to where a latency step would let far more
// requests in than the database serves (it grew 20 -> 90 in five windows before, one burst
// per window being enough). Where the average in flight is near the limit,
// the same windows still grow it.
func TestBurstsDoNotGrowAnIdleLimit(t *testing.T) {
	const length = int64(100 * time.Millisecond)
	run := func(avg float64) []int {
		c := newTestCore(t, rules.Concurrency{}, WithSeed(1))
		rtt := int64(30 * time.Millisecond)
		var limits []int
		for k := range int64(30) {
			// Little's law: avg in flight at 30 ms takes avg/0.03 answers per second.
			n := int64(avg * float64(length) / float64(rtt))
			burst := int(math.Ceil(float64(c.Limit()) * busyShare))
			for i := range n {
				inflight := int(avg)
				if i == n/2 {
					inflight = burst
				}
				c.Observe(k*length+(i+1)*length/n, rtt, inflight, false)
			}
			limits = append(limits, c.Limit())
		}
		return limits
	}
	if limits := run(10); limits[len(limits)-1] > 28 {
		t.Errorf("10 in flight on average with one burst per window: limits %v, want to stay at 28 or below", limits)
	}
	if limits := run(18); limits[len(limits)-1] <= 20 {
		t.Errorf("18 in flight on average under a limit of 20: limits %v, want it grown", limits)
	}
}
