package clock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestFakeAdvanceFiresTimersInOrder(t *testing.T) {
	f := NewFake(time.Time{})
	a := f.NewTimer(30 * time.Millisecond)
	b := f.NewTimer(10 * time.Millisecond)
	c := f.NewTimer(time.Second)
	f.Advance(50 * time.Millisecond)
	if got := (<-b.C()).Sub(f.start); got != 10*time.Millisecond {
		t.Fatalf("timer b fired at %v, want 10ms", got)
	}
	if got := (<-a.C()).Sub(f.start); got != 30*time.Millisecond {
		t.Fatalf("timer a fired at %v, want 30ms", got)
	}
	select {
	case <-c.C():
		t.Fatal("timer c fired early")
	default:
	}
	if !c.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if f.Pending() != 0 {
		t.Fatalf("pending = %d, want 0", f.Pending())
	}
	if f.Nanotime() != int64(50*time.Millisecond) {
		t.Fatalf("nanotime = %d", f.Nanotime())
	}
}

func TestFakeZeroTimerFiresAtOnce(t *testing.T) {
	f := NewFake(time.Unix(100, 0))
	tm := f.NewTimer(0)
	select {
	case got := <-tm.C():
		if !got.Equal(time.Unix(100, 0)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("zero timer did not fire")
	}
}

func TestCoarseMovesForward(t *testing.T) {
	c := NewCoarse(time.Millisecond)
	defer c.Close()
	first := c.Nanotime()
	deadline := time.Now().Add(5 * time.Second)
	for c.Nanotime() == first && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c.Nanotime() <= first {
		t.Fatal("coarse clock did not advance")
	}
	c.Close()
}

// TestCoarseRefreshCatchesUp: a coarse reading that fell behind (its
// goroutine waited for a CPU) is brought up to the system clock by Refresh,
// for every reader, and a reading ahead of the one Refresh takes stays.
func TestCoarseRefreshCatchesUp(t *testing.T) {
	c := NewCoarse(time.Hour) // the goroutine will not refresh it
	defer c.Close()
	c.now.Store(Real{}.Nanotime() - int64(time.Second)) // a second behind
	before := Real{}.Nanotime()
	got := c.Refresh()
	if got < before {
		t.Fatalf("Refresh returned %d, want at least the real reading %d", got, before)
	}
	if n := c.Nanotime(); n != got {
		t.Fatalf("Nanotime %d after Refresh returned %d", n, got)
	}
	ahead := Real{}.Nanotime() + int64(time.Hour)
	c.now.Store(ahead)
	if got := c.Refresh(); got != ahead || c.Nanotime() != ahead {
		t.Fatalf("Refresh moved a later reading %d back to %d (Nanotime %d)", ahead, got, c.Nanotime())
	}
}

// TestCoarseRefreshNeverGoesBack: readers refreshing concurrently with the
// clock's own goroutine each see a reading that never decreases.
func TestCoarseRefreshNeverGoesBack(t *testing.T) {
	c := NewCoarse(time.Microsecond)
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := int64(0)
			for i := range 20000 {
				n := c.Nanotime()
				if i%3 == 0 {
					n = c.Refresh()
				}
				if n < prev {
					errs <- fmt.Sprintf("reading went back from %d to %d", prev, n)
					return
				}
				prev = n
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

func BenchmarkNanotime(b *testing.B) {
	c := NewCoarse(time.Millisecond)
	defer c.Close()
	clocks := map[string]Clock{"real": Real{}, "coarse": c, "fake": NewFake(time.Time{})}
	for name, ck := range clocks {
		b.Run(name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				var s int64
				for pb.Next() {
					s += ck.Nanotime()
				}
				_ = s
			})
		})
	}
}

func TestSleepWaitsOnTheClockOrEndsWithTheContext(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Second) }()
	for f.Pending() == 0 {
		runtime.Gosched()
	}
	f.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Sleep after the clock passed d: %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, f, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with an ended context: %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), f, 0); err != nil {
		t.Fatalf("Sleep(0): %v, want nil", err)
	}
}
