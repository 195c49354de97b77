package shed_test

import (
	"fmt"
	"time"

	"governor.dev/governor/sdk/rules"
	"governor.dev/governor/sdk/shed"
)

// The in-flight ceiling of each class for a limit of 100 with 10% reserved
// for critical traffic.
func ExampleThresholds() {
	c := shed.Thresholds(100, 0.1)
	for rank, class := range rules.Classes {
		fmt.Println(class, c[rank])
	}
	// Output:
	// critical 100
	// core 90
	// browse 81
	// batch 72
}

// Priorities come as digits or names; aliases map business names to classes.
func ExampleClassifier_Classify() {
	c := shed.NewClassifier(&rules.Priority{Aliases: map[string]rules.Class{"payment": rules.ClassCritical}})
	for _, v := range []string{"0", "6", "batch", "payment", "unknown"} {
		fmt.Println(v, "->", rules.Classes[c.Classify(v)])
	}
	// Output:
	// 0 -> critical
	// 6 -> browse
	// batch -> batch
	// payment -> critical
	// unknown -> core
}

// Consistent shedding: a user's cohort is stable within an epoch, so the
// same users give way first.
func ExampleCeilings_ForCohort() {
	c := shed.Thresholds(200, 0.1)
	low, high := c.ForCohort(3, 0), c.ForCohort(3, shed.Cohorts-1)
	fmt.Println("batch ceilings from", low, "to", high)
	fmt.Println(shed.Cohort("user-42", 1) == shed.Cohort("user-42", 1))
	// Output:
	// batch ceilings from 130 to 144
	// true
}

// At a saturated server's small limit the critical class gets room for its
// measured concurrency beyond the limit; the lower classes keep the
// ceilings of Thresholds and absorb the shedding.
func ExamplePlan() {
	r := shed.NewReserve(time.Second, nil)
	for range 4 { // four critical requests in flight at once
		r.Admitted(0)
	}
	next := int64(time.Second) // the peak counts once its window is complete
	fmt.Println(shed.Thresholds(7, 0.1))
	fmt.Println(shed.Plan(7, 0.1, r.Peak(next)))
	// Output:
	// [7 6 5 4]
	// [13 6 5 4]
}
