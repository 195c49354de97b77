package window_test

import (
	"fmt"
	"time"

	"governor.dev/governor/sdk/breaker/window"
)

func Example() {
	r := window.New(10*time.Second, 0) // 8 buckets of 1.25s
	sec := int64(time.Second)
	r.Add(0, 0, 1)            // a call at 0s
	r.Add2(5*sec, 0, 1, 1, 1) // a call and a failure at 5s
	fmt.Println(r.Sum(5 * sec))
	fmt.Println(r.Sum(11 * sec)) // the first call has left the window
	// Output:
	// [2 1 0]
	// [1 1 0]
}
