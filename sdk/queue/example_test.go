package queue_test

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"governor.dev/governor/sdk/clock"
	"governor.dev/governor/sdk/queue"
	"governor.dev/governor/sdk/rules"
)

// A request that finds the limit full waits in the queue until a release
// dispatches a slot to it.
func ExampleQueue() {
	clk := clock.NewFake(time.Now())
	free := 0
	q, _ := queue.New(rules.Queue{Target: rules.Duration(5 * time.Millisecond)}, clk,
		func(class int, cohort uint32) (uint32, bool) {
			if free == 0 {
				return 0, false
			}
			free--
			return 7, true
		})
	done := make(chan string)
	go func() {
		slot, _, err := q.Wait(context.Background(), 1, 0)
		done <- fmt.Sprint("slot ", slot, " err ", err)
	}()
	for q.Len() == 0 || clk.Pending() == 0 {
		runtime.Gosched() // wait until the request is queued
	}
	free = 1
	q.Dispatch() // what a release does
	fmt.Println(<-done)
	// Output: slot 7 err <nil>
}
