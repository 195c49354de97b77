package shed

import (
	"sync"
	"testing"
	"time"
)

func TestMargin(t *testing.T) {
	tests := []struct{ peak, want int }{
		{-1, 0}, {0, 0}, {1, 2}, {2, 4}, {4, 6}, {5, 8}, {9, 12}, {100, 110},
	}
	for _, tt := range tests {
		if got := Margin(tt.peak); got != tt.want {
			t.Errorf("Margin(%d) = %d, want %d", tt.peak, got, tt.want)
		}
	}
}

func TestReservePeakCountsCompleteWindowsOnly(t *testing.T) {
	const w = int64(time.Second)
	at := func(f float64) int64 { return int64(f * float64(w)) }
	r := NewReserve(time.Second, nil)
	steps := []struct {
		at       float64
		admit    int // critical requests admitted (negative: released)
		wantPeak int // Peak at that time, after the step
	}{
		{0.0, 3, 0},  // the open window does not count yet
		{0.5, -2, 0}, // one left in flight
		{1.0, 0, 3},  // window [0,1) closed with a peak of 3
		{1.5, 2, 3},  // three in flight in the open window
		{2.0, 0, 3},  // [1,2) closed with 3 (it started with one in flight)
		{2.1, -3, 3}, // all released
		{3.0, 0, 3},  // [2,3) closed with 3 (it started with three in flight)
		{4.0, 0, 3},  // [3,4) idle; [2,3) still remembered
		{5.0, 0, 0},  // two idle windows: forgotten
		{5.2, 5, 0},  // a burst
		{5.3, -5, 0}, // gone again
		{6.7, 0, 5},  // [5,6) closed with 5, [6,6.7) passed idle: one window ended
		{9.5, 0, 0},  // more than two idle windows: all forgotten at once
	}
	for _, st := range steps {
		now := at(st.at)
		for range st.admit {
			r.Admitted(now)
		}
		for range -st.admit {
			r.Released(now)
		}
		if got := r.Peak(now); got != st.wantPeak {
			t.Fatalf("at %.1f windows: Peak = %d, want %d", st.at, got, st.wantPeak)
		}
	}
}

// TestReserveRoomNeedsLowerClassAdmissions: Room is Peak, except after a
// complete window in which critical requests held slots and the lower
// classes were admitted nothing; a window with nothing in flight is idle,
// not crowded; without a lower-class count Room is Peak.
func TestReserveRoomNeedsLowerClassAdmissions(t *testing.T) {
	const w = int64(time.Second)
	at := func(f float64) int64 { return int64(f * float64(w)) }
	var critical, lower uint64
	r := NewReserve(time.Second, func() (uint64, uint64) { return critical, lower })
	plain := NewReserve(time.Second, nil)
	steps := []struct {
		at         float64
		admit      int    // critical requests admitted (negative: released)
		lower      uint64 // lower-class requests admitted
		peak, room int
	}{
		{0.0, 3, 0, 0, 0}, // nothing complete yet
		{1.0, 0, 0, 3, 0}, // [0,1): critical held 3, the lower classes none
		{1.5, 0, 2, 3, 0}, // two core requests admitted in the open window
		{2.0, 0, 0, 3, 3}, // [1,2): critical held 3 beside them
		{2.1, -3, 0, 3, 3},
		{3.0, 0, 0, 3, 0}, // [2,3): it started with 3 in flight, no lower class
		{4.0, 0, 0, 3, 3}, // [3,4): idle, not crowded: the peak of [2,3) is remembered
		{5.0, 0, 0, 0, 0}, // forgotten
		{5.5, 2, 1, 0, 0},
		{6.0, 0, 0, 2, 2}, // [5,6): both classes admitted
	}
	for _, st := range steps {
		now := at(st.at)
		lower += st.lower
		for range st.admit {
			r.Admitted(now)
			plain.Admitted(now)
			critical++
		}
		for range -st.admit {
			r.Released(now)
			plain.Released(now)
		}
		if got := r.Peak(now); got != st.peak {
			t.Fatalf("at %.1f windows: Peak = %d, want %d", st.at, got, st.peak)
		}
		if got := r.Room(now); got != st.room {
			t.Fatalf("at %.1f windows: Room = %d, want %d", st.at, got, st.room)
		}
		if got := plain.Room(now); got != st.peak {
			t.Fatalf("at %.1f windows: Room without a lower-class count = %d, want Peak %d", st.at, got, st.peak)
		}
	}
}

