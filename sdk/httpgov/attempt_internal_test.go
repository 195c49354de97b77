package httpgov

import (
	"net/http"
	"testing"

	"governor.dev/governor/sdk/transport"
)

// FuzzInboundAttempt: the middleware's allocation-free reading of the
// attempt headers agrees with transport.InboundAttemptOf on every pair of
// values, and never allocates.
func FuzzInboundAttempt(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"2", ""}, {"", "1"}, {"x", "3"}, {"0", "-1"}, {"1234567", "007"}, {"999999", "2"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ours, envoys string) {
		h := http.Header{}
		if ours != "" {
			h[transport.HeaderAttempt] = []string{ours}
		}
		if envoys != "" {
			h[transport.HeaderEnvoyAttempt] = []string{envoys}
		}
		want, _ := transport.InboundAttemptOf(h)
		if got := inboundAttempt(h); got != want {
			t.Fatalf("inboundAttempt(%q, %q) = %d, transport.InboundAttemptOf says %d", ours, envoys, got, want)
		}
		if a := testing.AllocsPerRun(10, func() { inboundAttempt(h) }); a != 0 {
			t.Fatalf("inboundAttempt(%q, %q): %v allocations", ours, envoys, a)
		}
	})
}
