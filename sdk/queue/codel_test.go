package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// slots is the capacity the queue acquires from; the test frees slots.
type slots struct {
	mu    sync.Mutex
	free  int
	taken int
	// minCohort refuses the cohorts below it, as consistent shedding does
	// when the route is between their ceilings.
	minCohort uint32
}

func (s *slots) acquire(_ int, k uint32) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free == 0 || k < s.minCohort {
		return 0, false
	}
	s.free--
	s.taken++
	return uint32(s.taken), true
}

func (s *slots) add(n int) {
	s.mu.Lock()
	s.free += n
	s.mu.Unlock()
}

type result struct {
	name string
	slot uint32
	wait time.Duration
	err  error
}

type harness struct {
	t       *testing.T
	clk     *clock.Fake
	q       *Queue
	s       *slots
	results chan result
	waiting int
}

func newHarness(t *testing.T, cfg rules.Queue) *harness {
	h := &harness{t: t, clk: clock.NewFake(time.Now().Add(24 * time.Hour)), s: &slots{}, results: make(chan result, 64)}
	q, err := New(cfg, h.clk, h.s.acquire)
	if err != nil {
		t.Fatal(err)
	}
	h.q = q
	return h
}

// enqueue starts a waiter and returns once it is queued with its timer set.
func (h *harness) enqueue(ctx context.Context, name string, class int) {
	h.t.Helper()
	h.enqueueCohort(ctx, name, class, 0)
}

// enqueueCohort is enqueue for a request of user cohort k.
func (h *harness) enqueueCohort(ctx context.Context, name string, class int, k uint32) {
	h.t.Helper()
	h.waiting++
	want := h.q.Len() + 1
	pending := h.clk.Pending() + 1
	go func() {
		slot, wait, err := h.q.Wait(ctx, class, k)
		h.results <- result{name, slot, wait, err}
	}()
	h.until(func() bool { return h.q.Len() == want && h.clk.Pending() == pending })
}

// until yields until cond holds; it fails the test if it never does.
func (h *harness) until(cond func() bool) {
	h.t.Helper()
	for i := 0; i < 1_000_000; i++ {
		if cond() {
			return
		}
		runtime.Gosched()
	}
	h.t.Fatal("condition never held")
}

func (h *harness) next() result {
	h.t.Helper()
	select {
	case r := <-h.results:
		h.waiting--
		return r
	case <-time.After(10 * time.Second):
		h.t.Fatal("no waiter finished")
	}
	return result{}
}

func (h *harness) free(n int) {
	h.s.add(n)
	h.q.Dispatch()
}

func TestFIFOWhileNotOverloaded(t *testing.T) {
	h := newHarness(t, rules.Queue{})
	for _, n := range []string{"a", "b", "c"} {
		h.enqueue(context.Background(), n, 1)
		h.clk.Advance(time.Millisecond)
	}
	for _, want := range []string{"a", "b", "c"} {
		h.free(1)
		if r := h.next(); r.name != want || r.err != nil {
			t.Fatalf("served %s (%v), want %s", r.name, r.err, want)
		}
	}
}

func TestHigherClassServedFirst(t *testing.T) {
	h := newHarness(t, rules.Queue{})
	h.enqueue(context.Background(), "batch", 3)
	h.enqueue(context.Background(), "core", 1)
	h.enqueue(context.Background(), "critical", 0)
	for _, want := range []string{"critical", "core", "batch"} {
		h.free(1)
		if r := h.next(); r.name != want {
			t.Fatalf("served %s, want %s", r.name, want)
		}
	}
}

