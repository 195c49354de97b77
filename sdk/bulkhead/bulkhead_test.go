package bulkhead

import (
	"context"
	"errors"
	"testing"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

type fakeLimiter struct {
	limit    int
	observed []int64
	dropped  []bool
}

func (f *fakeLimiter) Limit() int { return f.limit }
func (f *fakeLimiter) Observe(_, rtt int64, _ int, dropped bool) {
	f.observed = append(f.observed, rtt)
	f.dropped = append(f.dropped, dropped)
}

func TestCapIsEnforced(t *testing.T) {
	tests := []struct {
		name    string
		max     int
		limiter *fakeLimiter
		want    int
	}{
		{"fixed", 3, nil, 3},
		{"adaptive below max", 10, &fakeLimiter{limit: 2}, 2},
		{"adaptive capped by max", 4, &fakeLimiter{limit: 50}, 4},
		{"adaptive never below one", 4, &fakeLimiter{limit: 0}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{}
			if tt.limiter != nil {
				opts.Limiter = tt.limiter
			}
			b, err := New(rules.Bulkhead{MaxConcurrent: tt.max}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if b.Limit() != tt.want {
				t.Fatalf("Limit = %d, want %d", b.Limit(), tt.want)
			}
			for i := 1; i <= tt.want; i++ {
				n, err := b.Acquire()
				if err != nil || n != i {
					t.Fatalf("Acquire %d = %d, %v", i, n, err)
				}
			}
			if _, err := b.Acquire(); !errors.Is(err, ErrFull) {
				t.Fatalf("Acquire over the cap = %v, want ErrFull", err)
			}
			if b.InFlight() != tt.want {
				t.Fatalf("InFlight = %d after a refusal", b.InFlight())
			}
			b.Release(0, 5, tt.want, false)
			if _, err := b.Acquire(); err != nil {
				t.Fatalf("Acquire after Release = %v", err)
			}
			b.Cancel()
			if _, err := b.Acquire(); err != nil {
				t.Fatalf("Acquire after Release = %v", err)
			}
			if n, over := b.Force(); !over || n != tt.want+1 {
				t.Fatalf("Force = %d, %v; want %d, true", n, over, tt.want+1)
			}
		})
	}
}

func TestDoRunsFallbackWhenFull(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	lim := &fakeLimiter{limit: 1}
	b, _ := New(rules.Bulkhead{MaxConcurrent: 5}, Options{Limiter: lim, Clock: clk})
	ctx := context.Background()
	var fellBack error
	fallback := func(_ context.Context, err error) error { fellBack = err; return nil }
	err := b.Do(ctx, func(ctx context.Context) error {
		// The only slot is taken: a nested call falls back.
		if err := b.Do(ctx, func(context.Context) error { t.Fatal("ran without a slot"); return nil }, fallback); err != nil {
			t.Fatalf("fallback result = %v", err)
		}
		if err := b.Do(ctx, func(context.Context) error { return nil }, nil); !errors.Is(err, ErrFull) {
			t.Fatalf("without fallback = %v", err)
		}
		clk.Advance(30 * time.Millisecond)
		return context.DeadlineExceeded
	}, fallback)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(fellBack, ErrFull) {
		t.Fatalf("Do = %v, fallback saw %v", err, fellBack)
	}
	if len(lim.observed) != 1 || lim.observed[0] != int64(30*time.Millisecond) || !lim.dropped[0] {
		t.Fatalf("limiter saw %v %v", lim.observed, lim.dropped)
	}
	if b.InFlight() != 0 {
		t.Fatalf("InFlight = %d after Do", b.InFlight())
	}
}

// A panicking fn must give its slot back, or panics recovered further up (a
// recovery middleware) fill the bulkhead for good; the panic goes on up and
// the adaptive cap hears of the call, not as an overload drop.
func TestDoReleasesSlotWhenFnPanics(t *testing.T) {
	lim := &fakeLimiter{limit: 2}
	b, err := New(rules.Bulkhead{MaxConcurrent: 2}, Options{Limiter: lim, Clock: clock.NewFake(time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Fatalf("recovered %v, want the panic of fn", p)
				}
			}()
			_ = b.Do(context.Background(), func(context.Context) error { panic("boom") }, nil)
		}()
	}
	if n := b.InFlight(); n != 0 {
		t.Fatalf("in flight after two panicking calls = %d, want 0", n)
	}
	if len(lim.dropped) != 2 || lim.dropped[0] || lim.dropped[1] {
		t.Fatalf("limiter saw drops %v, want two calls that were not dropped", lim.dropped)
	}
	if err := b.Do(context.Background(), func(context.Context) error { return nil }, nil); err != nil {
		t.Fatalf("a healthy call after the panics was refused: %v", err)
	}
}

