// Command overload runs an overload scenario against Governor and its peers,
// in the simulator or live on loopback, and prints the results:
//
//	go run ./cmd/overload -scenario scenarios/steady-2x.json -mode sim -json
//
// Without -json it prints a table. -limiters selects limiters (default:
// every limiter in sim mode, lab.DefaultLiveLimiters live). The live mode re-executes this binary as its server and load
// generator processes (-role server|loadgen, internal).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"

	"governor.dev/governor/bench/lab"
	"governor.dev/governor/bench/limiters"
	"governor.dev/governor/bench/report"
	"governor.dev/governor/bench/scenario"
	"governor.dev/governor/bench/sim"
	"governor.dev/governor/sdk/rules"
)

func main() {
	limiters.Quiet()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("scenario", "", "scenario file (JSON)")
	mode := fs.String("mode", lab.ModeSim, "sim or live")
	asJSON := fs.Bool("json", false, "print the JSON result object")
	limiterList := fs.String("limiters", "", "comma-separated limiters (default: every limiter in sim mode, lab.DefaultLiveLimiters in live mode and with -all)")
	role := fs.String("role", "", "internal: server or loadgen (live mode child processes)")
	all := fs.String("all", "", "run every scenario of this directory (with -modes) and write -results")
	modes := fs.String("modes", "sim,live", "with -all: modes to run (empty: only re-render saved runs)")
	save := fs.String("save", "results", "with -all: directory for the JSON of each run")
	results := fs.String("results", "RESULTS.md", "with -all: Markdown file to rewrite")
	analysis := fs.String("analysis", "results/analysis.md", "with -all: Markdown placed at the top of -results")
	ruleset := fs.String("ruleset", "", "live mode: a ruleset file (JSON) that replaces Governor's default ruleset in the governor limiters")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	live := lab.LiveOptions{Logger: slog.New(slog.NewTextHandler(stderr, nil)), Stderr: stderr}
	if *ruleset != "" {
		if *mode != lab.ModeLive || *all != "" {
			fmt.Fprintln(stderr, "overload: -ruleset needs -mode live and a single -scenario")
			return 2
		}
		b, err := os.ReadFile(*ruleset)
		if err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 2
		}
		rs, err := rules.Decode(b)
		if err == nil {
			_, err = limiters.CheckRuleset(rs)
		}
		if err != nil {
			fmt.Fprintf(stderr, "overload: -ruleset %s: %v\n", *ruleset, err)
			return 2
		}
		live.Ruleset = b
	}
	if *role != "" {
		if err := lab.Child(ctx, *role, os.Stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 1
		}
		return 0
	}
	if *all != "" {
		var ms []string
		for _, m := range strings.Split(*modes, ",") {
			if m = strings.TrimSpace(m); m != "" {
				ms = append(ms, m)
			}
		}
		o := lab.AllOptions{Dir: *all, Modes: ms, SaveDir: *save, Analysis: *analysis, Results: *results,
			Live: live}
		o.LiveLimiters = *limiterList // the simulator is cheap: it always runs every policy
		if err := lab.RunAll(ctx, o); err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 1
		}
		return 0
	}
	if *path == "" {
		fmt.Fprintln(stderr, "overload: -scenario is required")
		return 2
	}
	s, err := scenario.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, "overload:", err)
		return 2
	}
	var res report.Run
	switch *mode {
	case lab.ModeSim:
		names, err := sim.ParseList(*limiterList)
		if err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 2
		}
		res, err = lab.RunSim(s, names, sim.Options{})
		if err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 1
		}
	case lab.ModeLive:
		res, err = lab.RunLive(ctx, s, *limiterList, live)
		if err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 1
		}
	default:
		fmt.Fprintf(stderr, "overload: -mode must be sim or live, got %q\n", *mode)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return 1
		}
		return 0
	}
	report.WriteTable(stdout, res)
	return 0
}