func TestWaitsAtMostIntervalWhenNotOverloaded(t *testing.T) {
	h := newHarness(t, rules.Queue{Target: rules.Duration(5 * time.Millisecond), Interval: rules.Duration(100 * time.Millisecond)})
	h.enqueue(context.Background(), "a", 1)
	h.clk.Advance(99 * time.Millisecond)
	select {
	case r := <-h.results:
		t.Fatalf("waiter left after 99ms: %v", r.err)
	default:
	}
	h.clk.Advance(time.Millisecond)
	if r := h.next(); !errors.Is(r.err, ErrTimeout) || r.wait != 100*time.Millisecond {
		t.Fatalf("got %v after %s, want ErrTimeout after 100ms", r.err, r.wait)
	}
	if h.s.taken != 0 {
		t.Fatal("a timed-out waiter took a slot")
	}
}

// TestOverloadSwitchesToLIFOAndDrops: a queue that stands for a whole
// interval (never empty, smallest delay above target) is overloaded; then the
// newest request is served first and requests that waited over 2 x target
// are dropped, not started.
func TestOverloadSwitchesToLIFOAndDrops(t *testing.T) {
	h := newHarness(t, rules.Queue{Target: rules.Duration(5 * time.Millisecond), Interval: rules.Duration(100 * time.Millisecond)})
	h.enqueue(context.Background(), "old", 1) // t=0
	h.clk.Advance(60 * time.Millisecond)
	h.enqueue(context.Background(), "stale", 1) // t=60
	h.clk.Advance(41 * time.Millisecond)        // t=101: old timed out at 100
	if r := h.next(); r.name != "old" || !errors.Is(r.err, ErrTimeout) {
		t.Fatalf("got %s %v, want old to time out", r.name, r.err)
	}
	if h.q.Overloaded() {
		t.Fatal("the first interval began with an empty queue, yet counts as overloaded")
	}
	h.clk.Advance(49 * time.Millisecond)
	h.enqueue(context.Background(), "x", 1) // t=150
	h.clk.Advance(52 * time.Millisecond)    // t=202: stale timed out at 160
	if r := h.next(); r.name != "stale" || !errors.Is(r.err, ErrTimeout) {
		t.Fatalf("got %s %v, want stale to time out", r.name, r.err)
	}
	if !h.q.Overloaded() {
		t.Fatal("an interval with a standing queue of 52ms or more is not overloaded")
	}
	h.enqueue(context.Background(), "new1", 1) // t=202, may wait 10ms now
	h.enqueue(context.Background(), "new2", 1)
	h.free(2)
	got := map[string]result{}
	for range 3 {
		r := h.next()
		got[r.name] = r
	}
	if got["new2"].err != nil || got["new1"].err != nil || got["new2"].slot != 1 || got["new1"].slot != 2 {
		t.Fatalf("want new2 then new1 served (adaptive LIFO), got %+v", got)
	}
	if !errors.Is(got["x"].err, ErrTimeout) || h.s.taken != 2 {
		t.Fatalf("x waited 52ms > 2 x target while overloaded: got %v, want dropped", got["x"].err)
	}
	// An interval in which the queue drains by service ends the overload.
	h.clk.Advance(101 * time.Millisecond)
	h.enqueue(context.Background(), "fast", 1)
	h.free(1)
	h.next()
	h.clk.Advance(101 * time.Millisecond)
	if h.q.Overloaded() {
		t.Fatal("still overloaded after an interval in which the queue drained")
	}
}