// hookLimiter runs hook (once) inside Limit, which Acquire calls while it
// decides: a way to interleave another goroutine's calls deterministically.
type hookLimiter struct {
	limit int
	hook  func()
}

func (h *hookLimiter) Limit() int {
	if f := h.hook; f != nil {
		h.hook = nil
		f()
	}
	return h.limit
}
func (h *hookLimiter) Observe(int64, int64, int, bool) {}

// Two calls racing for the one slot a release frees: one of them gets it.
// Counting a refused call in flight for a moment refused both.
func TestRacingAcquiresForAFreedSlotAdmitOne(t *testing.T) {
	lim := &hookLimiter{limit: 1}
	b, err := New(rules.Bulkhead{MaxConcurrent: 1}, Options{Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	var other error
	lim.hook = func() {
		b.Release(0, 0, n, false) // the holder ends
		_, other = b.Acquire()    // and another call asks meanwhile
	}
	_, mine := b.Acquire()
	if (mine == nil) == (other == nil) {
		t.Fatalf("racing acquires for one freed slot: %v and %v, want exactly one admitted", mine, other)
	}
	if b.InFlight() != 1 {
		t.Fatalf("InFlight = %d, want 1", b.InFlight())
	}
}

// A slot given back twice (End and Cancel of one call, a caller's bug)
// must not raise the cap for good: the count never goes below zero.
func TestReleaseTwiceDoesNotRaiseTheCap(t *testing.T) {
	b, err := New(rules.Bulkhead{MaxConcurrent: 2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	b.Release(0, 0, n, false)
	b.Release(0, 0, n, false)
	b.Cancel()
	if got := b.InFlight(); got != 0 {
		t.Fatalf("InFlight = %d after extra releases, want 0", got)
	}
	for i := range 2 {
		if _, err := b.Acquire(); err != nil {
			t.Fatalf("Acquire %d = %v", i, err)
		}
	}
	if _, err := b.Acquire(); !errors.Is(err, ErrFull) {
		t.Fatalf("third Acquire on a cap of 2 = %v, want ErrFull", err)
	}
}

func TestInheritSharesInFlight(t *testing.T) {
	old, _ := New(rules.Bulkhead{MaxConcurrent: 5}, Options{})
	for range 3 {
		if _, err := old.Acquire(); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := New(rules.Bulkhead{MaxConcurrent: 4}, Options{Inherit: old})
	if _, err := b.Acquire(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(); !errors.Is(err, ErrFull) {
		t.Fatalf("Acquire = %v: calls running on the old bulkhead must count", err)
	}
	old.Release(0, 0, 3, false) // an old call ends: a slot frees in the new one
	if _, err := b.Acquire(); err != nil || b.InFlight() != 4 || old.Limit() != 5 {
		t.Fatalf("Acquire = %v, InFlight %d, old limit %d", err, b.InFlight(), old.Limit())
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(rules.Bulkhead{}, Options{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v", err)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	bh, _ := New(rules.Bulkhead{MaxConcurrent: 1 << 20}, Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n, err := bh.Acquire()
			if err != nil {
				b.Fatal(err)
			}
			bh.Release(0, 0, n, false)
		}
	})
}

// BenchmarkAcquireReleaseAtCap is the contended case: more goroutines
// than slots, so calls are refused and slots change hands.
func BenchmarkAcquireReleaseAtCap(b *testing.B) {
	bh, _ := New(rules.Bulkhead{MaxConcurrent: 2}, Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if n, err := bh.Acquire(); err == nil {
				bh.Release(0, 0, n, false)
			}
		}
	})
}

type constLimiter int

func (c constLimiter) Limit() int                    { return int(c) }
func (constLimiter) Observe(int64, int64, int, bool) {}

// BenchmarkDo is the guarded call as a service makes it, with an adaptive
// cap and the real clock.
func BenchmarkDo(b *testing.B) {
	bh, _ := New(rules.Bulkhead{MaxConcurrent: 1 << 20}, Options{Limiter: constLimiter(1 << 20)})
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := bh.Do(ctx, fn, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
