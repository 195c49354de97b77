package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"gopkg.in/yaml.v3"

	"governor.dev/governor/engine/app"
	"governor.dev/governor/engine/config"
)

// runEngine is `engine run [flags]` (also `engine -dev`, `engine -config F`):
// the decision engine until SIGINT or SIGTERM.
func runEngine(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, cmd, err := config.Load(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "engine: configuration has errors:\n%v\n", err)
		return 2
	}
	if cmd.CheckConfig {
		out, _ := yaml.Marshal(cfg)
		fmt.Fprintf(stdout, "configuration OK (file %q)\n%s", cmd.File, out)
		return 0
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := app.New(ctx, app.Options{Config: cfg, Logger: log, Stdout: stdout})
	if err != nil {
		log.Error("engine: cannot start", "err", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		log.Error("engine stopped with an error", "err", err)
		return 1
	}
	return 0
}
