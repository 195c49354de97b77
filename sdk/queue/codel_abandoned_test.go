package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"governor.dev/governor/sdk/rules"
)

// step advances the clock by d, 1 ms at a time, letting every waiter whose
// timer fired leave before the next step, and returns what those waiters got.
func (h *harness) step(d time.Duration) []result {
	h.t.Helper()
	var out []result
	for range int(d / time.Millisecond) {
		before := h.q.Len()
		h.clk.Advance(time.Millisecond)
		h.until(func() bool { return h.q.Len() == h.clk.Pending() })
		for range before - h.q.Len() {
			out = append(out, h.next())
		}
	}
	return out
}

// On a limit that stays full, requests leave only by timing out, and the
// queue may be empty between them. An empty queue emptied by requests giving
// up is still a standing queue (the next request waits just as long), so the
// queue must stay overloaded and shed after 2 x Target, not go back to waits
// of a whole Interval every other interval.
func TestStuckLimitStaysOverloadedWhileWaitersTimeOut(t *testing.T) {
	h := newHarness(t, rules.Queue{Target: rules.Duration(5 * time.Millisecond), Interval: rules.Duration(100 * time.Millisecond)})
	start := h.clk.Nanotime()
	for i := range 60 { // one request every 30 ms, none ever gets a slot
		at := time.Duration(h.clk.Nanotime() - start)
		h.enqueue(context.Background(), "r", 1)
		for _, r := range h.step(30 * time.Millisecond) {
			if !errors.Is(r.err, ErrTimeout) {
				t.Fatalf("request %d: %v, want ErrTimeout", i, r.err)
			}
			if at > 400*time.Millisecond && r.wait > 10*time.Millisecond {
				t.Errorf("request %d at %s waited %s on a limit full all along, want at most 2 x target", i, at, r.wait)
			}
		}
	}
}

// A queue that stays empty for a whole interval has no standing queue, even
// if its last requests left by timing out.
func TestIdleIntervalEndsOverload(t *testing.T) {
	h := newHarness(t, rules.Queue{Target: rules.Duration(5 * time.Millisecond), Interval: rules.Duration(100 * time.Millisecond)})
	for range 20 {
		h.enqueue(context.Background(), "r", 1)
		h.step(30 * time.Millisecond)
	}
	if !h.q.Overloaded() {
		t.Fatal("not overloaded on a limit full for 600ms")
	}
	h.step(30 * time.Millisecond) // the last waiter times out
	h.clk.Advance(time.Second)
	if h.q.Overloaded() {
		t.Fatal("still overloaded after an idle second")
	}
}

// A waiter whose context ends while Dispatch hands it a slot either gets the
// slot (and no error) or an error and no slot: no slot is taken for nobody.
func TestCancelRacingDispatchLeaksNoSlot(t *testing.T) {
	for round := range 50 {
		h := newHarness(t, rules.Queue{MaxLength: 64})
		var cancels []context.CancelFunc
		for i := range 32 {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			h.enqueue(ctx, "r", i%NumClasses)
		}
		done := make(chan struct{})
		go func() {
			for i, cancel := range cancels {
				if i%2 == round%2 {
					cancel()
				}
			}
			close(done)
		}()
		for range 32 {
			h.free(1)
		}
		<-done
		for _, cancel := range cancels {
			cancel()
		}
		served := 0
		for range 32 {
			if r := h.next(); r.err == nil {
				served++
			}
		}
		h.s.mu.Lock()
		taken := h.s.taken
		h.s.mu.Unlock()
		if taken != served {
			t.Fatalf("%d slots taken, %d handed to waiters", taken, served)
		}
	}
}
