package main

import (
	"testing"
	"time"
)

// FuzzParseTime: -from and -to accept RFC 3339 or a duration before now and
// refuse anything else without panicking. What a duration gives is exactly
// that long before now, never after it.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"", "2h", "2026-11-30T10:00:00Z", "yesterday", "-5m", "1e9h", "0s", "2562047h"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTime(s, now)
		if err != nil {
			return
		}
		if got.IsZero() {
			t.Fatalf("%q parsed to the zero time", s)
		}
		if _, rfcErr := time.Parse(time.RFC3339, s); rfcErr == nil || s == "" {
			return
		}
		d, derr := time.ParseDuration(s)
		if derr != nil {
			t.Fatalf("%q accepted as %s but is neither RFC 3339 nor a duration", s, got)
		}
		if got.After(now) || !got.Equal(now.Add(-d)) {
			t.Fatalf("%q gave %s, want %s before %s", s, got, d, now)
		}
	})
}
