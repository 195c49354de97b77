package retry

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func ms(n int) rules.Duration { return rules.Duration(time.Duration(n) * time.Millisecond) }

func TestBackoffIsFullJitterUnderAnExponentialCeiling(t *testing.T) {
	roll := 0.0
	r, err := New(rules.Retry{BaseBackoff: ms(25), MaxBackoff: ms(150)}, Options{Float64: func() float64 { return roll }})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		retry int
		ceil  time.Duration
	}{
		{1, 25 * time.Millisecond},
		{2, 50 * time.Millisecond},
		{3, 100 * time.Millisecond},
		{4, 150 * time.Millisecond},
		{30, 150 * time.Millisecond},
	}
	for _, tt := range tests {
		roll = 0
		if got := r.Backoff(tt.retry); got != 0 {
			t.Fatalf("Backoff(%d) with roll 0 = %v, want 0", tt.retry, got)
		}
		roll = 0.5
		if got := r.Backoff(tt.retry); got != tt.ceil/2 {
			t.Fatalf("Backoff(%d) with roll 0.5 = %v, want %v", tt.retry, got, tt.ceil/2)
		}
	}
}

// fakeStart is far in the future of real time: the fake clocks start there,
// so a context's deadline set on a fake clock (which the context measures
// against the wall clock) cannot pass in real time while a loaded machine
// runs the test. Started at time.Now, a 40ms deadline sometimes did, and
// Next answered for a done context instead of judging the deadline.
var fakeStart = time.Now().Add(24 * time.Hour).Truncate(time.Hour)

func TestNextDecides(t *testing.T) {
	start := fakeStart
	tests := []struct {
		name       string
		attempts   int
		retryAfter time.Duration
		deadline   time.Duration // from the fake clock's now; 0 = none
		took       time.Duration
		spend      int // retries spent from the budget beforehand
		wantDelay  time.Duration
		wantErr    error
	}{
		{"first retry", 1, 0, 0, 0, 0, 50 * time.Millisecond, nil},
		{"attempts exhausted", 3, 0, 0, 0, 0, 0, ErrAttemptsExhausted},
		{"retry-after is honoured, jittered above", 1, 400 * time.Millisecond, 0, 0, 0, 500 * time.Millisecond, nil},
		{"short retry-after keeps the back-off", 2, time.Millisecond, 0, 0, 0, 100 * time.Millisecond, nil},
		{"retry-after longer than max backoff", 1, 2 * time.Second, 0, 0, 0, 0, ErrRetryAfterTooLong},
		{"deadline before the wait ends", 1, 0, 40 * time.Millisecond, 0, 0, 0, ErrDeadline},
		{"deadline before the retry could finish", 1, 0, 100 * time.Millisecond, 60 * time.Millisecond, 0, 0, ErrDeadline},
		{"deadline far enough", 1, 0, time.Minute, time.Second, 0, 50 * time.Millisecond, nil},
		{"budget exhausted", 1, 0, 0, 0, 10, 0, ErrBudgetExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			r, err := New(rules.Retry{BaseBackoff: ms(100), MaxBackoff: ms(1000), MinPerSecond: 1},
				Options{Clock: clk, Float64: func() float64 { return 0.5 }, BudgetWindow: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			for range tt.spend {
				r.Budget().TryRetry(clk.Nanotime())
			}
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clk.Now().Add(tt.deadline))
				defer cancel()
			}
			d, err := r.Next(ctx, Failure{Attempts: tt.attempts, RetryAfter: tt.retryAfter, Took: tt.took})
			if !errors.Is(err, tt.wantErr) || d != tt.wantDelay {
				t.Fatalf("Next = %v, %v; want %v, %v", d, err, tt.wantDelay, tt.wantErr)
			}
		})
	}
}

