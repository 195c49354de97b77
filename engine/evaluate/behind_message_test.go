package evaluate

import (
	"testing"

	"governor.dev/governor/rules/distribution"
)

// The instance_stale event says what an instance behind its target refused,
// or, for one on other content of its version, which content it runs.
func TestBehindMessageSaysWhatTheInstanceRuns(t *testing.T) {
	for _, c := range []struct {
		in   distribution.Instance
		want string
	}{
		{distribution.Instance{Service: "s", Instance: "i", State: distribution.StateStale, Running: 1, Target: 2},
			"s instance i is STALE: runs v1, meant to run v2"},
		{distribution.Instance{Service: "s", Instance: "i", State: distribution.StateNacked, Running: 1, Target: 2,
			NackVersion: 2, NackReason: "apply", NackError: "bad limit"},
			"s instance i is NACKED: runs v1, meant to run v2 (refused v2: apply bad limit)"},
		{distribution.Instance{Service: "s", Instance: "i", State: distribution.StateNacked, Running: 5, Target: 5,
			NackVersion: 5, NackReason: distribution.NackOtherContent, NackError: "runs other content of version 5: checksum a, published b"},
			"s instance i is NACKED: runs v5, meant to run v5 (runs other content of version 5: checksum a, published b)"},
	} {
		if got := behindMessage(c.in); got != c.want {
			t.Errorf("behindMessage = %q\nwant            %q", got, c.want)
		}
	}
}
