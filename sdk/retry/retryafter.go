package retry

import (
	"net/http"
	"strings"
	"time"
)

// maxRetryAfter bounds what ParseRetryAfter returns, so that absurd values
// cannot overflow a time.Duration.
const maxRetryAfter = 365 * 24 * time.Hour

// ParseRetryAfter reads an HTTP Retry-After value: either a number of seconds
// ("120") or an HTTP date ("Fri, 31 Dec 1999 23:59:59 GMT"), relative to now.
// A date in the past gives 0. It reports false for anything else, including
// negative or fractional seconds.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if time.Duration(secs)*time.Second > maxRetryAfter {
				return maxRetryAfter, true
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > maxRetryAfter:
		return maxRetryAfter, true
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
