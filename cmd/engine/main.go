// Command engine is Governor's decision engine. Each subcommand is one job:
//
//	engine run [flags]                 the decision engine (also: engine -dev, engine -config FILE);
//	                                   alert routing and receivers from alerts.config_file,
//	                                   $GOVERNOR_ALERTS_CONFIG or -alerts-config
//	engine -check-config [flags]       validate the configuration and exit
//	engine backtest -service S -from T1 -to T2
//	                                   replay recorded metrics through the recommender,
//	                                   configured as engine run is (file, then GOVERNOR_*);
//	                                   at most backtest.MaxSteps steps
//	engine detect -data DIR -out OUT   score NAB-layout CSV files for anomalies
//
// The logic lives in importable packages; this file only dispatches.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"governor.dev/governor/cmd/internal/shutdown"
)

// command is one subcommand: run parses its own flags from args.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands; add new ones here.
var commands = []command{
	{name: "run", summary: "run the decision engine (engine -dev: the zero-setup demo stack)", run: runEngine},
	{name: "backtest", summary: "replay recorded metrics through the recommender: -service S -from T1 -to T2", run: runBacktest},
	{name: "detect", summary: "score every DIR/<category>/<file>.csv for anomalies, writing OUT/<category>/<file>.csv", run: runDetect},
}

func main() { os.Exit(run()) }

// run ends the command's context at the first SIGINT or SIGTERM; a second
// one exits at once (package shutdown).
func run() int {
	ctx, stop := shutdown.Notify(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	defer stop()
	return dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// dispatch runs the subcommand named by args[0] and returns the exit code:
// 0 success, 1 failure, 2 usage error.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if strings.HasPrefix(args[0], "-") {
		return runEngine(ctx, args, stdout, stderr)
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "engine: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return commands[i].run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: engine <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nrun 'engine <command> -h' for the flags of a command")
	fmt.Fprintln(w, "\nengine run reads its configuration in layers, each overriding the one before:")
	fmt.Fprintln(w, "defaults (-dev or GOVERNOR_DEV=true: the zero-setup stack's), the YAML file of")
	fmt.Fprintln(w, "-config or GOVERNOR_CONFIG, GOVERNOR_* environment variables, then flags.")
	fmt.Fprintln(w, "SIGINT or SIGTERM stops it cleanly; a second signal exits at once.")
	fmt.Fprintln(w, "engine backtest reads the same defaults, file and environment variables.")
}
