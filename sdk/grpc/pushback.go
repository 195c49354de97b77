package grpcgov

import (
	"strconv"
	"strings"
	"time"
)

// PushbackKey is the trailer in which a server tells clients when to retry,
// in milliseconds (gRPC retry design A6); a negative value means "do not
// retry".
const PushbackKey = "grpc-retry-pushback-ms"

// maxPushback bounds parsed pushbacks, so absurd values cannot overflow.
const maxPushback = 24 * time.Hour

// ParsePushback reads a grpc-retry-pushback-ms value. It returns the delay and
// whether a retry is allowed; ok is false for a malformed value (then the
// caller uses its own back-off) and for a negative one (no retry), which
// sets stop.
func ParsePushback(v string) (d time.Duration, ok, stop bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if strings.HasPrefix(v, "-") && isDigits(v[1:]) {
			return 0, false, true // a huge negative number still means stop
		}
		if isDigits(v) {
			return maxPushback, true, false
		}
		return 0, false, false
	}
	if n < 0 {
		return 0, false, true
	}
	if n > int64(maxPushback/time.Millisecond) {
		return maxPushback, true, false
	}
	return time.Duration(n) * time.Millisecond, true, false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
