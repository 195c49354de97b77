package balancer_test

import (
	"fmt"

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
