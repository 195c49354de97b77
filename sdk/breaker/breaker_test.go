package breaker

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

type rig struct {
	t       *testing.T
	clk     *clock.Fake
	b       *Breaker
	changes []string
}

func newRig(t *testing.T, c rules.Breaker) *rig {
	t.Helper()
	r := &rig{t: t, clk: clock.NewFake(time.Time{})}
	g, err := New(c, Options{OnStateChange: func(from, to State) {
		r.changes = append(r.changes, from.String()+">"+to.String())
		// Hooks run outside the lock.
		if !r.b.mu.TryLock() {
			t.Error("state-change hook ran under the breaker's lock")
			return
		}
		r.b.mu.Unlock()
	}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.b = g.(*Breaker)
	return r
}

// call runs one call that fails or not, and reports whether it was admitted.
func (r *rig) call(failed bool, latency time.Duration) bool {
	now := r.clk.Nanotime()
	tk, err := r.b.Allow(now)
	if err != nil {
		if !errors.Is(err, ErrOpen) {
			r.t.Fatalf("Allow: unexpected error %v", err)
		}
		return false
	}
	r.b.Record(tk, now, latency, failed)
	return true
}

// trip fails ten calls in a row, which opens the breakers of cfg.
func (r *rig) trip() {
	for range 10 {
		r.call(true, 0)
	}
}

// halfOpen trips the breaker and waits out its first open period (1s).
func (r *rig) halfOpen() {
	r.trip()
	r.clk.Advance(time.Second)
}

func (r *rig) wantState(want State) {
	r.t.Helper()
	if got := r.b.State(r.clk.Nanotime()); got != want {
		r.t.Fatalf("state = %v, want %v (changes %v)", got, want, r.changes)
	}
}

func (r *rig) wantChanges(want ...string) {
	r.t.Helper()
	if fmt.Sprint(r.changes) != fmt.Sprint(want) {
		r.t.Fatalf("changes = %v, want %v", r.changes, want)
	}
}

func cfg() rules.Breaker {
	return rules.Breaker{
		Window:         rules.Duration(10 * time.Second),
		MinCalls:       10,
		ErrorRatio:     0.5,
		OpenBase:       rules.Duration(time.Second),
		OpenMax:        rules.Duration(5 * time.Second),
		HalfOpenProbes: 3,
	}
}

func TestOpensOnlyAfterMinCallsAndRatio(t *testing.T) {
	tests := []struct {
		name      string
		successes int
		failures  int
		want      State
	}{
		{"fewer calls than min_calls, all failing", 0, 9, Closed},
		{"min_calls reached, all failing", 0, 10, Open},
		{"ratio just below", 6, 4, Closed},
		{"ratio exactly at the threshold", 5, 5, Open},
		{"many successes dilute failures", 100, 49, Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, cfg())
			for range tt.successes {
				r.call(false, time.Millisecond)
			}
			for range tt.failures {
				r.call(true, time.Millisecond)
			}
			r.wantState(tt.want)
		})
	}
}

func TestOldCallsLeaveTheWindow(t *testing.T) {
	r := newRig(t, cfg())
	for range 9 {
		r.call(true, 0)
	}
	r.clk.Advance(10 * time.Second) // the nine failures expire
	r.call(true, 0)
	r.wantState(Closed)
	for range 9 {
		r.call(true, 0)
	}
	r.wantState(Open)
}

