package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"governor.dev/governor/sdk/retry"
	"governor.dev/governor/sdk/rules"
)

func ExampleRetrier_Do() {
	r, err := retry.New(rules.Retry{MaxAttempts: 3, BaseBackoff: rules.Duration(time.Millisecond)}, retry.Options{})
	if err != nil {
		panic(err)
	}
	calls := 0
	err = r.Do(context.Background(), func(context.Context) error {
		calls++
		if calls == 1 {
			return errors.New("connection reset")
		}
		return nil
	})
	fmt.Println(calls, err)
	// Output: 2 <nil>
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, ok := retry.ParseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now)
	fmt.Println(d, ok)
	d, ok = retry.ParseRetryAfter("5", now)
	fmt.Println(d, ok)
	// Output:
	// 30s true
	// 5s true
}
