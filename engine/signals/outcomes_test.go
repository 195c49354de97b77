package signals

import (
	"strings"
	"testing"
)

// The Go derivation counts exactly the outcomes the templates match.
func TestRefusedIsShedOutcomes(t *testing.T) {
	for _, oc := range strings.Split(ShedOutcomes, "|") {
		if !refused(oc) {
			t.Errorf("refused(%q) = false, but ShedOutcomes lists it", oc)
		}
	}
	for _, oc := range []string{"admitted", "exempt", "breaker_open", "shadow_would_shed", "shadow_would_rate_limit", ""} {
		if refused(oc) {
			t.Errorf("refused(%q) = true, but ShedOutcomes does not list it", oc)
		}
	}
}