func TestFullCycleClosedOpenHalfOpenClosed(t *testing.T) {
	r := newRig(t, cfg())
	r.trip()
	r.wantState(Open)
	r.wantChanges("closed>open")

	r.clk.Advance(999 * time.Millisecond)
	if r.call(false, 0) {
		t.Fatal("call admitted while open")
	}
	r.clk.Advance(time.Millisecond)
	r.wantState(HalfOpen) // the open period is over

	// Exactly HalfOpenProbes calls are let through, the rest refused.
	now := r.clk.Nanotime()
	var tickets []Ticket
	for range 3 {
		tk, err := r.b.Allow(now)
		if err != nil {
			t.Fatalf("probe refused: %v", err)
		}
		tickets = append(tickets, tk)
	}
	if _, err := r.b.Allow(now); !errors.Is(err, ErrOpen) {
		t.Fatalf("fourth probe: err = %v, want ErrOpen", err)
	}
	r.wantChanges("closed>open", "open>half-open")
	for i, tk := range tickets {
		r.b.Record(tk, now, 0, false)
		if i < 2 {
			r.wantState(HalfOpen)
		}
	}
	r.wantState(Closed)
	r.wantChanges("closed>open", "open>half-open", "half-open>closed")
	// The window was reset on closing: one failure does not reopen.
	r.call(true, 0)
	r.wantState(Closed)
}

func TestBackoffDoublesOnEveryReopenUpToTheCap(t *testing.T) {
	c := cfg()
	c.HalfOpenProbes = 1
	r := newRig(t, c)
	r.trip()
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		r.wantState(Open)
		r.clk.Advance(want - time.Millisecond)
		if r.call(false, 0) {
			t.Fatalf("admitted before the %v open period ended", want)
		}
		r.clk.Advance(time.Millisecond)
		if !r.call(true, 0) { // the first probe fails: reopen
			t.Fatalf("probe refused after the %v open period", want)
		}
	}
	r.wantState(Open)
	r.clk.Advance(5 * time.Second)
	if !r.call(false, 0) {
		t.Fatal("probe refused")
	}
	r.wantState(Closed)
	// Closing does not forget the openings: failing again at once opens
	// for OpenMax (see TestAFlappingEndpointIsOpenedLongerEachTime).
	r.trip()
	r.wantState(Open)
	r.clk.Advance(5*time.Second - time.Millisecond)
	r.wantState(Open)
	r.clk.Advance(time.Millisecond)
	r.wantState(HalfOpen)
}

func TestProbesDecideByErrorRatio(t *testing.T) {
	tests := []struct {
		name    string
		probes  int
		ratio   float64
		results []bool // failed?
		want    State
	}{
		{"one probe fails, ratio 0.5 of 3", 3, 0.5, []bool{false, true, false}, Closed},
		{"two probes fail of 3", 3, 0.5, []bool{true, false, true}, Open},
		{"single probe succeeds", 1, 0.5, []bool{false}, Closed},
		{"single probe fails", 1, 0.5, []bool{true}, Open},
		{"ratio 1 tolerates all but one failure", 4, 1, []bool{true, true, true, false}, Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg()
			c.HalfOpenProbes, c.ErrorRatio = tt.probes, tt.ratio
			r := newRig(t, c)
			r.halfOpen()
			for _, failed := range tt.results {
				if !r.call(failed, 0) {
					t.Fatal("probe refused")
				}
			}
			r.wantState(tt.want)
		})
	}
}

func TestSlowCallRatioOpens(t *testing.T) {
	c := cfg()
	c.SlowCallRatio = 0.6
	c.SlowCall = rules.Duration(100 * time.Millisecond)
	r := newRig(t, c)
	for range 4 {
		r.call(false, 10*time.Millisecond)
	}
	for range 5 {
		r.call(false, 200*time.Millisecond)
	}
	r.wantState(Closed) // 5 of 9: below min calls
	r.call(false, 100*time.Millisecond)
	r.wantState(Open) // 6 of 10 slow
}

func TestSlowCallsIgnoredByDefault(t *testing.T) {
	r := newRig(t, cfg())
	for range 50 {
		r.call(false, time.Hour)
	}
	r.wantState(Closed)
}

func TestStaleTicketsAreIgnored(t *testing.T) {
	c := cfg()
	c.HalfOpenProbes = 1
	r := newRig(t, c)
	now := r.clk.Nanotime()
	early, _ := r.b.Allow(now) // admitted while closed
	r.halfOpen()
	probe, err := r.b.Allow(r.clk.Nanotime())
	if err != nil {
		t.Fatal(err)
	}
	r.b.Record(early, r.clk.Nanotime(), 0, true) // must not count as a probe failure
	r.wantState(HalfOpen)
	r.b.Record(probe, r.clk.Nanotime(), 0, true)
	r.wantState(Open)
	r.b.Record(0, r.clk.Nanotime(), 0, true) // the zero ticket is ignored
}

