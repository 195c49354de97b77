package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("config: invalid")

// Config is the engine's configuration.
type Config struct {
	// Listen is the address of /metrics, /healthz, /readyz and the API.
	Listen string `yaml:"listen"`
	// Dev runs the zero-setup stack with the demo fleet.
	Dev bool `yaml:"dev"`
	// DataDir holds the SQLite database and the NATS store in dev mode.
	DataDir string `yaml:"data_dir"`
	// Database is a postgres:// URL, or empty for SQLite in DataDir.
	Database string `yaml:"database"`
	// Identity names this replica in leader election; default the host
	// name and process id.
	Identity string `yaml:"identity"`
	// Interval between evaluation cycles.
	Interval time.Duration `yaml:"interval"`
	NATS     NATS          `yaml:"nats"`
	Metrics  Metrics       `yaml:"metrics"`
	Score    Score         `yaml:"load_score"`
	// Recommend tunes the recommender.
	Recommend Recommend `yaml:"recommend"`
	Bands     Bands     `yaml:"bands"`
	Guardrail Guardrail `yaml:"guardrail"`
	Demo      Demo      `yaml:"demo"`
}

// NATS is where rules are distributed.
type NATS struct {
	// URL of the cluster; empty starts an embedded server.
	URL string `yaml:"url"`
	// Prefix of the bucket and subjects.
	Prefix string `yaml:"prefix"`
}

// Metrics is where signals come from.
type Metrics struct {
	// PrometheusURL of a query API; empty uses the embedded store.
	PrometheusURL string `yaml:"prometheus_url"`
	// ScrapeInterval of the embedded store.
	ScrapeInterval time.Duration `yaml:"scrape_interval"`
	// Targets the embedded store scrapes (besides the demo fleet).
	Targets []string `yaml:"targets"`
	// Window is the rate window of the signal queries.
	Window time.Duration `yaml:"window"`
}

// Score configures the load score.
type Score struct {
	// Weights by term (cpu, memory, latency, inflight, queue); empty keeps
	// the defaults.
	Weights map[string]float64 `yaml:"weights"`
	// Latency is the p99 objective that counts as fully loaded.
	Latency time.Duration `yaml:"latency"`
	// HalfLife of the smoothing.
	HalfLife time.Duration `yaml:"half_life"`
}

// Recommend tunes the recommender.
type Recommend struct {
	Setpoint  float64 `yaml:"setpoint"`
	Kp        float64 `yaml:"kp"`
	Ki        float64 `yaml:"ki"`
	Kd        float64 `yaml:"kd"`
	MinChange float64 `yaml:"min_change"`
	MinScores int     `yaml:"min_scores"`
	// BaselineSamples is how many healthy intervals the threshold
	// baselines need.
	BaselineSamples int `yaml:"baseline_samples"`
}

// Band is a service's auto-apply band.
type Band struct {
	Manual           bool    `yaml:"manual"`
	MaxChangePerHour float64 `yaml:"max_change_per_hour"`
	Floor            float64 `yaml:"floor"`
	Ceiling          float64 `yaml:"ceiling"`
}

// Bands are the default band and per-service overrides.
type Bands struct {
	Default  Band            `yaml:"default"`
	Services map[string]Band `yaml:"services"`
}

// Guardrail tunes the before/after comparison.
type Guardrail struct {
	Window           time.Duration `yaml:"window"`
	Settle           time.Duration `yaml:"settle"`
	Step             time.Duration `yaml:"step"`
	MinSamples       int           `yaml:"min_samples"`
	Alpha            float64       `yaml:"alpha"`
	ErrorTolerance   float64       `yaml:"error_tolerance"`
	LatencyTolerance float64       `yaml:"latency_tolerance"`
	GoodputTolerance float64       `yaml:"goodput_tolerance"`
	// LoadRatio is how far the offered load may move between the
	// guardrail's windows for them to count as comparable; 0 means 1.5.
	LoadRatio float64 `yaml:"load_ratio"`
}

// Demo configures the demo fleet of dev mode.
type Demo struct {
	Instances int           `yaml:"instances"`
	Period    time.Duration `yaml:"period"`
	// BadVersionAfter publishes a deliberately bad version of one service
	// this long after start so the guardrail has something to roll back
	// (0: never).
	BadVersionAfter time.Duration `yaml:"bad_version_after"`
}

