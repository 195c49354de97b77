//go:build !unix

package governor

import "time"

// processCPU is unknown here: the throttle then trusts the latency alone.
func processCPU() (time.Duration, bool) { return 0, false }