// Probes that report nothing for a whole window (a dependency that hangs)
// count as failed: the round ends open, with the next, longer, open period,
// and the round after it decides as usual.
func TestUnreportedProbesDoNotWedgeHalfOpen(t *testing.T) {
	r := newRig(t, cfg())
	r.halfOpen()
	for range 3 {
		if _, err := r.b.Allow(r.clk.Nanotime()); err != nil {
			t.Fatal(err)
		}
	}
	r.clk.Advance(9 * time.Second)
	if r.call(false, 0) {
		t.Fatal("admitted before the probe window passed")
	}
	r.clk.Advance(time.Second)
	if r.call(false, 0) {
		t.Fatal("admitted once the probe window passed without reports: want open")
	}
	r.wantState(Open)
	if d := time.Duration(r.b.OpenUntil() - r.clk.Nanotime()); d != 2*time.Second {
		t.Fatalf("open for %v after the round expired, want the backed-off 2s", d)
	}
	r.clk.Advance(2 * time.Second)
	for range 3 {
		if !r.call(false, 0) {
			t.Fatal("fresh probe round refused")
		}
	}
	r.wantState(Closed)
	r.wantChanges("closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed")
}

// A dependency that hangs until a 30s call timeout, with the default 10s
// window: each half-open round used to be replaced by a fresh one before its
// probes came back, their failures were dropped, and the breaker stayed
// half-open for the whole outage, sending new probes every window and firing
// no hook. The round's probes still out once its last probe has been out for
// a window count as failed, so the breaker reopens with back-off.
func TestHangingProbesReopenTheBreaker(t *testing.T) {
	g, changes, now := openedAtOneSecond(t)
	sec := int64(time.Second)
	var out []probe
	halfOpen := 0
	for now < 300*sec { // five minutes of outage
		now += sec
		for _, p := range out { // the calls that time out now fail
			if now-p.at == 30*sec {
				g.Record(p.tk, now, 30*time.Second, true)
			}
		}
		if tk, err := g.Allow(now); err == nil {
			out = append(out, probe{tk, now})
		}
		if g.State(now) == HalfOpen {
			halfOpen++
		}
	}
	// Open 5, 10, 20, 40, 60, 60 s, each followed by a round that ends a
	// window (10 s) after its last probe went out: 12 s, the probes going
	// out a second apart.
	if len(out) > 6*3 || halfOpen > 6*12 {
		t.Fatalf("%d probes sent, %d s of 300 half-open: want at most 18 and 72", len(out), halfOpen)
	}
	if d := g.OpenUntil() - now; g.State(now) == Open && d > 60*sec {
		t.Fatalf("open for %v more, want at most the 60s cap", time.Duration(d))
	}
	if len(*changes) < 10 || (*changes)[1] != "open>half-open" || (*changes)[2] != "half-open>open" {
		t.Fatalf("state changes %v, want open and half-open in turn", *changes)
	}
}

// A healthy dependency (300ms latency) with sparse traffic: the round's last
// two probes go out just before a window has passed since the round began,
// and are still in flight when the next call arrives. They have been out for
// 100 and 200 ms, not a window: the breaker waits for them and closes.
func TestSparseProbesOutForLessThanAWindowAreNotHung(t *testing.T) {
	r := newRig(t, cfg())
	r.halfOpen()
	if !r.call(false, 300*time.Millisecond) { // probe 1 at T, ok
		t.Fatal("probe 1 refused")
	}
	r.clk.Advance(9800 * time.Millisecond)
	t2, err := r.b.Allow(r.clk.Nanotime()) // probe 2 at T+9.8s
	if err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(100 * time.Millisecond)
	t3, err := r.b.Allow(r.clk.Nanotime()) // probe 3 at T+9.9s
	if err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(100 * time.Millisecond) // T+10s: a call, refused while the probes are out
	if r.call(false, 0) {
		t.Fatal("admitted while the round's probes are out")
	}
	r.wantState(HalfOpen)
	r.clk.Advance(100 * time.Millisecond)
	r.b.Record(t2, r.clk.Nanotime(), 300*time.Millisecond, false)
	r.clk.Advance(100 * time.Millisecond)
	r.b.Record(t3, r.clk.Nanotime(), 300*time.Millisecond, false)
	r.wantState(Closed)
	r.wantChanges("closed>open", "open>half-open", "half-open>closed")
}

