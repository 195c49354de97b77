package recommend

import (
	"fmt"
	"math"

	"governor.dev/governor/sdk/rules"
)

// DefaultOpenDeadband is the default Proposer.OpenDeadband: a move of at
// most 10% of the open proposal's values keeps its ruleset.
const DefaultOpenDeadband = 0.1

// smallMove says whether next differs from the open proposal's ruleset
// only by rate ceilings and concurrency bounds (rate, initial, max) each
// within deadband of the open proposal's value, and if so why its ruleset is
// kept.
// Any other difference (routes, breakers, timeouts, ...) is not small.
func smallMove(open, next *rules.Ruleset, deadband float64) (string, bool) {
	if open == nil || next == nil || len(open.Routes) != len(next.Routes) {
		return "", false
	}
	norm := next.Clone()
	largest := 0.0
	ok := true
	// near moves b to a when it lies within the deadband of a.
	near := func(a float64, b *float64) {
		d := 0.0
		switch {
		case a == *b:
		case a > 0:
			d = math.Abs(*b-a) / a
		default:
			d = math.Inf(1)
		}
		if d > deadband+1e-9 {
			ok = false
			return
		}
		largest = max(largest, d)
		*b = a
	}
	nearInt := func(a int, b *int) {
		f := float64(*b)
		near(float64(a), &f)
		if ok {
			*b = a
		}
	}
	for i := range norm.Routes {
		a, b := &open.Routes[i], &norm.Routes[i]
		if a.Name != b.Name {
			return "", false
		}
		if a.RateLimit != nil && b.RateLimit != nil {
			near(a.RateLimit.Rate, &b.RateLimit.Rate)
		}
		if a.Concurrency != nil && b.Concurrency != nil {
			nearInt(a.Concurrency.Max, &b.Concurrency.Max)
			nearInt(a.Concurrency.Initial, &b.Concurrency.Initial)
		}
		if !ok {
			return "", false
		}
	}
	sa, err := open.Checksum()
	if err != nil {
		return "", false
	}
	sb, err := norm.Checksum()
	if err != nil || sa != sb {
		return "", false
	}
	return fmt.Sprintf("kept the open proposal's ruleset: rate ceilings and concurrency bounds move by at most %.1f%%, inside the deadband of %.1f%%, and nothing else changes",
		100*largest, 100*deadband), true
}
