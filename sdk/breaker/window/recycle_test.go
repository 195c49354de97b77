package window

import (
	"math"
	"sync"
	"testing"
	"time"
)

// An add that lands in a cell between another writer's claim of it for the
// new bucket and the clearing of its old counts must still be counted.
func TestAddDuringABucketRecycleIsCounted(t *testing.T) {
	r := New(8*time.Second, 8)
	sec := int64(time.Second)
	for range 200 { // fill every stripe of the bucket of 0s
		r.Add(0, 0, 1)
	}
	added := int64(1) // the claimer's own add
	nested := false
	r.afterClaim = func(i int64) {
		if nested {
			return
		}
		nested = true
		defer func() { nested = false }()
		// Another writer adds to the bucket of 8s until one of its adds lands
		// in the very cell being recycled.
		for {
			before := r.cells[i].c[0].Load()
			r.Add(8*sec, 0, 1)
			added++
			if r.cells[i].c[0].Load() != before {
				return
			}
		}
	}
	r.Add(8*sec, 0, 1)
	if got := r.Sum(8 * sec)[0]; got != added {
		t.Fatalf("Sum(8s) = %d after %d adds in its bucket", got, added)
	}
}

// A reader that sums while a cell is being recycled must not count the counts
// of the cell's previous lap, which left the window.
func TestSumDuringABucketRecycleSkipsThePreviousLap(t *testing.T) {
	r := New(8*time.Second, 8)
	sec := int64(time.Second)
	for range 200 {
		r.Add(0, 1, 1)
	}
	var during [Counters]int64
	r.afterClaim = func(int64) { during = r.Sum(8 * sec) }
	r.Add(8*sec, 0, 1)
	if during[1] != 0 {
		t.Fatalf("Sum(8s) during the recycle = %v, counts the bucket of 0s", during)
	}
}

// Many writers crossing bucket edges together: every add of a bucket is in
// its total, exactly.
func TestConcurrentAddsAcrossBucketEdgesSumExactly(t *testing.T) {
	r := New(8*time.Millisecond, 8) // 1ms buckets
	ms := int64(time.Millisecond)
	const workers, per, laps = 4, 50, 400
	for lap := range int64(laps) {
		now := lap * ms
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range per {
					r.Add2(now, 0, 1, 2, 1)
				}
			}()
		}
		close(start)
		wg.Wait()
		got := r.Sum(now)
		want := int64(workers * per * min(lap+1, 8))
		if got[0] != want || got[2] != want {
			t.Fatalf("lap %d: Sum = %v, want %d in counters 0 and 2", lap, got, want)
		}
	}
}

// claimAll adds at now until every stripe of its bucket holds that epoch.
func claimAll(t *testing.T, r *Ring, now int64, k int) int64 {
	t.Helper()
	e := r.epochOf(now)
	base := (e & (r.buckets - 1)) * stripes
	var n int64
	for i := base; i < base+stripes; i++ {
		for r.cells[i].epoch.Load() != e {
			r.Add(now, k, 1)
			n++
		}
	}
	return n
}

// A cell idle for a whole tag range holds words whose tag matches the new
// epoch's: they must not count as the new bucket's.
func TestAnIdleCellWhoseTagRepeatsStartsFromZero(t *testing.T) {
	r := New(8, 8) // 1ns buckets
	claimAll(t, r, 0, 0)
	r.Add(1<<tagBits, 0, 1) // same bucket and tag as epoch 0
	if got := r.Sum(1 << tagBits)[0]; got != 1 {
		t.Fatalf("Sum = %d, want 1", got)
	}
}

// A claim left half done (its claimer stalled before clearing the old
// counts) is finished by the next claimer, so the old counts do not pass
// for a later lap whose tag they share.
func TestAStalledClaimIsFinishedByTheNextClaimer(t *testing.T) {
	r := New(8, 8)
	claimAll(t, r, 0, 0)
	y := int64(1 << tagBits) // the tag of epoch 0
	var added int64
	nested := false
	r.afterClaim = func(i int64) {
		if nested {
			return
		}
		nested = true
		defer func() { nested = false }()
		for {
			before := r.cells[i].c[0].Load()
			r.Add(y, 0, 1)
			added++
			if r.cells[i].c[0].Load() != before {
				return
			}
		}
	}
	r.Add(8, 0, 1) // claims a cell of the bucket for epoch 8, then stalls
	if got := r.Sum(y)[0]; got != added {
		t.Fatalf("Sum = %d after %d adds in the bucket", got, added)
	}
}

func TestACountSaturates(t *testing.T) {
	r := New(8, 8)
	r.Add(0, 0, 1)
	var c *cell
	for i := range r.cells[:stripes] {
		if r.cells[i].epoch.Load() == 0 {
			c = &r.cells[i]
		}
	}
	c.add(1, 0, maxCount-1)
	c.add(1, 0, 5)
	c.add(2, 0, minCount+1)
	c.add(2, 0, -5)
	c.add(2, 0, math.MinInt64)
	if got := r.Sum(0); got[1] != maxCount || got[2] != minCount {
		t.Fatalf("Sum = %v, want counts saturated at %d and %d", got, int64(maxCount), int64(minCount))
	}
}
