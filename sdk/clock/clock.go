// Package clock is the time source of every Governor algorithm.
//
// Algorithms never call time.Now themselves: they take a Clock, so tests and the
// overload simulator drive them in virtual time (see Fake), and the hot path can
// use a cheap coarse clock (see Coarse) instead of a ~40 ns system clock read.
package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the wall-clock time (with a monotonic reading where the
	// implementation has one).
	Now() time.Time
	// Nanotime returns monotonic nanoseconds since an arbitrary, fixed origin.
	// It is the time the hot path uses: comparable, subtractable, never going back.
	Nanotime() int64
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Sleep waits d on c, or until ctx ends: it returns ctx.Err() then, and nil
// when d passed. A d of zero or less returns ctx.Err() at once.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Real is the system clock.
type Real struct{}

var origin = time.Now()

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Nanotime returns the monotonic time since the process started.
func (Real) Nanotime() int64 { return int64(time.Since(origin)) }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Coarse is a clock whose Nanotime is an atomic load, refreshed by one
// background goroutine every resolution. Use it where a ~40 ns clock read per
// request matters more than sub-millisecond precision. Close stops it.
//
// The refreshing goroutine waits for a CPU like any other: while the
// process's goroutines queue for the CPUs (a CPU-bound overload, more so at
// GOMAXPROCS=1, where every goroutine the net/http server starts takes the
// place next in line), the reading can fall behind the real time by as long
// as that queue, hundreds of milliseconds. A reader that must not lag that
// far calls Refresh now and then (one call in N), which also brings the
// reading up to date for every other reader.
type Coarse struct {
	now  atomic.Int64
	stop chan struct{}
	once sync.Once
}

// NewCoarse starts a coarse clock with the given resolution (1 ms if <= 0).
func NewCoarse(resolution time.Duration) *Coarse {
	if resolution <= 0 {
		resolution = time.Millisecond
	}
	c := &Coarse{stop: make(chan struct{})}
	c.now.Store(Real{}.Nanotime())
	go func() {
		t := time.NewTicker(resolution)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.Refresh()
			case <-c.stop:
				return
			}
		}
	}()
	return c
}

// Now returns the precise wall-clock time.
func (c *Coarse) Now() time.Time { return time.Now() }

// Nanotime returns the last refreshed monotonic reading.
func (c *Coarse) Nanotime() int64 { return c.now.Load() }

// Refresh reads the system's monotonic clock, makes it the reading Nanotime
// returns unless a later one is there already, and returns the reading. It
// costs a system clock read and a compare-and-swap; the reading never goes
// back.
func (c *Coarse) Refresh() int64 {
	now := Real{}.Nanotime()
	for {
		old := c.now.Load()
		if old >= now {
			return old
		}
		if c.now.CompareAndSwap(old, now) {
			return now
		}
	}
}

// NewTimer wraps time.NewTimer.
func (c *Coarse) NewTimer(d time.Duration) Timer { return Real{}.NewTimer(d) }

// Close stops the refreshing goroutine. It is safe to call more than once.
func (c *Coarse) Close() { c.once.Do(func() { close(c.stop) }) }

// Fake is a manually advanced clock for deterministic tests and simulation.
// It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	start  time.Time
	nanos  atomic.Int64
	timers []*fakeTimer
}

// NewFake returns a fake clock reading start (the Unix epoch if zero).
func NewFake(start time.Time) *Fake {
	if start.IsZero() {
		start = time.Unix(0, 0).UTC()
	}
	return &Fake{start: start}
}

// Now returns the virtual wall-clock time.
func (f *Fake) Now() time.Time { return f.start.Add(time.Duration(f.nanos.Load())) }

// Nanotime returns virtual nanoseconds since the fake clock was made.
func (f *Fake) Nanotime() int64 { return f.nanos.Load() }

// Advance moves the clock forward by d and fires every timer that is due, in
// order of their deadlines.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Fake.Advance with a negative duration")
	}
	f.mu.Lock()
	target := f.nanos.Load() + int64(d)
	for {
		next := -1
		for i, t := range f.timers {
			if t.at <= target && (next < 0 || t.at < f.timers[next].at) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		t := f.timers[next]
		f.timers = append(f.timers[:next], f.timers[next+1:]...)
		if t.at > f.nanos.Load() {
			f.nanos.Store(t.at)
		}
		t.ch <- f.start.Add(time.Duration(t.at))
	}
	f.nanos.Store(target)
	f.mu.Unlock()
}

// Set moves the clock to t if t is later than the current reading.
func (f *Fake) Set(t time.Time) {
	if d := t.Sub(f.Now()); d > 0 {
		f.Advance(d)
	}
}

// Pending returns the number of timers that have not fired or been stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// NewTimer returns a timer that fires when the clock is advanced past d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1)}
	f.mu.Lock()
	t.at = f.nanos.Load() + int64(d)
	if d <= 0 {
		t.ch <- f.start.Add(time.Duration(t.at))
	} else {
		f.timers = append(f.timers, t)
	}
	f.mu.Unlock()
	return t
}

type fakeTimer struct {
	f  *Fake
	at int64
	ch chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, o := range t.f.timers {
		if o == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}
