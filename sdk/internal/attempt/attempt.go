// Package attempt parses and formats the attempt counts that retries carry
// from hop to hop: X-Request-Attempt and X-Envoy-Attempt-Count over HTTP
// (sdk/transport, sdk/httpgov), grpc-previous-rpc-attempts and
// x-envoy-attempt-count as gRPC metadata (sdk/grpc). One parser serves them
// all, so a count means the same on every side. Neither Parse nor Format
// allocates for the counts retries use; the callers name the header and word
// the error, where they report one.
package attempt

import "strconv"

// MaxDigits bounds the counts Parse accepts: 999999 attempts at most.
const MaxDigits = 6

// Parse parses a count as the attempt headers carry it: 1 to MaxDigits
// ASCII digits, leading zeros allowed, naming a count of at least 1. It
// returns false for anything else (empty, a sign, spaces, a non-ASCII digit,
// too many digits, zero). It never allocates.
func Parse(v string) (int, bool) {
	if len(v) == 0 || len(v) > MaxDigits {
		return 0, false
	}
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 {
		return 0, false
	}
	return n, true
}

// First parses the first of a header's values (Parse); false when there is
// none or it is malformed.
func First(values []string) (int, bool) {
	if len(values) == 0 {
		return 0, false
	}
	return Parse(values[0])
}

// Inbound returns the attempt number an inbound request states in two
// attempt headers' values (ours, Envoy's): the larger if both, 1 when
// neither states one or only malformed ones (a malformed count makes no
// retry). It never allocates.
func Inbound(ours, envoys []string) int {
	n, _, _ := InboundChecked(ours, envoys)
	return n
}

// InboundChecked is Inbound, also reporting which of the two headers
// carried a first value that is not a count (badOurs, badEnvoys), for a
// caller that names them in an error. It parses each value once and never
// allocates.
func InboundChecked(ours, envoys []string) (n int, badOurs, badEnvoys bool) {
	n = 1
	if a, ok := First(ours); ok {
		n = a
	} else {
		badOurs = len(ours) > 0
	}
	if a, ok := First(envoys); ok {
		n = max(n, a)
	} else {
		badEnvoys = len(envoys) > 0
	}
	return n, badOurs, badEnvoys
}

// Format returns n in decimal, as Parse reads it. It allocates nothing for
// n from 0 to 99 (strconv keeps those strings), so a retry costs no string
// for its count.
func Format(n int) string { return strconv.Itoa(n) }