// Under consistent shedding each user cohort of a class has its own
// ceiling: a waiter of a low cohort the limit refuses must not hold back one
// of a higher cohort behind it that the limit admits (which then timed out
// while its slot stayed free), in FIFO and in LIFO order.
func TestLowCohortDoesNotBlockAHigherCohortOfItsClass(t *testing.T) {
	for _, overloaded := range []bool{false, true} {
		t.Run(fmt.Sprintf("overloaded=%v", overloaded), func(t *testing.T) {
			h := newHarness(t, rules.Queue{Target: rules.Duration(5 * time.Millisecond), Interval: rules.Duration(100 * time.Millisecond)})
			h.s.minCohort = 8
			if overloaded {
				// A queue that stands through the interval [101ms, 202ms).
				h.enqueue(context.Background(), "standing", 1)
				h.clk.Advance(60 * time.Millisecond)
				h.enqueue(context.Background(), "standing", 1)
				h.clk.Advance(41 * time.Millisecond)
				h.next()
				h.q.Overloaded() // the first interval ends
				h.clk.Advance(49 * time.Millisecond)
				h.enqueue(context.Background(), "standing", 1)
				h.clk.Advance(52 * time.Millisecond)
				h.next()
				if !h.q.Overloaded() {
					t.Fatal("not overloaded after an interval with a standing queue")
				}
				h.clk.Advance(49 * time.Millisecond) // the last one times out
				h.next()
			}
			h.enqueueCohort(context.Background(), "low-old", 1, 0)
			h.enqueueCohort(context.Background(), "high", 1, 15)
			h.enqueueCohort(context.Background(), "low-new", 1, 1)
			h.enqueueCohort(context.Background(), "batch", 3, 15)
			h.free(2)
			if r := h.next(); r.name != "high" || r.err != nil {
				t.Fatalf("%s finished (%v), want high started", r.name, r.err)
			}
			if h.q.Len() != 3 || h.s.taken != 1 {
				t.Fatalf("%d waiting, %d started; want the low cohorts and batch waiting, batch behind a refused class", h.q.Len(), h.s.taken)
			}
			h.s.mu.Lock()
			h.s.minCohort = 0
			h.s.mu.Unlock()
			h.q.Dispatch()
			h.next()
			h.free(2)
			h.next()
			h.next()
		})
	}
}

func TestExpiredDeadlineNeverStarts(t *testing.T) {
	h := newHarness(t, rules.Queue{})
	ctx, cancel := context.WithDeadline(context.Background(), h.clk.Now().Add(20*time.Millisecond))
	defer cancel()
	h.enqueue(ctx, "a", 0)
	h.clk.Advance(30 * time.Millisecond)
	h.free(1)
	if r := h.next(); !errors.Is(r.err, ErrExpired) {
		t.Fatalf("got %v, want ErrExpired", r.err)
	}
	if h.s.taken != 0 {
		t.Fatal("a request past its deadline was started")
	}
	if _, _, err := h.q.Wait(ctx, 0, 0); !errors.Is(err, ErrExpired) {
		t.Fatalf("Wait with a passed deadline: %v, want ErrExpired", err)
	}
}

func TestCanceledContextLeaves(t *testing.T) {
	h := newHarness(t, rules.Queue{})
	ctx, cancel := context.WithCancel(context.Background())
	h.enqueue(ctx, "a", 0)
	cancel()
	if r := h.next(); !errors.Is(r.err, ErrExpired) {
		t.Fatalf("got %v, want ErrExpired", r.err)
	}
	if h.q.Len() != 0 {
		t.Fatal("a canceled waiter stayed in the queue")
	}
}

func TestFullQueueRefuses(t *testing.T) {
	h := newHarness(t, rules.Queue{MaxLength: 2})
	h.enqueue(context.Background(), "a", 0)
	h.enqueue(context.Background(), "b", 0)
	if _, _, err := h.q.Wait(context.Background(), 0, 0); !errors.Is(err, ErrFull) {
		t.Fatalf("third waiter: %v, want ErrFull", err)
	}
	h.free(2)
	h.next()
	h.next()
}

func TestNewRefusesBadConfig(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	acq := func(int, uint32) (uint32, bool) { return 0, false }
	tests := []struct {
		name string
		cfg  rules.Queue
		clk  clock.Clock
		acq  AcquireFunc
	}{
		{"negative target", rules.Queue{Target: -1}, clk, acq},
		{"negative length", rules.Queue{MaxLength: -1}, clk, acq},
		{"no clock", rules.Queue{}, nil, acq},
		{"no acquire", rules.Queue{}, clk, nil},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg, tt.clk, tt.acq); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
	}
}

