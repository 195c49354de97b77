package governor_test

import (
	"math"
	"testing"
	"time"

	governor "governor.dev/governor/sdk"
)

// TestRetryAfterSecondsRoundsUpWithoutOverflow: Retry-After is RetryAfter
// rounded up to whole seconds, at least 1. A RetryAfter near
// math.MaxInt64 (a Rejection a service builds to say "not in any useful
// time") wrapped negative when rounded and came out as one second.
func TestRetryAfterSecondsRoundsUpWithoutOverflow(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{math.MaxInt64, math.MaxInt64/int64(time.Second) + 1},
		{math.MaxInt64 - time.Second + 2, math.MaxInt64 / int64(time.Second)},
		{1500 * time.Millisecond, 2},
		{2 * time.Second, 2},
		{time.Nanosecond, 1},
		{0, 1},
		{-time.Hour, 1},
	}
	for _, tt := range tests {
		r := &governor.Rejection{RetryAfter: tt.d}
		if got := r.RetryAfterSeconds(); got != tt.want {
			t.Errorf("RetryAfterSeconds() for %v = %d, want %d", tt.d, got, tt.want)
		}
	}
}
