package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func Example() {
	clk := clock.NewFake(time.Time{})
	b, err := breaker.New(rules.Breaker{MinCalls: 5, OpenBase: rules.Duration(time.Second), HalfOpenProbes: 1},
		breaker.Options{OnStateChange: func(from, to breaker.State) { fmt.Println(from, "->", to) }})
	if err != nil {
		panic(err)
	}
	call := func(fail bool) error {
		now := clk.Nanotime()
		tk, err := b.Allow(now)
		if err != nil {
			return err
		}
		b.Record(tk, now, 10*time.Millisecond, fail)
		return nil
	}
	for range 5 {
		_ = call(true)
	}
	fmt.Println(errors.Is(call(false), breaker.ErrOpen))
	clk.Advance(time.Second)
	_ = call(false) // the probe succeeds
	// Output:
	// closed -> open
	// true
	// open -> half-open
	// half-open -> closed
}
