package breaker

import (
	"testing"
	"time"
)

// openFor asserts that the breaker, open now, stays open for want and lets a
// probe through then; the probe succeeds or fails as told.
func (r *rig) openFor(want time.Duration, probeFails bool) {
	r.t.Helper()
	r.wantState(Open)
	r.clk.Advance(want - time.Millisecond)
	if r.call(false, 0) {
		r.t.Fatalf("admitted before the %v open period ended", want)
	}
	r.clk.Advance(time.Millisecond)
	if !r.call(probeFails, 0) {
		r.t.Fatalf("probe refused after the %v open period", want)
	}
}

// An endpoint that passes its probe and fails again right away is opened
// longer each time, up to OpenMax; the memory halves with every OpenMax
// spent closed.
func TestAFlappingEndpointIsOpenedLongerEachTime(t *testing.T) {
	c := cfg() // OpenBase 1s, OpenMax 5s
	c.HalfOpenProbes = 1
	r := newRig(t, c)
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		r.trip()
		r.openFor(want, false) // the probe passes: closed again
		r.wantState(Closed)
	}
	// Closed for one OpenMax: the memory halves, from 8s (capped to 5s) to
	// 4s.
	r.clk.Advance(5 * time.Second)
	r.trip()
	r.openFor(4*time.Second, false)
	// Closed for two OpenMax after an opening of 4s (which doubled the
	// memory back to 8s): halved twice, 2s.
	r.clk.Advance(10 * time.Second)
	r.trip()
	r.openFor(2*time.Second, false)
	// Closed long enough to forget: back to OpenBase.
	r.clk.Advance(time.Hour)
	r.trip()
	r.openFor(time.Second, false)
}

func TestOpenPeriodStaysAtOpenBaseWhenOpenMaxEqualsIt(t *testing.T) {
	c := cfg()
	c.HalfOpenProbes = 1
	c.OpenMax = c.OpenBase
	r := newRig(t, c)
	for range 3 {
		r.trip()
		r.openFor(time.Second, true) // the probe fails: reopen
		r.openFor(time.Second, false)
	}
}
