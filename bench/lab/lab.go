// Package lab runs overload scenarios in either mode and collects the
// results: the simulator (package sim) or live loopback processes (a server
// and an open-loop load generator, see Live). cmd/overload is a thin
// front end over it.
package lab

import (
	"errors"
	"fmt"
	"time"

	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
	"governor.dev/governor/bench/sim"
)

// Modes.
const (
	ModeSim  = "sim"
	ModeLive = "live"
)

// ErrMode is returned for an unknown mode.
var ErrMode = errors.New("lab: unknown mode")

// RunSim plays the scenario against every named simulator policy.
func RunSim(s *scenario.Scenario, limiters []string, o sim.Options) (report.Run, error) {
	capRPS := sim.Capacity(s, o)
	run := report.Run{Scenario: s.Name, Mode: ModeSim, CapacityRPS: round(capRPS)}
	for _, name := range limiters {
		out, err := sim.Run(s, name, o)
		if err != nil {
			return run, fmt.Errorf("lab: sim %s: %w", name, err)
		}
		r := report.Measure(name, s, capRPS, out.Attempts)
		r.Detail.LimitShrinkS = limitShrink(s, out.Limits)
		run.Results = append(run.Results, r)
	}
	return run, nil
}

// limitShrink is how long after the first event starts the limit first
// falls to half its value at that moment (-1: never, or no event). The
// samples are the published limit, the learned one rounded to the nearest
// integer: an odd sample L stands for a learned limit near L, whose half
// rounds to (L+1)/2, so that is the half a sample is compared with (a
// sample of 37 halved is published as 19, not 18).
func limitShrink(s *scenario.Scenario, limits []int) float64 {
	if len(s.Events) == 0 {
		return -1
	}
	start := s.Events[0].From.D()
	i := int(start / (100 * time.Millisecond))
	if i <= 0 || i >= len(limits) || limits[i-1] <= 0 {
		return -1
	}
	before := limits[i-1]
	for k := i; k < len(limits); k++ {
		if limits[k] <= (before+1)/2 {
			return float64(k+1-i) / 10
		}
	}
	return -1
}

func round(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }
