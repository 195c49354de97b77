package clock

import (
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
