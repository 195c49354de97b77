package governor_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	governor "governor.dev/governor/sdk"
	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/rules"
)

// Admission around a unit of work: Admit before, Release after with the
// measured latency.
func ExampleGovernor_Admit() {
	g, err := governor.New(governor.DefaultOptions("checkout"))
	if err != nil {
		panic(err)
	}
	defer g.Close()
	err = g.Apply(&rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
		Name:        "orders",
		Match:       rules.Match{PathPrefix: "/orders"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 2},
	}}}, 1)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var held []governor.Permit
	for i := range 3 {
		p, err := g.Admit(ctx, governor.Request{Path: "/orders/42", Method: "POST", Priority: "critical"})
		if err != nil {
			fmt.Printf("request %d: %v\n", i, err)
			continue
		}
		fmt.Printf("request %d: admitted by route %s\n", i, p.Route())
		held = append(held, p)
	}
	for _, p := range held {
		p.Release(12*time.Millisecond, governor.Success)
	}
	// Output:
	// request 0: admitted by route orders
	// request 1: admitted by route orders
	// request 2: governor: shed (route "orders", class critical, retry after 1s)
}

// Priority classes: under the same load, batch gives way before core, and
// critical keeps the reserved headroom.
func ExampleGovernor_Admit_priority() {
	opts := governor.DefaultOptions("search")
	opts.Clock = clock.NewFake(time.Time{})
	opts.Shards = 1
	g, _ := governor.New(opts)
	defer g.Close()
	_ = g.Apply(&rules.Ruleset{Service: "search", Routes: []rules.Route{{
		Name:        "all",
		Match:       rules.Match{PathPrefix: "/"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 10},
		Shedding:    &rules.Shedding{Reserved: 0.2},
	}}}, 1)
	admitted := map[string]int{}
	for _, class := range []string{"batch", "core", "critical"} {
		for {
			if _, err := g.Admit(context.Background(), governor.Request{Path: "/q", Priority: class}); err != nil {
				break
			}
			admitted[class]++
		}
	}
	fmt.Println("batch:", admitted["batch"], "core:", admitted["core"], "critical:", admitted["critical"])
	// Output: batch: 6 core: 2 critical: 2
}

// Apply refuses an invalid ruleset with field-level errors and keeps the
// rules in force.
func ExampleGovernor_Apply() {
	g, _ := governor.New(governor.DefaultOptions("checkout"))
	defer g.Close()
	bad := &rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
		Name:      "orders",
		Match:     rules.Match{PathPrefix: "/orders"},
		RateLimit: &rules.RateLimit{Rate: -1},
	}}}
	err := g.Apply(bad, 7)
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		for _, fe := range ve.Errors {
			fmt.Println(fe.Field+":", fe.Problem)
		}
	}
	fmt.Println("version in force:", g.Version())
	// Output:
	// routes[0].rate_limit.rate: must be a finite number above 0, got -1
	// version in force: 0
}

// Shadow mode evaluates a rule and counts what it would reject, rejecting
// nothing: a safe way to try a new limit in production.
func ExampleGovernor_Admit_shadow() {
	g, _ := governor.New(governor.DefaultOptions("checkout"))
	defer g.Close()
	_ = g.Apply(&rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
		Name:      "orders",
		Match:     rules.Match{PathPrefix: "/"},
		Mode:      rules.ModeShadow,
		RateLimit: &rules.RateLimit{Rate: 1, Burst: 1},
	}}}, 1)
	refused := 0
	for range 5 {
		p, err := g.Admit(context.Background(), governor.Request{Path: "/orders"})
		if err != nil {
			refused++
		}
		p.Release(time.Millisecond, governor.Success)
	}
	fmt.Println("refused:", refused)
	// Output: refused: 0
}

// A Rejection tells why and when to retry; errors.Is matches its reason.
func ExampleRejection() {
	var err error = &governor.Rejection{Reason: governor.ReasonRateLimited, Route: "orders", Class: rules.ClassBrowse, RetryAfter: 1500 * time.Millisecond}
	var rej *governor.Rejection
	if errors.As(err, &rej) {
		fmt.Println(errors.Is(err, governor.ErrRateLimited), errors.Is(err, governor.ErrRejected), rej.RetryAfterSeconds())
	}
	// Output: true true 2
}

// A fresh instance ramps its limits up: here from 20% of a concurrency limit
// of 50 to all of it over a minute.
func ExampleGovernor_Limit() {
	clk := clock.NewFake(time.Time{})
	opts := governor.DefaultOptions("checkout")
	opts.Clock = clk
	g, _ := governor.New(opts)
	defer g.Close()
	_ = g.Apply(&rules.Ruleset{Service: "checkout", Routes: []rules.Route{{
		Name:        "orders",
		Match:       rules.Match{PathPrefix: "/"},
		Concurrency: &rules.Concurrency{Algorithm: rules.AlgorithmFixed, Max: 50},
		WarmUp:      &rules.WarmUp{InitialFraction: 0.2, Period: rules.Duration(time.Minute)},
	}}}, 1)
	for range 4 {
		l, _ := g.Limit("orders")
		fmt.Println(l)
		clk.Advance(20 * time.Second)
	}
	// Output:
	// 10
	// 23
	// 36
	// 50
}

// The overload throttle is on by default with the Go runtime's scheduling
// latency as its signal; here it acts above a 20ms mean per 200ms window,
// for a process that sees up to 10ms at its busiest healthy load. Set
// Disabled to turn it off.
func ExampleOverloadOptions() {
	opts := governor.DefaultOptions("checkout")
	opts.Overload = governor.OverloadOptions{Target: 20 * time.Millisecond, Window: 200 * time.Millisecond}
	g, err := governor.New(opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	level, _ := g.OverloadLevel()
	fmt.Println("classes shed:", level)
	// Output: classes shed: 0
}
