package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"governor.dev/governor/sdk/clock"
)

// steppedClock is a fake clock whose wall time a test can step back, as an
// NTP correction or a resumed VM does.
type steppedClock struct {
	*clock.Fake
	now time.Time
}

func (c *steppedClock) Now() time.Time { return c.now }

// The control plane records the Running, Labels and NACK of an instance's
// message only if its At is not older than the newest it has: reports and
// heartbeats stamped after the instance's wall clock stepped back would be
// set aside until the clock caught up. Their At never goes back.
func TestReportsAfterTheClockStepsBackAreNotStampedEarlier(t *testing.T) {
	// Never connected: New needs a connection, the state is driven directly.
	nc, err := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := &steppedClock{Fake: clock.NewFake(t0), now: t0}
	w, err := New(Options{Service: "checkout", Instance: "i1", Conn: nc, Applier: &fakeApplier{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var reports []*Report
	w.st.send = func(r *Report) { reports = append(reports, r) }

	w.st.onStable(envelopeBytes(t, "checkout", 1))
	clk.now = t0.Add(-time.Minute) // stepped back
	w.st.onStable(envelopeBytes(t, "checkout", 2))
	w.st.onStable([]byte(`{"version": 3`)) // a NACK
	clk.now = t0.Add(time.Second)          // caught up
	w.st.onStable(envelopeBytes(t, "checkout", 4))

	want := []time.Time{t0, t0, t0, t0.Add(time.Second)}
	if len(reports) != len(want) {
		t.Fatalf("%d reports, want %d", len(reports), len(want))
	}
	for i, r := range reports {
		if !r.At.Equal(want[i]) {
			t.Errorf("report %d (version %d, %s) At = %v, want %v", i, r.Version, r.Status, r.At, want[i])
		}
	}
	if hb := w.st.now(); !hb.Equal(t0.Add(time.Second)) {
		t.Errorf("the stamp heartbeats take = %v, want %v", hb, t0.Add(time.Second))
	}
}

// TestStampComparesWallClocks: the stamper compares the wall clock, which is
// what goes on the wire and what steps back, not the monotonic reading of
// time.Now, which never does: it hands out times without one.
func TestStampComparesWallClocks(t *testing.T) {
	s := &stamper{now: time.Now}
	for range 3 {
		if at := s.stamp(); strings.Contains(at.String(), " m=") {
			t.Fatalf("stamp %v carries a monotonic reading", at)
		}
	}
}
