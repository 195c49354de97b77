package signals

import (
	"regexp"
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

// The Go derivation leaves out exactly the outcomes the templates' offered
// matcher leaves out.
func TestShadowIsShadowOutcomes(t *testing.T) {
	re := regexp.MustCompile("^(?:" + ShadowOutcomes + ")$")
	for _, oc := range []string{"admitted", "shed", "rate_limited", "queue_timeout", "shadow_would_shed",
		"shadow_would_rate_limit", "exempt", "deadline", "overload", "shadow_", "", "x_shadow_would_shed"} {
		if shadow(oc) != re.MatchString(oc) {
			t.Errorf("shadow(%q) = %v, but ShadowOutcomes matches it: %v", oc, shadow(oc), re.MatchString(oc))
		}
	}
}