// The last probe of a round counts as hung once it has been out for a whole
// window, and not before.
func TestAProbeIsHungAfterAWholeWindowOut(t *testing.T) {
	r := newRig(t, cfg())
	r.halfOpen()
	for _, d := range []time.Duration{0, 4 * time.Second, 4 * time.Second} {
		r.clk.Advance(d)
		if _, err := r.b.Allow(r.clk.Nanotime()); err != nil {
			t.Fatal(err)
		}
	}
	// 10s after the round began, 2s after the last probe went out.
	r.clk.Advance(2 * time.Second)
	if r.call(false, 0) {
		t.Fatal("admitted while the round's probes are out")
	}
	r.wantState(HalfOpen)
	r.clk.Advance(8*time.Second - 1)
	if r.call(false, 0) {
		t.Fatal("admitted while the round's probes are out")
	}
	r.wantState(HalfOpen)
	r.clk.Advance(1) // the last probe has been out a whole window
	if r.call(false, 0) {
		t.Fatal("admitted as the round expired")
	}
	r.wantState(Open)
	r.wantChanges("closed>open", "open>half-open", "half-open>open")
}

// A probe of an expired round, counted as failed, that succeeds after all
// ends the open period it caused: the dependency answers again, so the next
// call probes at once. A late failure, or a late success once that open
// period is over, changes nothing.
func TestLateSuccessOfAnExpiredProbeEndsTheOpenPeriod(t *testing.T) {
	r := newRig(t, cfg())
	r.halfOpen()
	var late []Ticket
	for range 3 {
		tk, err := r.b.Allow(r.clk.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		late = append(late, tk)
	}
	r.clk.Advance(10 * time.Second)
	if r.call(false, 0) {
		t.Fatal("admitted after the round expired")
	}
	r.clk.Advance(time.Second)
	r.b.Record(late[0], r.clk.Nanotime(), 11*time.Second, true)
	r.wantState(Open)
	r.b.Record(late[1], r.clk.Nanotime(), 11*time.Second, false)
	r.wantState(HalfOpen) // the open period is over: the next call probes
	for range 3 {
		if !r.call(false, 0) {
			t.Fatal("probe refused after the late success")
		}
	}
	r.wantState(Closed)
	r.b.Record(late[2], r.clk.Nanotime(), 12*time.Second, false) // stale: ignored
	r.wantState(Closed)
	r.wantChanges("closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed")
}

// A probe whose caller cancels it reports no outcome. With one probe per
// round, a slot it kept would leave the round full: every call refused until
// the round times out a whole window later, and every cancelled probe of the
// next round doing the same again. Release gives the slot back at once, so
// the next call probes in its place, and the round is decided by the calls
// that do report.
func TestReleasedProbeGivesItsSlotBackToItsRound(t *testing.T) {
	c := cfg()
	c.HalfOpenProbes = 1
	r := newRig(t, c)
	r.halfOpen()
	for range 5 {
		probe, err := r.b.Allow(r.clk.Nanotime())
		if err != nil {
			t.Fatalf("probe after a released probe: %v", err)
		}
		if stateOf(uint64(probe)) != HalfOpen {
			t.Fatalf("probe admitted as %v, want half-open", stateOf(uint64(probe)))
		}
		r.b.Release(probe)
		r.wantState(HalfOpen) // a release decides nothing
	}
	if !r.call(false, 0) {
		t.Fatal("probe refused after released probes")
	}
	r.wantState(Closed)
	r.wantChanges("closed>open", "open>half-open", "half-open>closed")

	// While closed a release records nothing: ten released calls and nine
	// failures are fewer than MinCalls.
	for range 10 {
		tk, err := r.b.Allow(r.clk.Nanotime())
		if err != nil {
			t.Fatal(err)
		}
		r.b.Release(tk)
	}
	for range 9 {
		r.call(true, 0)
	}
	r.wantState(Closed)
	r.b.Release(0) // the zero ticket is ignored
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		c    rules.Breaker
	}{
		{"bad kind", rules.Breaker{Kind: "fuse"}},
		{"tiny window", rules.Breaker{Window: rules.Duration(time.Millisecond)}},
		{"error ratio above one", rules.Breaker{ErrorRatio: 1.5}},
		{"slow ratio above one", rules.Breaker{SlowCallRatio: 2}},
		{"k below one", rules.Breaker{Kind: rules.BreakerKindThrottle, K: 0.5}},
		// NaN passes every comparison: a NaN error ratio once made a
		// breaker that never opened.
		{"error ratio NaN", rules.Breaker{ErrorRatio: math.NaN()}},
		{"slow ratio NaN", rules.Breaker{SlowCallRatio: math.NaN()}},
		{"k NaN", rules.Breaker{Kind: rules.BreakerKindThrottle, K: math.NaN()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.c, Options{}); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	d := WithDefaults(rules.Breaker{})
	if d.Kind != rules.BreakerKindBreaker || d.Window.D() != DefaultWindow || d.MinCalls != DefaultMinCalls ||
		d.HalfOpenProbes != DefaultHalfOpenProbes || d.OpenMax.D() != DefaultOpenMax || d.K != DefaultK {
		t.Fatalf("defaults = %+v", d)
	}
	if State(7).String() != "unknown" {
		t.Fatal("unknown state name")
	}
}

// probe is a probe call let through at a time.
type probe struct {
	tk Ticket
	at int64
}

// openedAtOneSecond returns a breaker with the default settings (window
// 10s, 3 probes, open 5s..60s) that one failed call opened at 1s for 5s,
// the state changes it has made (appended as they come), and that time.
func openedAtOneSecond(t *testing.T) (*Breaker, *[]string, int64) {
	t.Helper()
	changes := new([]string)
	g, err := New(rules.Breaker{MinCalls: 1}, Options{OnStateChange: func(from, to State) {
		*changes = append(*changes, from.String()+">"+to.String())
	}})
	if err != nil {
		t.Fatal(err)
	}
	b := g.(*Breaker)
	now := int64(time.Second)
	tk, _ := b.Allow(now)
	b.Record(tk, now, time.Millisecond, true)
	return b, changes, now
}

// A hanging dependency whose callers give up first: each probe is released
// (its caller's context canceled) 5 s after it went out, and the next call
// takes its slot again. A slot taken again does not make the round newer:
// the round still ends a window after its last first-time probe, and the
// breaker reopens with back-off.
func TestReleasedProbesTakenAgainDoNotKeepTheRoundOpen(t *testing.T) {
	b, changes, now := openedAtOneSecond(t)
	sec := int64(time.Second)
	var out []probe
	for now < 120*sec {
		now += sec
		kept := out[:0]
		for _, p := range out {
			if now-p.at >= 5*sec { // the caller gave up: released, no outcome
				b.Release(p.tk)
				continue
			}
			kept = append(kept, p)
		}
		out = kept
		if tk, err := b.Allow(now); err == nil && stateOf(uint64(tk)) == HalfOpen {
			out = append(out, probe{tk, now})
		}
	}
	reopened := 0
	for _, c := range *changes {
		if c == "half-open>open" {
			reopened++
		}
	}
	if reopened < 3 {
		t.Fatalf("state changes %v: a hanging dependency whose probes are canceled never reopened the breaker", *changes)
	}
}
