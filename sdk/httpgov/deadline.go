package httpgov

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// Headers a caller states its deadline in. ParseDeadline reads all three and
// takes the earliest.
const (
	// HeaderDeadline is the absolute deadline, Unix time in milliseconds
	// ("1767225600123"). It is the only one that counts the time the
	// request spent before the middleware saw it (in the caller, on the
	// network, in the accept queue), provided the clocks agree.
	HeaderDeadline = "X-Request-Deadline"
	// HeaderEnvoyTimeout is the time in milliseconds Envoy's router allows
	// the request; Envoy sets it on every upstream request unless told not
	// to. It counts from when the middleware sees the request.
	HeaderEnvoyTimeout = "X-Envoy-Expected-Rq-Timeout-Ms"
	// HeaderGRPCTimeout is gRPC's timeout ("250m": 1 to 8 digits and a unit
	// H, M, S, m, u or n), as gRPC-Web and HTTP gateways forward it. It
	// counts from when the middleware sees the request.
	HeaderGRPCTimeout = "Grpc-Timeout"
)

// hasDeadline reports whether any deadline header is present (no clock read,
// no allocation: the middleware's fast path for requests without one).
func hasDeadline(h http.Header) bool {
	return len(h[HeaderDeadline]) > 0 || len(h[HeaderEnvoyTimeout]) > 0 || len(h[HeaderGRPCTimeout]) > 0
}

// ParseDeadline returns the earliest deadline stated by the request headers
// HeaderDeadline, HeaderEnvoyTimeout and HeaderGRPCTimeout, the relative ones
// counted from now, and whether any was stated. A malformed header is
// skipped (the others still count) and reported in err, which names it; the
// middleware ignores err, so a bad hint never fails a request.
func ParseDeadline(h http.Header, now time.Time) (deadline time.Time, ok bool, err error) {
	take := func(t time.Time) {
		if !ok || t.Before(deadline) {
			deadline, ok = t, true
		}
	}
	if v := h[HeaderDeadline]; len(v) > 0 {
		ms, e := digits(v[0], 15)
		if e != nil {
			err = fmt.Errorf("httpgov: header %s: %w", HeaderDeadline, e)
		} else {
			take(time.UnixMilli(ms))
		}
	}
	if v := h[HeaderEnvoyTimeout]; len(v) > 0 {
		ms, e := digits(v[0], 12)
		switch {
		case e != nil:
			err = fmt.Errorf("httpgov: header %s: %w", HeaderEnvoyTimeout, e)
		case ms == 0:
			// Envoy sends 0 when the route has no timeout: nothing stated.
		default:
			take(now.Add(time.Duration(ms) * time.Millisecond))
		}
	}
	if v := h[HeaderGRPCTimeout]; len(v) > 0 {
		d, e := GRPCTimeout(v[0])
		if e != nil {
			err = fmt.Errorf("httpgov: header %s: %w", HeaderGRPCTimeout, e)
		} else {
			take(now.Add(d))
		}
	}
	return deadline, ok, err
}

// GRPCTimeout parses a grpc-timeout value: 1 to 8 ASCII digits followed by
// one unit, H (hours), M (minutes), S, m (milliseconds), u (microseconds) or
// n (nanoseconds). Values past time.Duration's range (above 2.5 million
// hours) are clamped to its maximum.
func GRPCTimeout(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("%q: want 1 to 8 digits and a unit (H, M, S, m, u, n)", s)
	}
	n, err := digits(s[:len(s)-1], 8)
	if err != nil {
		return 0, err
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("%q: unit must be one of H, M, S, m, u, n", s)
	}
	if n > math.MaxInt64/int64(unit) {
		return math.MaxInt64, nil // about 292 years: no deadline in practice
	}
	return time.Duration(n) * unit, nil
}

// digits parses 1 to max ASCII digits (no sign, no spaces).
func digits(s string, max int) (int64, error) {
	if len(s) == 0 || len(s) > max {
		return 0, fmt.Errorf("%q: want 1 to %d digits", s, max)
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q: want 1 to %d digits", s, max)
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}
