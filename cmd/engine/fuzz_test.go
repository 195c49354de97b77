package main

import (
	"testing"
	"time"
)

// FuzzParseTime: -from and -to accept RFC 3339 or a duration before now and
// refuse anything else without panicking.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"", "2h", "2026-11-30T10:00:00Z", "yesterday", "-5m", "1e9h"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTime(s, now)
		if err == nil && got.IsZero() {
			t.Fatalf("%q parsed to the zero time", s)
		}
	})
}
