package shed

import (
	"sync"
	"testing"
	"time"
)

func TestMargin(t *testing.T) {
	tests := []struct{ peak, want int }{
		{-1, 1}, {0, 1}, {1, 2}, {2, 4}, {4, 6}, {5, 8}, {9, 12}, {100, 110},
	}
	for _, tt := range tests {
		if got := Margin(tt.peak); got != tt.want {
			t.Errorf("Margin(%d) = %d, want %d", tt.peak, got, tt.want)
		}
	}
}

func TestReservePeakFollowsTheWindows(t *testing.T) {
	const w = int64(time.Second)
	r := NewReserve(time.Second)
	at := func(f float64) int64 { return int64(f * float64(w)) }

	// Three critical requests overlap in the first window.
	for range 3 {
		r.Admitted(at(0.1))
	}
	if got := r.Peak(at(0.2)); got != 3 {
		t.Fatalf("peak in the first window = %d, want 3", got)
	}
	r.Released(at(0.3))
	r.Released(at(0.3))
	// One is still in flight; a new window remembers the previous peak.
	if got := r.Peak(at(1.1)); got != 3 {
		t.Fatalf("peak one window later = %d, want 3 (previous window)", got)
	}
	r.Released(at(1.2))
	// Two windows later the old peak is forgotten; the window that rolled at
	// 1.1 started with one request in flight.
	if got := r.Peak(at(2.2)); got != 1 {
		t.Fatalf("peak two windows later = %d, want 1", got)
	}
	if got := r.Peak(at(3.3)); got != 0 {
		t.Fatalf("peak after idle windows = %d, want 0", got)
	}
	// A long idle gap forgets everything at once.
	for range 5 {
		r.Admitted(at(3.4))
	}
	for range 5 {
		r.Released(at(3.5))
	}
	if got := r.Peak(at(9)); got != 0 {
		t.Fatalf("peak after a long idle gap = %d, want 0", got)
	}
}

func TestReserveNeverGoesNegative(t *testing.T) {
	r := NewReserve(0)
	r.Released(1)
	r.Admitted(2)
	if got := r.Peak(3); got != 1 {
		t.Fatalf("peak after a stray release = %d, want 1", got)
	}
}

func TestReserveDefaultWindow(t *testing.T) {
	r := NewReserve(-time.Second)
	if r.window != int64(DefaultReserveWindow) {
		t.Fatalf("window = %d, want %d", r.window, DefaultReserveWindow)
	}
}

// TestReserveConcurrent: concurrent admissions and releases balance out and
// the peak is at most the number of goroutines (run with -race).
func TestReserveConcurrent(t *testing.T) {
	const n = 8
	r := NewReserve(time.Second)
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				now := int64(g*1000 + i)
				r.Admitted(now)
				r.Released(now)
			}
		}()
	}
	wg.Wait()
	if v := r.inflight.Load(); v != 0 {
		t.Fatalf("in flight after balanced use = %d", v)
	}
	if p := r.Peak(10_000); p < 1 || p > n {
		t.Fatalf("peak = %d, want 1..%d", p, n)
	}
}

func TestPlan(t *testing.T) {
	for limit := 1; limit <= 300; limit++ {
		for _, reserved := range []float64{0, 0.1, 0.3} {
			base := Thresholds(limit, reserved)
			for _, peak := range []int{0, 1, 2, 4, 9, 50, 1000} {
				c := Plan(limit, reserved, peak)
				for k := 1; k < NumClasses; k++ {
					if c[k] != base[k] {
						t.Fatalf("Plan(%d, %v, %d) = %v: lower classes differ from Thresholds %v", limit, reserved, peak, c, base)
					}
					if c[k] > c[k-1] {
						t.Fatalf("Plan(%d, %v, %d) = %v: priority inversion", limit, reserved, peak, c)
					}
				}
				if c[0] < limit || c[0] > (1+Overshoot)*limit {
					t.Fatalf("Plan(%d, %v, %d): critical ceiling %d outside [limit, (1+Overshoot) limit]", limit, reserved, peak, c[0])
				}
				if want := min(max(limit, c[1]+Margin(peak)), (1+Overshoot)*limit); c[0] != want {
					t.Fatalf("Plan(%d, %v, %d): critical ceiling %d, want %d", limit, reserved, peak, c[0], want)
				}
			}
		}
	}
	if got := Plan(0, 0.1, 5); got != (Ceilings{}) {
		t.Fatalf("Plan(0) = %v, want zeros", got)
	}
}

func TestPlanAtSmallLimits(t *testing.T) {
	tests := []struct {
		limit, peak int
		want        Ceilings
	}{
		// No critical traffic measured: the ceilings of Thresholds.
		{7, 0, Ceilings{7, 6, 5, 4}},
		{100, 0, Ceilings{100, 90, 81, 72}},
		// At a large limit the 10% share already covers a small peak.
		{100, 4, Ceilings{100, 90, 81, 72}},
		{100, 16, Ceilings{110, 90, 81, 72}},
		// At a saturated server's small limit critical gets what it holds
		// plus one standard deviation on top of core's ceiling.
		{7, 4, Ceilings{12, 6, 5, 4}},
		{4, 4, Ceilings{9, 3, 2, 1}},
		// A flood of critical traffic is bounded.
		{4, 100, Ceilings{(1 + Overshoot) * 4, 3, 2, 1}},
	}
	for _, tt := range tests {
		if got := Plan(tt.limit, 0.1, tt.peak); got != tt.want {
			t.Errorf("Plan(%d, 0.1, %d) = %v, want %v", tt.limit, tt.peak, got, tt.want)
		}
	}
}

func BenchmarkReserve(b *testing.B) {
	r := NewReserve(time.Millisecond)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var now int64
		for pb.Next() {
			now += 1000
			r.Admitted(now)
			r.Released(now)
		}
	})
}
