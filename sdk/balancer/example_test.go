package balancer_test

import (
	"fmt"
	"time"

	"governor.dev/governor/sdk/balancer"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

func Example() {
	clk := clock.Real{}
	b, err := balancer.New(rules.Balancer{}, balancer.Options{Clock: clk})
	if err != nil {
		panic(err)
	}
	b.Update([]string{"10.0.0.1:8080", "10.0.0.2:8080"})
	p, err := b.Pick(clk.Nanotime())
	if err != nil {
		panic(err)
	}
	// ... call p.Addr() ...
	b.Done(p, clk.Nanotime(), false)
	fmt.Println(len(b.Endpoints()))
	// Output: 2
}

// An endpoint whose calls fail five times in a row is ejected for 30s (60s
// the next time, up to MaxTime); at most 20% of the endpoints, and at least
// one, are ejected at once.
func ExampleEjection() {
	clk := clock.NewFake(time.Time{})
	b, err := balancer.New(rules.Balancer{}, balancer.Options{
		Clock:    clk,
		Ejection: balancer.Ejection{ConsecutiveFailures: 5, BaseTime: 30 * time.Second, MaxShare: 0.2},
	})
	if err != nil {
		panic(err)
	}
	b.Update([]string{"10.0.0.1:8080"})
	for range 5 {
		p, err := b.Pick(clk.Nanotime())
		if err != nil {
			panic(err)
		}
		b.Done(p, clk.Nanotime(), true) // the call failed
	}
	fmt.Println(b.Ejected(clk.Nanotime()))
	clk.Advance(30 * time.Second)
	fmt.Println(b.Ejected(clk.Nanotime()))
	// Output:
	// [10.0.0.1:8080]
	// []
}
