package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
	"governor.dev/governor/bench/sim"
)

// AllOptions configure RunAll.
type AllOptions struct {
	// Dir holds the scenario files (*.json).
	Dir string
	// Modes to run, of "sim" and "live"; empty renders saved runs only.
	Modes []string
	// Limiters restricts the limiters of each mode (empty: all of it).
	SimLimiters, LiveLimiters string
	// SaveDir receives one JSON file per scenario and mode, and is where
	// saved runs are read from for rendering.
	SaveDir string
	// Analysis is a Markdown file placed at the top of the results.
	Analysis string
	// Results is the Markdown file to write (RESULTS.md).
	Results string
	// Live is passed to RunLive.
	Live LiveOptions
}

// RunAll runs every scenario of o.Dir in every mode of o.Modes, saves each
// run, and rewrites o.Results from all saved runs of the scenarios in
// o.Dir.
func RunAll(ctx context.Context, o AllOptions) error {
	began := time.Now()
	load := loadAvg()
	files, err := filepath.Glob(filepath.Join(o.Dir, "*.json"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("lab: no scenarios in %s (%v)", o.Dir, err)
	}
	sort.Strings(files)
	if err := os.MkdirAll(o.SaveDir, 0o755); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	var names []string
	runs := map[string]map[string]report.Run{}
	for _, f := range files {
		s, err := scenario.Load(f)
		if err != nil {
			return err
		}
		names = append(names, s.Name)
		runs[s.Name] = map[string]report.Run{}
		for _, mode := range o.Modes {
			var r report.Run
			switch mode {
			case ModeSim:
				list, err := sim.ParseList(o.SimLimiters)
				if err != nil {
					return err
				}
				r, err = RunSim(s, list, sim.Options{})
				if err != nil {
					return err
				}
			case ModeLive:
				r, err = RunLive(ctx, s, o.LiveLimiters, o.Live)
				if err != nil {
					return err
				}
			default:
				return fmt.Errorf("%w: %q", ErrMode, mode)
			}
			b, _ := json.MarshalIndent(toSaved(r), "", "  ")
			if err := os.WriteFile(filepath.Join(o.SaveDir, s.Name+"."+mode+".json"), append(b, '\n'), 0o644); err != nil {
				return fmt.Errorf("lab: %w", err)
			}
		}
		for _, mode := range []string{ModeSim, ModeLive} {
			b, err := os.ReadFile(filepath.Join(o.SaveDir, s.Name+"."+mode+".json"))
			if err != nil {
				continue
			}
			var sv saved
			if err := json.Unmarshal(b, &sv); err != nil {
				return fmt.Errorf("lab: %s: %w", s.Name, err)
			}
			r := sv.run()
			if fresh, ok := runs[s.Name][mode]; ok {
				r = fresh
			}
			runs[s.Name][mode] = r
		}
	}
	if o.Results == "" {
		return nil
	}
	analysis, _ := os.ReadFile(o.Analysis)
	m := report.Machine{
		CPU: cpuModel(), Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Date: began.UTC().Format(time.RFC3339),
		LoadAvg: load, WallTimeS: time.Since(began).Seconds(),
	}
	machineFile := filepath.Join(o.SaveDir, "machine.json")
	if !slices.Contains(o.Modes, ModeLive) {
		// Re-rendering or a simulator-only run: the machine that matters
		// is the one of the saved live runs.
		if b, err := os.ReadFile(machineFile); err == nil {
			var saved report.Machine
			if json.Unmarshal(b, &saved) == nil {
				m = saved
			}
		}
	} else {
		b, _ := json.MarshalIndent(m, "", "  ")
		if err := os.WriteFile(machineFile, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	var buf bytes.Buffer
	report.WriteResults(&buf, string(analysis), m, runs, names)
	return os.WriteFile(o.Results, buf.Bytes(), 0o644)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// saved is a run as stored by RunAll: the published object plus the details
// RESULTS.md shows.
type saved struct {
	report.Run
	Details map[string]report.Detail `json:"details"`
}

func toSaved(r report.Run) saved {
	sv := saved{Run: r, Details: map[string]report.Detail{}}
	for _, x := range r.Results {
		sv.Details[x.Limiter] = x.Detail
	}
	return sv
}

func (sv saved) run() report.Run {
	r := sv.Run
	for i := range r.Results {
		r.Results[i].Detail = sv.Details[r.Results[i].Limiter]
	}
	return r
}
