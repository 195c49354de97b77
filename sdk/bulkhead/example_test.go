package bulkhead_test

import (
	"context"
	"fmt"

	"governor.dev/governor/sdk/bulkhead"
	"governor.dev/governor/sdk/rules"
)

func ExampleBulkhead_Do() {
	b, err := bulkhead.New(rules.Bulkhead{MaxConcurrent: 1}, bulkhead.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = b.Do(ctx, func(ctx context.Context) error {
		// The slot is taken, so this call gets the fallback.
		return b.Do(ctx, func(context.Context) error { return nil }, func(_ context.Context, err error) error {
			fmt.Println("fallback:", err)
			return nil
		})
	}, nil)
	// Output: fallback: bulkhead: full
}
