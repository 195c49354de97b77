package limit

import (
	"testing"
	"time"

	"governor.dev/governor/sdk/rules"
)

// The latency at which answers came late bounds the tolerated latency: 80%
// of a loaded window's RTT with 1% drops or more, never below 1.1 x the
// no-load RTT, never above the tolerance; a later window with drops at a
// lower RTT lowers it; an idle window's drops say nothing; it is forgotten
// when the no-load RTT falls a lot (the slow period ended).
func TestLateAnswersBoundTheToleratedLatency(t *testing.T) {
	const s = float64(time.Second)
	c := newTestCore(t, rules.Concurrency{})
	c.noLoad = 1.2 * s
	near := func(got, want float64) bool { return got > want*0.999 && got < want*1.001 }
	if got := c.tolerated(); !near(got, 1.8*s) {
		t.Fatalf("tolerated %v before any drop, want no-load x 1.5 = 1.8s", time.Duration(got))
	}
	loaded := func(rtt float64, drops int64) *window {
		w := &window{count: 20, drops: drops, avgRTT: rtt, maxInflight: 30, concurrency: 30}
		w.finish(c.busyAt())
		w.avgRTT = rtt
		return w
	}
	c.noteLate(loaded(1.9*s, 0))
	if got := c.tolerated(); !near(got, 1.8*s) {
		t.Errorf("tolerated %v after a slow window without drops, want 1.8s", time.Duration(got))
	}
	c.noteLate(loaded(2.4*s, 2))
	if got := c.tolerated(); !near(got, 1.8*s) {
		t.Errorf("tolerated %v after drops at 2.4s, want 1.8s (80%% of 2.4s is above the tolerance)", time.Duration(got))
	}
	c.noteLate(loaded(2*s, 2))
	if got := c.tolerated(); !near(got, 1.6*s) {
		t.Errorf("tolerated %v after drops at 2s, want 1.6s", time.Duration(got))
	}
	c.noteLate(loaded(2.2*s, 5))
	if got := c.tolerated(); !near(got, 1.6*s) {
		t.Errorf("tolerated %v after drops at a higher RTT, want still 1.6s", time.Duration(got))
	}
	c.noteLate(loaded(1.5*s, 2))
	if got := c.tolerated(); !near(got, 1.32*s) {
		t.Errorf("tolerated %v after drops at 1.5s, want the floor 1.1 x 1.2s = 1.32s", time.Duration(got))
	}
	idle := &window{count: 20, drops: 5, avgRTT: 0.5 * s, maxInflight: 1, concurrency: 1}
	c.noteLate(idle)
	if got := c.tolerated(); !near(got, 1.32*s) {
		t.Errorf("tolerated %v after drops in an idle window, want unchanged 1.32s", time.Duration(got))
	}
	c.noLoad = 30e6 // the slow period ended
	c.noteLate(loaded(40e6, 0))
	if got := c.tolerated(); !near(got, 45e6) {
		t.Errorf("tolerated %v after the no-load RTT fell to 30ms, want 45ms (the late latency forgotten)", time.Duration(got))
	}
}