// TestNextPlansNoRetryForADoneContext: the caller cancelled (or its deadline
// passed) while the failed attempt was coming back. No retry can follow, so
// Next must say no and leave the budget unspent; before, it planned a retry,
// spent a retry from the budget and the transport counted it as attempted.
func TestNextPlansNoRetryForADoneContext(t *testing.T) {
	clk := clock.NewFake(time.Now())
	r, err := New(rules.Retry{}, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r.Budget().Request(clk.Nanotime())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := r.Next(ctx, Failure{Attempts: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context = %v, %v; want context.Canceled", d, err)
	}
	if got := r.Budget().Ratio(clk.Nanotime()); got != 0 {
		t.Fatalf("budget ratio %v: a retry was spent for a caller that has gone", got)
	}
}

// TestNextMeasuresTheDeadlineOnTheInjectedClock runs the fake clock an hour
// ahead of the wall clock: whether the wait fits before the context's
// deadline must be judged on the Retrier's clock, not on time.Now.
func TestNextMeasuresTheDeadlineOnTheInjectedClock(t *testing.T) {
	clk := clock.NewFake(time.Now().Add(time.Hour))
	r, err := New(rules.Retry{BaseBackoff: ms(100)}, Options{Clock: clk, Float64: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(100*time.Millisecond))
	defer cancel()
	if d, err := r.Next(ctx, Failure{Attempts: 1}); err != nil || d != 50*time.Millisecond {
		t.Fatalf("Next with 100ms left = %v, %v; want 50ms", d, err)
	}
	clk.Advance(60 * time.Millisecond)
	if _, err := r.Next(ctx, Failure{Attempts: 1}); !errors.Is(err, ErrDeadline) {
		t.Fatalf("Next with 40ms left on the fake clock = %v, want ErrDeadline", err)
	}
}

// TestLongDurationsDoNotOverflow builds a Retrier straight from rules that
// did not pass rules.Validate (which caps max_backoff at an hour): a
// MaxBackoff near the largest time.Duration. The exponential ceiling must
// stop at MaxBackoff instead of doubling past it into negative waits, and the
// deadline check must not wrap a huge wait plus the attempt's duration
// around into a "fits".
func TestLongDurationsDoNotOverflow(t *testing.T) {
	clk := clock.NewFake(time.Now())
	r, err := New(rules.Retry{BaseBackoff: ms(25), MaxBackoff: rules.Duration(math.MaxInt64), MaxAttempts: 100},
		Options{Clock: clk, Float64: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	prev := time.Duration(0)
	for n := 1; n <= 100; n++ {
		d := r.Backoff(n)
		if d < prev {
			t.Fatalf("Backoff(%d) = %v, below Backoff(%d) = %v", n, d, n-1, prev)
		}
		prev = d
	}
	if want := time.Duration(0.5 * float64(math.MaxInt64)); prev != want {
		t.Fatalf("Backoff(100) = %v, want half of MaxBackoff (%v)", prev, want)
	}
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Hour))
	defer cancel()
	if d, err := r.Next(ctx, Failure{Attempts: 1, RetryAfter: math.MaxInt64 - 1, Took: time.Minute}); !errors.Is(err, ErrDeadline) {
		t.Fatalf("Next with a Retry-After of centuries = %v, %v; want ErrDeadline", d, err)
	}
}

// TestBudgetCapsAmplification drives many requests against a downstream that
// always fails, each retried as often as MaxAttempts and the budget allow, and
// checks that total attempts / first attempts stays within 1 + budget plus the
// floor's allowance.
func TestBudgetCapsAmplification(t *testing.T) {
	tests := []struct {
		name     string
		rps      int
		budget   float64
		floor    float64
		seconds  int
		attempts int
	}{
		{"busy service, default budget", 300, 0.2, 10, 60, 5},
		{"busy service, tight budget", 400, 0.05, 1, 30, 10},
		{"quiet service, floor dominates", 20, 0.2, 10, 60, 3},
		{"no floor", 200, 0.1, 0, 60, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Time{})
			r, err := New(rules.Retry{MaxAttempts: tt.attempts, Budget: tt.budget, MinPerSecond: tt.floor},
				Options{Clock: clk, BudgetWindow: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if tt.floor == 0 {
				r.budget.floor = 0 // rules treat 0 as "default"; test a pure ratio here
			}
			step := time.Second / time.Duration(tt.rps)
			firsts, total := 0, 0
			for range tt.rps * tt.seconds {
				clk.Advance(step)
				r.Budget().Request(clk.Nanotime())
				firsts++
				for attempt := 1; ; attempt++ {
					total++ // the attempt fails
					if _, err := r.Next(context.Background(), Failure{Attempts: attempt}); err != nil {
						break
					}
				}
			}
			amp := float64(total) / float64(firsts)
			// The floor allows MinPerSecond retries per second, plus one
			// window's worth at the start before any request expires.
			allowance := tt.floor * float64(tt.seconds+10) / float64(firsts)
			if bound := 1 + tt.budget + allowance; amp > bound {
				t.Fatalf("amplification %.4f > bound %.4f", amp, bound)
			}
			if amp < 1+tt.budget*0.9 && tt.attempts > 1 {
				t.Fatalf("amplification %.4f: the budget was not used (%v)", amp, tt.budget)
			}
			t.Logf("amplification %.4f (budget %v, floor %v/s)", amp, tt.budget, tt.floor)
		})
	}
}

func TestBudgetRatio(t *testing.T) {
	b := NewBudget(0.5, 0, time.Second)
	if b.Ratio(0) != 0 {
		t.Fatal("ratio without requests")
	}
	for range 10 {
		b.Request(0)
	}
	for range 8 {
		b.TryRetry(0)
	}
	if got := b.Ratio(0); got != 0.5 {
		t.Fatalf("Ratio = %v, want 0.5 (5 of 8 retries allowed)", got)
	}
}

func TestDoRetriesUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := New(rules.Retry{MaxAttempts: 4, BaseBackoff: ms(10)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		start := time.Now()
		err = r.Do(context.Background(), func(context.Context) error {
			calls++
			if calls < 3 {
				return After(errors.New("busy"), 200*time.Millisecond)
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("Do = %v after %d calls", err, calls)
		}
		if waited := time.Since(start); waited < 400*time.Millisecond {
			t.Fatalf("waited %v, want at least two Retry-After periods", waited)
		}
	})
}

func TestDoStops(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		fn        func(n int) error
		wantCalls int
	}{
		{"permanent error", func(int) error { return Permanent(boom) }, 1},
		{"attempts exhausted", func(int) error { return boom }, 3},
		{"retry-after too long", func(int) error { return After(boom, time.Hour) }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, _ := New(rules.Retry{}, Options{})
				calls := 0
				err := r.Do(context.Background(), func(context.Context) error { calls++; return tt.fn(calls) })
				if !errors.Is(err, boom) || calls != tt.wantCalls {
					t.Fatalf("Do = %v after %d calls, want boom after %d", err, calls, tt.wantCalls)
				}
			})
		})
	}
}

