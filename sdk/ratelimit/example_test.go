package ratelimit_test

import (
	"fmt"
	"time"

	"governor.dev/governor/sdk/ratelimit"
)

// A route's bucket: 10 requests per second, bursts of 3.
func ExampleBucket() {
	b, _ := ratelimit.NewBucket(10, 3, 4)
	now := int64(time.Hour)
	for i := range 4 {
		ok, wait := b.Allow(now, uint32(i), 1)
		fmt.Println(ok, time.Duration(wait))
	}
	// Output:
	// true 0s
	// true 0s
	// true 0s
	// false 100ms
}

// A bucket per client, remembering at most 10000 clients.
func ExampleKeyed() {
	k, _ := ratelimit.NewKeyed(1, 1, 10000)
	now := int64(time.Hour)
	for _, ip := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.2"} {
		ok, _ := k.Allow(ip, now, 1)
		fmt.Println(ip, ok)
	}
	// Output:
	// 10.0.0.1 true
	// 10.0.0.1 false
	// 10.0.0.2 true
}