// TestReserveTrickleOfLowerClassesIsCrowded: behind a dependency that
// serves fewer critical requests than arrive, a lower-class request now and
// then takes a slot critical freed; a window in which the lower classes got
// at most a fifth of the admissions still has no room, one in which they got
// more has its peak.
func TestReserveTrickleOfLowerClassesIsCrowded(t *testing.T) {
	const w = int64(time.Second)
	var critical, lower uint64
	r := NewReserve(time.Second, func() (uint64, uint64) { return critical, lower })
	steps := []struct {
		at         float64
		critical   int    // critical requests admitted at at
		lower      uint64 // lower-class requests admitted at at
		released   int    // critical requests released at at
		peak, room int    // after the admissions and releases
		comment    string
	}{
		{0.0, 12, 0, 0, 0, 0, "nothing complete yet"},
		{0.5, 0, 3, 12, 0, 0, "3 lower-class requests beside 12 critical: a fifth"},
		{1.0, 10, 0, 0, 12, 0, "[0,1) crowded: no room"},
		{1.5, 0, 3, 10, 12, 0, "3 beside 10: more than a fifth"},
		{2.0, 0, 0, 0, 12, 12, "[1,2) not crowded: room is the peak"},
	}
	for _, st := range steps {
		now := int64(st.at * float64(w))
		for range st.critical {
			r.Admitted(now)
			critical++
		}
		lower += st.lower
		for range st.released {
			r.Released(now)
		}
		if got := r.Peak(now); got != st.peak {
			t.Fatalf("at %.1f s (%s): Peak = %d, want %d", st.at, st.comment, got, st.peak)
		}
		if got := r.Room(now); got != st.room {
			t.Fatalf("at %.1f s (%s): Room = %d, want %d", st.at, st.comment, got, st.room)
		}
	}
}

func TestReserveNeverGoesNegative(t *testing.T) {
	r := NewReserve(time.Second, nil)
	r.Released(1)
	r.Admitted(2)
	if got := r.Peak(int64(time.Second) + 2); got != 1 {
		t.Fatalf("peak after a stray release = %d, want 1", got)
	}
}

func TestReserveDefaultWindow(t *testing.T) {
	r := NewReserve(-time.Second, nil)
	if r.window != int64(DefaultReserveWindow) {
		t.Fatalf("window = %d, want %d", r.window, DefaultReserveWindow)
	}
}

// TestReserveConcurrent: concurrent admissions and releases balance out and
// the peak is at most the number of goroutines (run with -race).
func TestReserveConcurrent(t *testing.T) {
	const n = 8
	r := NewReserve(time.Second, nil)
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
	if p := r.Peak(int64(time.Second)); p < 1 || p > n {
		t.Fatalf("peak = %d, want 1..%d", p, n)
	}
}

// TestReserveAndPlanFollowTheCriticalLoad drives the Plan/Reserve loop the
// admission core runs: critical requests fill whatever room their ceiling
// leaves while core holds its whole ceiling. The room grows window by window
// until the critical demand fits, stays bounded under a critical flood, and
// returns to the plain thresholds when critical traffic stops.
func TestReserveAndPlanFollowTheCriticalLoad(t *testing.T) {
	const (
		limit = 7
		w     = int64(time.Second)
	)
	core := Thresholds(limit, 0.1)[1]
	r := NewReserve(time.Second, nil)
	// run plays windows in which critical wants demand slots at once; it
	// returns the critical ceiling of the last window and how many critical
	// requests that window admitted.
	start := int64(0)
	run := func(windows, demand int) (ceiling, admitted int) {
		for range windows {
			c := Plan(limit, 0.1, r.Peak(start))
			ceiling, admitted = c[0], 0
			for admitted < demand && core+admitted < c[0] {
				r.Admitted(start)
				admitted++
			}
			for range admitted {
				r.Released(start + w/2)
			}
			start += w
		}
		return ceiling, admitted
	}
	if c, n := run(1, 4); c != limit || n != 1 {
		t.Fatalf("first window: critical ceiling %d admitted %d, want the limit (%d) and 1", c, n, limit)
	}
	if c, n := run(4, 4); n != 4 || c < core+4 {
		t.Fatalf("after four windows: critical ceiling %d admitted %d of 4, want all", c, n)
	}
	if c, _ := run(20, 1000); c != (1+Overshoot)*limit {
		t.Fatalf("critical flood: ceiling %d, want the bound %d", c, (1+Overshoot)*limit)
	}
	if c, _ := run(3, 0); c != limit {
		t.Fatalf("after critical traffic stopped: ceiling %d, want the limit %d", c, limit)
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
				want := min(limit+Margin(peak), (1+Overshoot)*limit)
				if peak == 0 {
					want = limit
				}
				if c[0] != want {
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
		// Critical keeps the share core may not fill and gets what it
		// holds plus one standard deviation on top of the limit.
		{100, 4, Ceilings{106, 90, 81, 72}},
		{100, 16, Ceilings{120, 90, 81, 72}},
		// At a saturated server's small limit that is several times the
		// share.
		{7, 4, Ceilings{13, 6, 5, 4}},
		{4, 4, Ceilings{10, 3, 2, 1}},
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
	r := NewReserve(time.Millisecond, nil)
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