func TestWaitHonoursCancellation(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	r, _ := New(rules.Retry{}, Options{Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Wait(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait(context.Background(), time.Second) }()
	for clk.Pending() == 0 {
		<-time.After(time.Millisecond) // wait for the timer to be armed, not for time to pass
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, c := range []rules.Retry{{MaxAttempts: 101}, {Budget: 1.5}, {MinPerSecond: 2e6}} {
		if _, err := New(c, Options{}); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	d := WithDefaults(rules.Retry{MaxBackoff: ms(1), BaseBackoff: ms(5)})
	if d.MaxAttempts != DefaultMaxAttempts || d.MaxBackoff != ms(5) || d.Budget != DefaultBudget {
		t.Fatalf("defaults %+v", d)
	}
}

// TestRetryCancelledDuringItsBackoffIsGivenBack: the budget allows one
// retry; Next grants it, and the caller goes away during the back-off, so
// the retry is never made. The budget must not count it: the next request's
// retry is allowed and the ratio shows no retry. Before, the phantom retry
// stayed spent for a whole window.
func TestRetryCancelledDuringItsBackoffIsGivenBack(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	r, err := New(rules.Retry{BaseBackoff: ms(100), MinPerSecond: 0.1},
		Options{Clock: clk, Float64: func() float64 { return 0.5 }, BudgetWindow: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.Budget().Request(clk.Nanotime())
	d, err := r.Next(context.Background(), Failure{Attempts: 1})
	if err != nil {
		t.Fatalf("Next = %v, want the one retry the floor allows", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Wait(ctx, d) }()
	for clk.Pending() == 0 {
		<-time.After(time.Millisecond) // wait for the timer to be armed, not for time to pass
	}
	clk.Advance(d / 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if got := r.Budget().Ratio(clk.Nanotime()); got != 0 {
		t.Fatalf("budget ratio %v after a retry that was never made, want 0", got)
	}
	r.Budget().Request(clk.Nanotime())
	if _, err := r.Next(context.Background(), Failure{Attempts: 1}); err != nil {
		t.Fatalf("Next for the next request = %v, want a retry: the cancelled one was not made", err)
	}
}

// A server that refuses a burst of requests with the same Retry-After must
// not get the whole burst back at the same instant: the wait is spread
// uniformly over [RetryAfter, 1.5 x RetryAfter), and the spread never
// carries the retry past the deadline.
func TestRetryAfterWaitsAreSpreadAboveTheServersAsk(t *testing.T) {
	start := fakeStart
	tests := []struct {
		name     string
		rnd      float64
		deadline time.Duration // 0: none
		took     time.Duration
		want     time.Duration
	}{
		{"lowest draw waits what the server asked", 0, 0, 0, 400 * time.Millisecond},
		{"middle draw", 0.5, 0, 0, 500 * time.Millisecond},
		{"highest draw stays below 1.5 x", 0.999, 0, 0, 599800 * time.Microsecond},
		{"spread shrinks to fit the deadline", 0.5, 500 * time.Millisecond, 50 * time.Millisecond, 425 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			r, err := New(rules.Retry{BaseBackoff: ms(10), MaxBackoff: ms(1000)},
				Options{Clock: clk, Float64: func() float64 { return tt.rnd }})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clk.Now().Add(tt.deadline))
				defer cancel()
			}
			d, err := r.Next(ctx, Failure{Attempts: 1, RetryAfter: 400 * time.Millisecond, Took: tt.took})
			if err != nil || d != tt.want {
				t.Fatalf("Next = %v, %v; want %v", d, err, tt.want)
			}
			if dl, ok := ctx.Deadline(); ok && !clk.Now().Add(d+tt.took).Before(dl) {
				t.Fatalf("wait %v plus took %v passes the deadline", d, tt.took)
			}
		})
	}
	// A Retry-After that leaves no room before the deadline is still refused.
	clk := clock.NewFake(start)
	r, _ := New(rules.Retry{}, Options{Clock: clk, Float64: func() float64 { return 0 }})
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(400*time.Millisecond))
	defer cancel()
	if _, err := r.Next(ctx, Failure{Attempts: 1, RetryAfter: 400 * time.Millisecond}); !errors.Is(err, ErrDeadline) {
		t.Fatalf("Next = %v, want ErrDeadline", err)
	}
}
