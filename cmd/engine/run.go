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

	alertsconfig "governor.dev/governor/alerts/config"
	"governor.dev/governor/engine/app"
	"governor.dev/governor/engine/config"
)

// AlertsEnv names the alerting configuration file (alerts/config: rules,
// routes, receivers as JSON). Without it the engine runs the built-in alert
// rules and only logs notifications.
const AlertsEnv = "GOVERNOR_ALERTS_CONFIG"

// loadAlerts reads and validates the alerting file; "" is none.
func loadAlerts(path string) (*alertsconfig.Config, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", AlertsEnv, err)
	}
	c, err := alertsconfig.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", AlertsEnv, path, err)
	}
	return c, nil
}

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
	alerting, err := loadAlerts(os.Getenv(AlertsEnv))
	if err != nil {
		fmt.Fprintf(stderr, "engine: configuration has errors:\n%v\n", err)
		return 2
	}
	if cmd.CheckConfig {
		out, _ := yaml.Marshal(cfg)
		fmt.Fprintf(stdout, "configuration OK (file %q)\n%s", cmd.File, out)
		if alerting != nil {
			fmt.Fprintf(stdout, "alerting OK (file %q): %d receivers\n", os.Getenv(AlertsEnv), len(alerting.Receivers))
		}
		return 0
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := app.New(ctx, app.Options{Config: cfg, Logger: log, Stdout: stdout, Alerts: alerting})
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