// Default returns the production defaults.
func Default() Config {
	return Config{
		Listen:   "127.0.0.1:7070",
		DataDir:  "./var",
		Interval: 10 * time.Second,
		NATS:     NATS{Prefix: "governor"},
		Metrics:  Metrics{ScrapeInterval: 15 * time.Second, Window: time.Minute},
		Score:    Score{Latency: 250 * time.Millisecond, HalfLife: 30 * time.Second},
		Recommend: Recommend{Setpoint: 0.7, Kp: 1, Ki: 0.05, MinChange: 0.05, MinScores: 3,
			BaselineSamples: 2880},
		Bands: Bands{Default: Band{MaxChangePerHour: 0.1}},
		Guardrail: Guardrail{Window: 5 * time.Minute, Settle: time.Minute, Step: 15 * time.Second, MinSamples: 10,
			Alpha: 0.05, ErrorTolerance: 0.01, LatencyTolerance: 0.25, GoodputTolerance: 0.2},
		Demo: Demo{Instances: 2, Period: 90 * time.Second},
	}
}

// DevDefaults returns the defaults of dev mode.
func DevDefaults() Config {
	c := Default()
	c.Dev = true
	c.Interval = 5 * time.Second
	c.Metrics.ScrapeInterval = time.Second
	c.Metrics.Window = 10 * time.Second
	c.Score.Weights = map[string]float64{"latency": 0.5, "inflight": 0.5}
	c.Score.Latency = 200 * time.Millisecond
	c.Score.HalfLife = 10 * time.Second
	c.Recommend.BaselineSamples = 6
	c.Recommend.MinScores = 2
	c.Bands.Default.MaxChangePerHour = 0.5
	c.Bands.Services = map[string]Band{"search": {Manual: true}}
	c.Guardrail = Guardrail{Window: 30 * time.Second, Settle: 5 * time.Second, Step: 2 * time.Second, MinSamples: 6,
		Alpha: 0.05, ErrorTolerance: 0.02, LatencyTolerance: 0.5, GoodputTolerance: 0.3}
	c.Demo = Demo{Instances: 2, Period: 90 * time.Second, BadVersionAfter: 40 * time.Second}
	return c
}

// Decode reads YAML over base, refusing unknown fields.
func Decode(r io.Reader, base Config) (Config, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	c := base
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return base, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return c, nil
}