// Under a steady overload (two arrivals per slot freed), adaptive LIFO serves
// the newest request at once. That must not read as "no standing queue":
// the queue must stay overloaded, serving newest first within 2 x Target,
// instead of flapping back to FIFO every other interval and serving requests
// that stood in a queue of a hundred for tens of milliseconds.
func TestSteadyOverloadDoesNotFlapBackToAStandingQueue(t *testing.T) {
	h := newHarness(t, rules.Queue{Target: rules.Duration(5 * time.Millisecond), Interval: rules.Duration(100 * time.Millisecond)})
	h.results = make(chan result, 4096)
	started, finished := 0, 0
	var worst time.Duration
	drain := func() {
		for {
			select {
			case r := <-h.results:
				finished++
				if r.err == nil {
					worst = max(worst, r.wait)
				}
			default:
				return
			}
		}
	}
	settled := func() bool {
		drain()
		return started == finished+h.q.Len() && h.q.Len() == h.clk.Pending()
	}
	for ms := 1; ms <= 1500; ms++ {
		for range 2 {
			started++
			go func() {
				slot, wait, err := h.q.Wait(context.Background(), 1, 0)
				h.results <- result{"r", slot, wait, err}
			}()
			h.until(settled)
		}
		h.free(1)
		h.clk.Advance(time.Millisecond)
		h.until(settled)
		if ms == 300 {
			worst = 0 // the first standing queue builds before any interval ends
		}
		if ms > 300 && ms%50 == 0 && !h.q.Overloaded() {
			t.Fatalf("t=%dms: not overloaded under a steady 2x overload (%d waiting)", ms, h.q.Len())
		}
	}
	if worst > 10*time.Millisecond {
		t.Fatalf("a request served after t=300ms waited %v, want at most 2 x Target", worst)
	}
}

// TestFullQueueMakesRoomForAHigherClass: a queue full of batch requests must
// not shed a critical one at the door: the oldest waiting request of the
// lowest class below it gives up its place (ErrFull), as it would have been
// shed had it arrived last. A request of the lowest class waiting finds no
// one to displace and is shed itself.
func TestFullQueueMakesRoomForAHigherClass(t *testing.T) {
	h := newHarness(t, rules.Queue{MaxLength: 2})
	ctx := context.Background()
	h.enqueue(ctx, "batch-1", 3)
	h.enqueue(ctx, "browse-1", 2)
	if _, _, err := h.q.Wait(ctx, 3, 0); !errors.Is(err, ErrFull) {
		t.Fatalf("batch into a full queue: %v, want ErrFull", err)
	}
	pending := h.clk.Pending() // the displaced request's timer stops, the new one's starts
	go func() {
		slot, wait, err := h.q.Wait(ctx, 0, 0)
		h.results <- result{"critical", slot, wait, err}
	}()
	r := <-h.results
	if r.name != "batch-1" || !errors.Is(r.err, ErrFull) {
		t.Fatalf("first result %s: %v, want batch-1 displaced with ErrFull", r.name, r.err)
	}
	h.until(func() bool { return h.q.Len() == 2 && h.clk.Pending() == pending })
	// Another critical one displaces browse; a third finds only critical
	// requests ahead and is shed.
	go func() {
		slot, wait, err := h.q.Wait(ctx, 0, 0)
		h.results <- result{"critical-2", slot, wait, err}
	}()
	if r := <-h.results; r.name != "browse-1" || !errors.Is(r.err, ErrFull) {
		t.Fatalf("second result %s: %v, want browse-1 displaced with ErrFull", r.name, r.err)
	}
	h.until(func() bool { return h.q.Len() == 2 && h.clk.Pending() == pending })
	if _, _, err := h.q.Wait(ctx, 0, 0); !errors.Is(err, ErrFull) {
		t.Fatalf("critical into a queue full of critical: %v, want ErrFull", err)
	}
	h.s.add(2)
	h.q.Dispatch()
	for range 2 {
		if r := <-h.results; r.err != nil {
			t.Fatalf("%s: %v, want served", r.name, r.err)
		}
	}
}
