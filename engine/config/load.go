package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Command is what the command line asks for besides the configuration.
type Command struct {
	// CheckConfig validates and exits.
	CheckConfig bool
	// File is the configuration file read (empty: none).
	File string
}

// env lists the environment variables and the fields they set.
var env = []struct {
	name string
	set  func(c *Config, v string) error
}{
	{"GOVERNOR_LISTEN", func(c *Config, v string) error { c.Listen = v; return nil }},
	{"GOVERNOR_DATA_DIR", func(c *Config, v string) error { c.DataDir = v; return nil }},
	{"GOVERNOR_DATABASE", func(c *Config, v string) error { c.Database = v; return nil }},
	{"GOVERNOR_IDENTITY", func(c *Config, v string) error { c.Identity = v; return nil }},
	{"GOVERNOR_NATS_URL", func(c *Config, v string) error { c.NATS.URL = v; return nil }},
	{"GOVERNOR_PROMETHEUS_URL", func(c *Config, v string) error { c.Metrics.PrometheusURL = v; return nil }},
	{"GOVERNOR_ALERTS_CONFIG", func(c *Config, v string) error { c.Alerts.ConfigFile = v; return nil }},
	// A value that does not parse leaves the field as it was, so the error
	// naming the variable is the only one: a zero in its place would add a
	// second, naming the field as if it had been set to zero.
	{"GOVERNOR_INTERVAL", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err == nil {
			c.Interval = d
		}
		return err
	}},
	{"GOVERNOR_SETPOINT", func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err == nil {
			c.Recommend.Setpoint = f
		}
		return err
	}},
}

// Load builds the configuration from args (flags), getenv and the file the
// -config flag or GOVERNOR_CONFIG names, in that order of precedence, and
// validates it. Every problem is reported, each naming its source and field.
func Load(args []string, getenv func(string) string, stderr io.Writer) (Config, Command, error) {
	var cmd Command
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		dev                                                        bool
		listen, dataDir, database, natsURL, prom, identity, alerts string
		interval                                                   time.Duration
		setpoint                                                   float64
	)
	fs.StringVar(&cmd.File, "config", "", "YAML configuration file (also GOVERNOR_CONFIG)")
	fs.BoolVar(&cmd.CheckConfig, "check-config", false, "validate the configuration, print it and exit")
	fs.BoolVar(&dev, "dev", false, "zero-setup stack: embedded NATS, SQLite, metrics store and the demo fleet (also GOVERNOR_DEV=true)")
	fs.StringVar(&listen, "listen", "", "address of /metrics, /healthz, /readyz and the API (GOVERNOR_LISTEN)")
	fs.StringVar(&dataDir, "data-dir", "", "directory of the SQLite database and embedded NATS store (GOVERNOR_DATA_DIR)")
	fs.StringVar(&database, "database", "", "postgres:// URL of the rules database; empty for SQLite (GOVERNOR_DATABASE)")
	fs.StringVar(&natsURL, "nats", "", "NATS URL; empty for an embedded server (GOVERNOR_NATS_URL)")
	fs.StringVar(&prom, "prometheus", "", "Prometheus query API URL; empty for the embedded store (GOVERNOR_PROMETHEUS_URL)")
	fs.StringVar(&identity, "identity", "", "replica name for leader election (GOVERNOR_IDENTITY)")
	fs.StringVar(&alerts, "alerts-config", "", "alerting document, JSON of package alerts/config (GOVERNOR_ALERTS_CONFIG, alerts.config_file)")
	fs.DurationVar(&interval, "interval", 0, "evaluation interval (GOVERNOR_INTERVAL)")
	fs.Float64Var(&setpoint, "setpoint", 0, "load score the controllers hold (GOVERNOR_SETPOINT)")
	if err := fs.Parse(args); err != nil {
		return Config{}, cmd, err
	}
	if fs.NArg() > 0 {
		return Config{}, cmd, fmt.Errorf("%w: unexpected arguments %v", ErrInvalid, fs.Args())
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	devFlag := false
	fs.Visit(func(f *flag.Flag) { devFlag = devFlag || f.Name == "dev" })
	if v := getenv("GOVERNOR_DEV"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, cmd, fmt.Errorf("%w: GOVERNOR_DEV: %q is not a boolean", ErrInvalid, v)
		}
		if !devFlag { // the flag, when given, wins
			dev = b
		}
	}
	c := Default()
	if dev {
		c = DevDefaults()
	}
	if cmd.File == "" {
		cmd.File = getenv("GOVERNOR_CONFIG")
	}
	var errs []error
	if cmd.File != "" {
		var err error
		if c, err = LoadFile(cmd.File, c); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range env {
		if v := getenv(e.name); v != "" {
			if err := e.set(&c, v); err != nil {
				errs = append(errs, fmt.Errorf("%w: %s: %q: %w", ErrInvalid, e.name, v, err))
			}
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "dev":
			c.Dev = dev
		case "listen":
			c.Listen = listen
		case "data-dir":
			c.DataDir = dataDir
		case "database":
			c.Database = database
		case "nats":
			c.NATS.URL = natsURL
		case "prometheus":
			c.Metrics.PrometheusURL = prom
		case "identity":
			c.Identity = identity
		case "alerts-config":
			c.Alerts.ConfigFile = alerts
		case "interval":
			c.Interval = interval
		case "setpoint":
			c.Recommend.Setpoint = setpoint
		}
	})
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, cmd, errors.Join(errs...)
}
