package sim

import (
	"os"
	"testing"

	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
)

func TestPrintAll(t *testing.T) {
	if os.Getenv("SIMPRINT") == "" {
		t.Skip()
	}
	files := []string{"steady-2x", "spike-5.7x", "latency-step", "ramp-3x", "retry-storm", "retry-storm-budget", "pause-noise", "low-traffic", "capacity-halved"}
	for _, f := range files {
		s, err := scenario.Load("../scenarios/" + f + ".json")
		if err != nil {
			t.Fatal(err)
		}
		run := report.Run{Scenario: s.Name, Mode: "sim", CapacityRPS: Capacity(s, Options{})}
		for _, n := range Names() {
			out, err := Run(s, n, Options{})
			if err != nil {
				t.Fatal(err)
			}
			run.Results = append(run.Results, report.Measure(n, s, run.CapacityRPS, out.Attempts))
		}
		report.WriteTable(os.Stdout, run)
	}
}
