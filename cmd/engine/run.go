package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"governor.dev/governor/engine/app"
	"governor.dev/governor/engine/config"
)

// runEngine is `engine run [flags]` (also `engine -dev`, `engine -config F`):
// the decision engine until SIGINT or SIGTERM. It exits 0 after a stop the
// signal asked for, including one that interrupts the start, 1 when the
// start or the run fails, 2 for a bad configuration. The alerting document
// (alerts.config_file, GOVERNOR_ALERTS_CONFIG or -alerts-config) is checked
// with the rest of the configuration: -check-config reports the errors of
// both.
func runEngine(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, cmd, err := config.Load(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	alerting, alertsErr := app.LoadAlerts(cfg.Alerts)
	if err = errors.Join(err, alertsErr); err != nil {
		fmt.Fprintf(stderr, "engine: configuration has errors:\n%v\n", err)
		return 2
	}
	if cmd.CheckConfig {
		out, _ := yaml.Marshal(redacted(cfg))
		fmt.Fprintf(stdout, "configuration OK (file %q)\n%s", cmd.File, out)
		if alerting != nil {
			fmt.Fprintf(stdout, "alerting OK (file %q): %d rules configured, %d receivers, %d routes\n",
				cfg.Alerts.ConfigFile, len(alerting.Rules), len(alerting.Receivers), len(alerting.Routes))
		}
		return 0
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := app.New(ctx, app.Options{Config: cfg, Logger: log, Stdout: stdout, Alerts: alerting})
	if err != nil && ctx.Err() != nil {
		// A signal during the start (a pod terminated while it waits
		// for its database) is a stop asked for, not a failure.
		log.Info("engine: stopped before the start completed", "err", err)
		return 0
	}
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

// redacted is cfg with the passwords of its URLs masked, for printing: the
// database, NATS and Prometheus URLs may carry credentials.
func redacted(cfg config.Config) config.Config {
	cfg.Database = redactURL(cfg.Database)
	cfg.NATS.URL = redactURL(cfg.NATS.URL)
	cfg.Metrics.PrometheusURL = redactURL(cfg.Metrics.PrometheusURL)
	return cfg
}

// Passwords outside a parsable URL: a key=value connection string's, and
// user info.
var (
	dsnPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('[^']*'|\S+)`)
	userPass    = regexp.MustCompile(`(//[^/@:]*:)[^/@]*@`)
)

// redactURL masks the passwords of a URL, a comma-separated list of URLs
// (user info, a NATS token or a password query parameter) or a key=value
// connection string.
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u, err := url.Parse(p)
		if err != nil || u.Scheme == "" {
			parts[i] = userPass.ReplaceAllString(dsnPassword.ReplaceAllString(p, "${1}xxxxx"), "${1}xxxxx@")
			continue
		}
		if _, hasPass := u.User.Password(); u.User != nil && !hasPass && (u.Scheme == "nats" || u.Scheme == "tls") {
			u.User = url.User("xxxxx") // a NATS token
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		parts[i] = u.Redacted()
	}
	return strings.Join(parts, ",")
}