// LoadFile decodes a file over base.
func LoadFile(path string, base Config) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c, err := Decode(bytes.NewReader(data), base)
	if err != nil {
		return base, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate reports every problem, each naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (%v)", c.Listen, err)
	}
	if c.DataDir == "" && c.Database == "" {
		bad("data_dir", "is required for SQLite when no database URL is set")
	}
	if c.Database != "" && !strings.HasPrefix(c.Database, "postgres://") && !strings.HasPrefix(c.Database, "postgresql://") {
		bad("database", "%q must be a postgres:// URL (empty for SQLite in data_dir)", c.Database)
	}
	minDur := func(field string, d, min time.Duration) {
		if d < min {
			bad(field, "must be at least %s, got %s", min, d)
		}
	}
	minDur("interval", c.Interval, 100*time.Millisecond)
	if c.NATS.URL != "" && !strings.HasPrefix(c.NATS.URL, "nats://") && !strings.HasPrefix(c.NATS.URL, "tls://") {
		bad("nats.url", "%q must be a nats:// or tls:// URL (empty for the embedded server)", c.NATS.URL)
	}
	if c.NATS.Prefix == "" || strings.ContainsAny(c.NATS.Prefix, " .*>") {
		bad("nats.prefix", "%q must be a non-empty token without spaces, dots or wildcards", c.NATS.Prefix)
	}
	if u := c.Metrics.PrometheusURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		bad("metrics.prometheus_url", "%q must be an http(s) URL (empty for the embedded store)", u)
	}
	minDur("metrics.scrape_interval", c.Metrics.ScrapeInterval, 100*time.Millisecond)
	minDur("metrics.window", c.Metrics.Window, time.Second)
	for i, t := range c.Metrics.Targets {
		if !strings.HasPrefix(t, "http://") && !strings.HasPrefix(t, "https://") {
			bad(fmt.Sprintf("metrics.targets[%d]", i), "%q must be an http(s) URL", t)
		}
	}
	for term, w := range c.Score.Weights {
		switch term {
		case "cpu", "memory", "latency", "inflight", "queue":
		default:
			bad("load_score.weights."+term, "unknown term (want cpu, memory, latency, inflight or queue)")
		}
		if !(w >= 0) || math.IsInf(w, 0) {
			bad("load_score.weights."+term, "must be a finite weight >= 0, got %v", w)
		}
	}
	minDur("load_score.latency", c.Score.Latency, time.Millisecond)
	minDur("load_score.half_life", c.Score.HalfLife, time.Second)
	r := c.Recommend
	if !(r.Setpoint > 0 && r.Setpoint < 1) {
		bad("recommend.setpoint", "must be in (0, 1), got %v", r.Setpoint)
	}
	for name, g := range map[string]float64{"kp": r.Kp, "ki": r.Ki, "kd": r.Kd} {
		if !(g >= 0) || math.IsInf(g, 0) {
			bad("recommend."+name, "must be a finite gain >= 0, got %v", g)
		}
	}
	if !(r.MinChange > 0 && r.MinChange < 1) {
		bad("recommend.min_change", "must be in (0, 1), got %v", r.MinChange)
	}
	if r.MinScores < 1 {
		bad("recommend.min_scores", "must be at least 1, got %d", r.MinScores)
	}
	if r.BaselineSamples < 1 {
		bad("recommend.baseline_samples", "must be at least 1, got %d", r.BaselineSamples)
	}
	c.Bands.Default.validate("bands.default", bad)
	for name, b := range c.Bands.Services {
		b.validate("bands.services."+name, bad)
	}
	g := c.Guardrail
	minDur("guardrail.window", g.Window, time.Second)
	minDur("guardrail.step", g.Step, 100*time.Millisecond)
	if g.Settle < 0 {
		bad("guardrail.settle", "must not be negative, got %s", g.Settle)
	}
	if g.MinSamples < 2 {
		bad("guardrail.min_samples", "must be at least 2, got %d", g.MinSamples)
	} else if g.Step > 0 && g.Window/g.Step < time.Duration(g.MinSamples) {
		bad("guardrail.window", "%s holds fewer than min_samples (%d) steps of %s", g.Window, g.MinSamples, g.Step)
	}
	if !(g.Alpha > 0 && g.Alpha < 0.5) {
		bad("guardrail.alpha", "must be in (0, 0.5), got %v", g.Alpha)
	}
	for name, v := range map[string]float64{"error_tolerance": g.ErrorTolerance, "latency_tolerance": g.LatencyTolerance, "goodput_tolerance": g.GoodputTolerance} {
		if !(v > 0 && v < 10) {
			bad("guardrail."+name, "must be in (0, 10), got %v", v)
		}
	}
	if g.LoadRatio != 0 && !(g.LoadRatio > 1 && g.LoadRatio <= 100) {
		bad("guardrail.load_ratio", "must be above 1 and at most 100 (0: 1.5), got %v", g.LoadRatio)
	}
	if c.Dev {
		if c.Demo.Instances < 1 || c.Demo.Instances > 50 {
			bad("demo.instances", "must be between 1 and 50, got %d", c.Demo.Instances)
		}
		minDur("demo.period", c.Demo.Period, 3*time.Second)
		if c.Demo.BadVersionAfter < 0 {
			bad("demo.bad_version_after", "must not be negative, got %s", c.Demo.BadVersionAfter)
		}
	}
	sortErrs(errs)
	return errors.Join(errs...)
}

func (b Band) validate(field string, bad func(field, format string, args ...any)) {
	if !(b.MaxChangePerHour >= 0 && b.MaxChangePerHour <= 10) {
		bad(field+".max_change_per_hour", "must be in [0, 10], got %v", b.MaxChangePerHour)
	}
	if !(b.Floor >= 0) || math.IsInf(b.Floor, 0) {
		bad(field+".floor", "must be a finite rate >= 0, got %v", b.Floor)
	}
	if !(b.Ceiling >= 0) || math.IsInf(b.Ceiling, 0) {
		bad(field+".ceiling", "must be a finite rate >= 0, got %v", b.Ceiling)
	}
	if b.Ceiling > 0 && b.Floor > b.Ceiling {
		bad(field+".floor", "%v is above the ceiling %v", b.Floor, b.Ceiling)
	}
}

// sortErrs orders errors by message so reports are stable.
func sortErrs(errs []error) {
	for i := 1; i < len(errs); i++ {
		for j := i; j > 0 && errs[j].Error() < errs[j-1].Error(); j-- {
			errs[j], errs[j-1] = errs[j-1], errs[j]
		}
	}
}

// SQLitePath is the database file in dev and SQLite mode.
func (c *Config) SQLitePath() string { return filepath.Join(c.DataDir, "governor.db") }
