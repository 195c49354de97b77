package outbound_test

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"governor.dev/governor/sdk/breaker"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/outbound"
	"governor.dev/governor/sdk/rules"
)

func Example() {
	set, err := outbound.New(outbound.Options{Service: "checkout", Registerer: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	// The Governor calls Apply with each ruleset's downstreams; a Set also
	// works on its own.
	err = set.Apply([]rules.Downstream{{
		Name:     "payments",
		Breaker:  &rules.Breaker{MinCalls: 2},
		Bulkhead: &rules.Bulkhead{MaxConcurrent: 10},
	}})
	if err != nil {
		panic(err)
	}
	d := set.Get("payments")
	clk := clock.Real{}
	for range 3 {
		call, err := d.Begin(clk.Nanotime())
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Println("refused:", err)
			continue
		}
		// ... call the payments service; it fails ...
		call.End(clk.Nanotime(), true, false)
	}
	// Output: refused: outbound: call to payments refused: breaker: open
}
