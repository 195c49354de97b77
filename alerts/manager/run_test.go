package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRunStepsOnTheClock(t *testing.T) {
	h := newHarness(t)
	h.db.set("load", "search")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.m.Run(ctx) }()
	for i := range 3 {
		// Each step arms the next interval's timer on the fake clock.
		for h.clk.Pending() == 0 {
			waitBriefly()
		}
		if v := testutil.ToFloat64(h.m.m.evals); v != float64(i+1) {
			t.Fatalf("after %d intervals: %v steps", i, v)
		}
		h.clk.Advance(15 * time.Second)
	}
	for testutil.ToFloat64(h.m.m.evals) < 4 {
		waitBriefly()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if err := h.m.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Steps at 0, 15s, 30s, 45s: the group wait of 30s ended at the third.
	h.expect(45*time.Second, "firing Load@search/firing")
}

func TestStepPrunesHistoryPastRetention(t *testing.T) {
	h := newHarness(t)
	h.close()
	h.retention = time.Hour
	h.open()
	ctx := context.Background()
	h.db.set("load", "search")
	h.timeline(0, 30*time.Second, map[time.Duration][]string{30 * time.Second: {"firing Load@search/firing"}})
	h.db.set("load")
	h.timeline(time.Minute, 90*time.Second, map[time.Duration][]string{90 * time.Second: {"resolved Load@search/resolved"}})
	if hist, _ := h.st.History(ctx, 0, 100); len(hist) != 3 {
		t.Fatalf("history %+v", hist)
	}
	h.at(3 * time.Hour) // the first prune since the start, an hour later
	if hist, _ := h.st.History(ctx, 0, 100); len(hist) != 0 {
		t.Fatalf("history kept past retention: %+v", hist)
	}
}
