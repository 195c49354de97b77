package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"governor.dev/governor/engine/guardrail"
	"governor.dev/governor/rules/versioning"
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
	// Leader tunes the election among replicas (with a Postgres database).
	Leader Leader `yaml:"leader"`
	// Interval between evaluation cycles.
	Interval time.Duration `yaml:"interval"`
	// TickTimeout bounds one evaluation cycle, counted from its tick: a
	// cycle whose reads (Prometheus, the rules database) have not answered
	// by then is cut short, logged and counted, proposes and applies
	// nothing more, and the next cycle starts on time. 0 (the default):
	// nine tenths of interval. At most interval.
	TickTimeout time.Duration `yaml:"tick_timeout"`
	// ShutdownTimeout bounds a stop (SIGTERM): HTTP requests, background
	// work, NATS drains and the closing of the stores get this long in
	// all; what has not finished by then is logged by name and left
	// behind. Keep it below the pod's terminationGracePeriodSeconds
	// (30s by default) minus any preStop hook. Default 25s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	NATS            NATS          `yaml:"nats"`
	Metrics         Metrics       `yaml:"metrics"`
	Score           Score         `yaml:"load_score"`
	// Recommend tunes the recommender.
	Recommend Recommend `yaml:"recommend"`
	Bands     Bands     `yaml:"bands"`
	Guardrail Guardrail `yaml:"guardrail"`
	// Alerts configures alerting besides the built-in rules.
	Alerts Alerts `yaml:"alerts"`
	// AlertLevels are the levels of p99 latency and error ratio the
	// engine alerts on.
	AlertLevels AlertLevels `yaml:"alert_levels"`
	// State is how the leader persists what it learned and reported, so
	// a new leader continues where it stopped.
	State State `yaml:"state"`
	Demo  Demo  `yaml:"demo"`
}

// Leader tunes the election of the replica that evaluates (package
// engine/leader, PostgresOptions). It applies with a Postgres database;
// with SQLite the one replica always leads.
type Leader struct {
	// MaxClockSkew is how far ahead of the database clock a replica's
	// clock may run and still claim ticks. Ticks are named by the
	// replicas' wall clocks and only move forward, so a replica whose
	// clock runs ahead by more than this claims no tick (logged, with
	// the skew): otherwise the other replicas could claim nothing until
	// their clocks caught up. It is also the longest the others can be
	// held back by a leader ahead by less. Between 100ms and 10m;
	// default 10s.
	MaxClockSkew time.Duration `yaml:"max_clock_skew"`
}

// State configures the engine state the leader persists in the rules
// database (engine/evaluate State, table governor_engine_state): alert
// levels crossed, open breakers, instances in a bad state, every
// service's healthy baseline and every downstream's anomaly detector.
type State struct {
	// Disabled keeps the state in memory only: a new leader starts
	// from nothing (alerts re-raised, detectors and baselines cold).
	Disabled bool `yaml:"disabled"`
	// Every spreads the baselines and detectors over this many cycles:
	// each cycle writes about 1/Every of them, so each is at most Every
	// cycles old at a takeover. Default 30.
	Every int `yaml:"every"`
	// MaxAge: state older than this at a takeover is ignored (logged)
	// and pruned, and a service absent from the signals for this long is
	// forgotten (its controller, baseline and downstream detectors start
	// anew if it comes back). Must exceed every x interval. Default 1h.
	MaxAge time.Duration `yaml:"max_age"`
}

// Alerts configures alerting.
type Alerts struct {
	// ConfigFile is the alerting document (package alerts/config: rules,
	// routes, timing, inhibition, receivers as JSON); empty runs the
	// built-in rules with a receiver that only logs. Also
	// GOVERNOR_ALERTS_CONFIG and -alerts-config. Routing saved in the
	// database from the UI supersedes it; the file is the bootstrap.
	ConfigFile string `yaml:"config_file"`
	// SilenceRetention keeps an ended silence this long (listed, and in the
	// store) before it is deleted; 0: 120h, as Alertmanager's retention.
	SilenceRetention time.Duration `yaml:"silence_retention"`
	// ReceiverDroppingFor is how long a receiver's full queue may keep
	// dropping notifications before the receiver counts as failing
	// (GovernorAlertReceiverFailing); 0: 10m.
	ReceiverDroppingFor time.Duration `yaml:"receiver_dropping_for"`
}

// AlertLevels are the levels the evaluator compares every service's p99
// latency and error ratio with (package engine/evaluate, AlertLevels).
type AlertLevels struct {
	// Disabled turns the comparison off.
	Disabled bool `yaml:"disabled"`
	// LatencyWarn and LatencyCritical fix the p99 levels for every
	// service; zero (the default) uses the levels the engine learns from
	// each service's healthy baseline (engine/thresholds) once it is
	// conclusive.
	LatencyWarn     time.Duration `yaml:"latency_warn"`
	LatencyCritical time.Duration `yaml:"latency_critical"`
	// LearnedMargin floors the learned p99 levels: warn at least this
	// share above the healthy baseline, critical twice as far.
	LearnedMargin float64 `yaml:"learned_margin"`
	// ErrorRatioLevels is "learned" (the default): the error-ratio levels
	// are learned from each service's healthy baseline, with
	// error_ratio_warn and error_ratio_critical as floors (a learned level
	// never goes below them; both 0: no floor, no level while the
	// baseline is inconclusive), or "configured": error_ratio_warn and
	// error_ratio_critical are the levels. A service's own
	// error_ratio_warn and error_ratio_critical (alert_levels.services)
	// are its levels either way.
	ErrorRatioLevels string `yaml:"error_ratio_levels"`
	// ErrorRatioWarn and ErrorRatioCritical are the error-ratio levels,
	// or their floors when learned: 0 < warn < critical < 1 (a level is
	// crossed when the ratio rises above it, which it cannot above 1).
	ErrorRatioWarn     float64 `yaml:"error_ratio_warn"`
	ErrorRatioCritical float64 `yaml:"error_ratio_critical"`
	// MinRequestRate: below this many requests per second the error
	// ratio is not judged (one failure in three requests is not an
	// incident).
	MinRequestRate float64 `yaml:"min_request_rate"`
	// Refresh is how often a level still crossed is reported again.
	Refresh time.Duration `yaml:"refresh"`
	// Services override the levels of single services.
	Services map[string]ServiceLevels `yaml:"services"`
}

// ServiceLevels are one service's alert levels; zero fields keep the
// defaults of alert_levels.
type ServiceLevels struct {
	// Disabled: the service is not compared at all.
	Disabled bool `yaml:"disabled"`
	// LatencyWarn and LatencyCritical fix the service's p99 levels (both
	// or neither).
	LatencyWarn     time.Duration `yaml:"latency_warn"`
	LatencyCritical time.Duration `yaml:"latency_critical"`
	// ErrorRatioWarn and ErrorRatioCritical replace the error-ratio
	// levels (both or neither; 0 < warn < critical < 1).
	ErrorRatioWarn     float64 `yaml:"error_ratio_warn"`
	ErrorRatioCritical float64 `yaml:"error_ratio_critical"`
}

// NATS is where rules are distributed.
type NATS struct {
	// URL of the cluster; empty starts an embedded server.
	URL string `yaml:"url"`
	// Prefix of the bucket and subjects.
	Prefix string `yaml:"prefix"`
	// TransitionRetention is how long the delivery ledger keeps the
	// history of what each instance ran (ACK, NACK, GONE transitions);
	// each known instance keeps its newest transition however old.
	// Default 720h (30 days), at least 1h.
	TransitionRetention time.Duration `yaml:"transition_retention"`
}

// Metrics is where signals come from.
type Metrics struct {
	// PrometheusURL of a query API; empty uses the embedded store.
	PrometheusURL string `yaml:"prometheus_url"`
	// ScrapeInterval of the embedded store.
	ScrapeInterval time.Duration `yaml:"scrape_interval"`
	// Targets the embedded store scrapes (besides the demo fleet).
	Targets []string `yaml:"targets"`
	// Window is the rate window of the signal queries. The guardrail's
	// settle (guardrail.settle) must be at least this long.
	Window time.Duration `yaml:"window"`
	// EmbeddedMaxSeries bounds the series the embedded store holds in
	// memory (embedded.Options.MaxSeries): past it a new series is
	// refused (its samples dropped, counted and logged) while the series
	// held keep their samples, so a label with unbounded values cannot
	// exhaust the engine's memory. A series costs about 1-2 KiB. 0: the
	// store's default, 4,000,000; negative: no limit; at least 1000
	// otherwise. Unused with prometheus_url.
	EmbeddedMaxSeries int `yaml:"embedded_max_series"`
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
	// Deadband is the load-score error the controller treats as zero.
	Deadband float64 `yaml:"deadband"`
	// MaxStepPerSecond bounds the ceiling's move per second, as a share of
	// the ceiling the controller started from.
	MaxStepPerSecond float64 `yaml:"max_step_per_second"`
	// Binding: a ceiling binds when the offered rate is at least this
	// share of it.
	Binding float64 `yaml:"binding"`
	// OpenDeadband: an open engine proposal is kept while a new
	// recommendation moves its ceilings and concurrency bounds by less
	// than this share.
	OpenDeadband float64 `yaml:"open_deadband"`
	// EvidenceRefresh is the least time between two revisions of an open
	// engine proposal that only refresh its evidence (its ruleset stays);
	// a revision that moves the ruleset is never held back. 0 refreshes
	// the evidence at every evaluation.
	EvidenceRefresh time.Duration `yaml:"evidence_refresh"`
	// RollbackHold is how long after a rollback of a version that applied
	// itself a ceiling change in the same direction waits for a person
	// instead of applying itself. 0: no hold.
	RollbackHold time.Duration `yaml:"rollback_hold"`
	// SlowCallMin and SlowCallMax bound the recommended breaker slow-call
	// threshold; SlowCallDeadband is the relative change below which it is
	// left alone; SlowCallFactor multiplies the healthy p99 baseline.
	SlowCallMin      time.Duration `yaml:"slow_call_min"`
	SlowCallMax      time.Duration `yaml:"slow_call_max"`
	SlowCallDeadband float64       `yaml:"slow_call_deadband"`
	SlowCallFactor   float64       `yaml:"slow_call_factor"`
	// HealthyErrorRatio: an interval with more errors does not shape the
	// healthy baselines.
	HealthyErrorRatio float64 `yaml:"healthy_error_ratio"`
	// WarnSpreads and CriticalSpreads place the learned p99 alert levels
	// above the healthy baseline, in robust spreads.
	WarnSpreads     float64 `yaml:"warn_spreads"`
	CriticalSpreads float64 `yaml:"critical_spreads"`
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
	Default Band `yaml:"default"`
	// Services override the default band of single services: the keys a
	// service's band leaves out are the default's (as written in the same
	// file, wherever it stands), so a band that only sets a floor keeps
	// the default's max_change_per_hour rather than 0, which would hold
	// every change of the service for a person.
	Services map[string]Band `yaml:"services"`
}

// bandsYAML is Bands without its UnmarshalYAML.
type bandsYAML Bands

// UnmarshalYAML decodes the bands over b, each service's band over the
// default band. It takes the decoder's own unmarshal function so that
// unknown and duplicate keys are refused as everywhere else.
func (b *Bands) UnmarshalYAML(unmarshal func(any) error) error {
	d := bandsYAML{Default: b.Default}
	if err := unmarshal(&d); err != nil {
		return err
	}
	// Which keys each service's band sets: a key left out is the
	// default's, a key set to 0 is 0.
	var written struct {
		Default  yaml.Node                       `yaml:"default"` // known, not needed
		Services map[string]map[string]yaml.Node `yaml:"services"`
	}
	if err := unmarshal(&written); err != nil {
		return err
	}
	services := maps.Clone(b.Services) // never the map of the base configuration
	if services == nil && len(d.Services) > 0 {
		services = make(map[string]Band, len(d.Services))
	}
	for name, band := range d.Services {
		keys := written.Services[name]
		if _, ok := keys["manual"]; !ok {
			band.Manual = d.Default.Manual
		}
		if _, ok := keys["max_change_per_hour"]; !ok {
			band.MaxChangePerHour = d.Default.MaxChangePerHour
		}
		if _, ok := keys["floor"]; !ok {
			band.Floor = d.Default.Floor
		}
		if _, ok := keys["ceiling"]; !ok {
			band.Ceiling = d.Default.Ceiling
		}
		services[name] = band
	}
	b.Default, b.Services = d.Default, services
	return nil
}

// Guardrail tunes the before/after comparison.
type Guardrail struct {
	Window time.Duration `yaml:"window"`
	// Settle is how long after activation the guardrail waits before it
	// compares; at least metrics.window, so that no rate it compares
	// reaches back before the version.
	Settle time.Duration `yaml:"settle"`
	// Step is the spacing of the samples compared (default 10s). A multiple
	// of Interval puts a cycle on every sample time, whose own signal read
	// gives the guardrail its samples; the sample times between ticks are
	// read from the metrics store instead (engine/guardrail, Reads).
	Step       time.Duration `yaml:"step"`
	MinSamples int           `yaml:"min_samples"`
	Alpha      float64       `yaml:"alpha"`
	// ErrorTolerance is the tolerated absolute rise of the error ratio,
	// LatencyTolerance the tolerated relative rise of p99 latency (below
	// 10), GoodputTolerance the tolerated relative drop of the goodput
	// share. A version is rolled back when its effect exceeds the
	// tolerance, so the error and goodput tolerances are below 1: neither
	// effect can exceed 1.
	ErrorTolerance   float64 `yaml:"error_tolerance"`
	LatencyTolerance float64 `yaml:"latency_tolerance"`
	GoodputTolerance float64 `yaml:"goodput_tolerance"`
	// LoadRatio is how far the offered load may move between the
	// guardrail's windows for them to count as comparable; 0 means 1.5.
	LoadRatio float64 `yaml:"load_ratio"`
	// MaxWait: a version still inconclusive this long after Settle is
	// recorded as inconclusive for good; at least Window, 0 means three
	// windows.
	MaxWait time.Duration `yaml:"max_wait"`
	// Recover is how long a version may have been live, when the engine
	// starts or takes the lead, and still be judged after the fact on the
	// windows around its activation (a restart would otherwise forget a
	// regression whose rollback was being retried); 0 means 24h, a
	// negative value judges nothing after the fact.
	Recover time.Duration `yaml:"recover"`
	// Drift is how far back the cumulative check reaches: each version is
	// also compared with the window before the oldest version activated
	// within Drift before it, so small steps each within tolerance do not
	// add up (counted only when the offered load is within 1.1x of that
	// window's and the versions' own steps add up beyond the tolerance
	// too); 0 means 1h, a negative value turns the check off.
	Drift time.Duration `yaml:"drift"`
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

// minEmbeddedSeries is the least metrics.embedded_max_series accepted
// (besides 0 and negative values).
const minEmbeddedSeries = 1000

// Default returns the production defaults.
func Default() Config {
	return Config{
		Listen:   "127.0.0.1:7070",
		DataDir:  "./var",
		Interval: 10 * time.Second,
		Leader:   Leader{MaxClockSkew: 10 * time.Second},
		NATS:     NATS{Prefix: "governor", TransitionRetention: 30 * 24 * time.Hour},
		Metrics:  Metrics{ScrapeInterval: 15 * time.Second, Window: time.Minute},
		Score:    Score{Latency: 250 * time.Millisecond, HalfLife: 30 * time.Second},
		Recommend: Recommend{Setpoint: 0.7, Kp: 1, Ki: 0.05, MinChange: 0.05, MinScores: 3,
			BaselineSamples: 2880, Deadband: 0.05, MaxStepPerSecond: 0.01, Binding: 0.9, OpenDeadband: 0.1, EvidenceRefresh: time.Minute, RollbackHold: time.Hour,
			SlowCallMin: 10 * time.Millisecond, SlowCallMax: 30 * time.Second, SlowCallDeadband: 0.2, SlowCallFactor: 2,
			HealthyErrorRatio: 0.01, WarnSpreads: 4, CriticalSpreads: 8},
		AlertLevels: AlertLevels{LearnedMargin: 0.25, ErrorRatioLevels: ErrorLevelsLearned, ErrorRatioWarn: 0.01, ErrorRatioCritical: 0.05,
			MinRequestRate: 1, Refresh: time.Minute},
		State: State{Every: 30, MaxAge: time.Hour},
		Bands: Bands{Default: Band{MaxChangePerHour: 0.1}},
		Guardrail: Guardrail{Window: 5 * time.Minute, Settle: time.Minute, Step: 10 * time.Second, MinSamples: 10,
			Alpha: 0.05, ErrorTolerance: 0.01, LatencyTolerance: 0.25, GoodputTolerance: 0.2},
		Demo: Demo{Instances: 2, Period: 90 * time.Second},

		// Within Kubernetes' default grace period of 30s, with room for
		// the preStop hook and the exit.
		ShutdownTimeout: 25 * time.Second,
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
	// Settle is at least Metrics.Window: no rate after activation reaches
	// back before it.
	c.Guardrail = Guardrail{Window: 30 * time.Second, Settle: 10 * time.Second, Step: 2 * time.Second, MinSamples: 6,
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
	// A second document would be ignored: settings after a stray "---"
	// silently not applied.
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return base, fmt.Errorf("%w: %w", ErrInvalid, err)
	case !emptyDocument(&extra):
		return base, fmt.Errorf("%w: line %d: a second YAML document: the file must hold one (remove the \"---\")", ErrInvalid, extra.Line)
	}
	return c, nil
}

// emptyDocument reports whether n, a decoded document, holds nothing (a
// trailing "---").
func emptyDocument(n *yaml.Node) bool {
	for n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	return n.Kind == 0 || (n.Kind == yaml.DocumentNode && len(n.Content) == 0) || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
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
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (%v)", c.Listen, err)
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		bad("listen", "%q: port %q is not a port number from 0 to 65535", c.Listen, port)
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
	switch d := c.TickTimeout; {
	case d < 0:
		bad("tick_timeout", "must not be negative (0: nine tenths of interval), got %s", d)
	case d > 0 && d < 10*time.Millisecond:
		bad("tick_timeout", "must be at least 10ms (0: nine tenths of interval), got %s", d)
	case d > c.Interval && c.Interval > 0:
		// A longer cycle runs into the next tick, which is then skipped.
		bad("tick_timeout", "%s exceeds interval %s: a cycle that long skips the next (0: nine tenths of interval)", d, c.Interval)
	}
	if d := c.ShutdownTimeout; d <= 0 {
		bad("shutdown_timeout", "must be a positive duration (how long a stop may take; default 25s), got %s", d)
	}
	if d := c.Leader.MaxClockSkew; d < 100*time.Millisecond || d > 10*time.Minute {
		// Below 100ms, ordinary clock jitter keeps a replica from claiming;
		// above 10m, a replica that far ahead holds the others back that
		// long.
		bad("leader.max_clock_skew", "must be between 100ms and 10m (how far a replica's clock may run ahead of the database's), got %s", d)
	}
	if c.NATS.URL != "" {
		for _, u := range strings.Split(c.NATS.URL, ",") {
			if problem := urlProblem(strings.TrimSpace(u), "nats", "tls"); problem != "" {
				bad("nats.url", "%q must be a nats:// or tls:// URL, or a comma-separated list of them (empty for the embedded server): %s",
					c.NATS.URL, problem)
				break
			}
		}
	}
	if c.NATS.Prefix == "" || strings.ContainsAny(c.NATS.Prefix, " .*>") {
		bad("nats.prefix", "%q must be a non-empty token without spaces, dots or wildcards", c.NATS.Prefix)
	}
	minDur("nats.transition_retention", c.NATS.TransitionRetention, time.Hour)
	if u := c.Metrics.PrometheusURL; u != "" {
		if problem := urlProblem(u, "http", "https"); problem != "" {
			bad("metrics.prometheus_url", "%q must be an http(s) URL (empty for the embedded store): %s", u, problem)
		}
	}
	minDur("metrics.scrape_interval", c.Metrics.ScrapeInterval, 100*time.Millisecond)
	minDur("metrics.window", c.Metrics.Window, time.Second)
	if c.Metrics.PrometheusURL == "" && c.Metrics.ScrapeInterval > 0 && c.Metrics.Window < 2*c.Metrics.ScrapeInterval {
		// Every rate-based signal would read "no series" while the
		// targets are up.
		bad("metrics.window", "%s is shorter than two scrape intervals of %s (metrics.scrape_interval): a rate needs two samples in every window",
			c.Metrics.Window, c.Metrics.ScrapeInterval)
	}
	if n := c.Metrics.EmbeddedMaxSeries; n > 0 && n < minEmbeddedSeries {
		// The engine's own signals would be refused with the first few
		// instances: every read empty while the fleet reports.
		bad("metrics.embedded_max_series", "must be at least %d (0: 4000000; negative: no limit), got %d", minEmbeddedSeries, n)
	}
	for i, t := range c.Metrics.Targets {
		if problem := urlProblem(t, "http", "https"); problem != "" {
			bad(fmt.Sprintf("metrics.targets[%d]", i), "%q must be an http(s) URL: %s", t, problem)
		}
	}
	positive := false
	for term, w := range c.Score.Weights {
		switch term {
		case "cpu", "memory", "latency", "inflight", "queue":
			positive = positive || w > 0
		default:
			bad("load_score.weights."+term, "unknown term (want cpu, memory, latency, inflight or queue)")
		}
		if !(w >= 0) || math.IsInf(w, 0) {
			bad("load_score.weights."+term, "must be a finite weight >= 0, got %v", w)
		}
	}
	if len(c.Score.Weights) > 0 && !positive {
		bad("load_score.weights", "no term has a positive weight: the load score would be unknown (omit weights for the defaults)")
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
	if r.Kp == 0 && r.Ki == 0 && r.Kd == 0 {
		bad("recommend.kp", "kp, ki and kd are all 0: the controller would never move the ceiling (omit them for the defaults)")
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
	if !(r.Deadband >= 0 && r.Deadband < 0.5) {
		bad("recommend.deadband", "must be in [0, 0.5), got %v", r.Deadband)
	}
	if !(r.MaxStepPerSecond > 0 && r.MaxStepPerSecond <= 1) {
		bad("recommend.max_step_per_second", "must be in (0, 1], got %v", r.MaxStepPerSecond)
	}
	if !(r.Binding > 0 && r.Binding <= 1) {
		bad("recommend.binding", "must be in (0, 1], got %v", r.Binding)
	}
	if !(r.OpenDeadband > 0 && r.OpenDeadband < 1) {
		bad("recommend.open_deadband", "must be in (0, 1), got %v", r.OpenDeadband)
	}
	if r.EvidenceRefresh < 0 || r.EvidenceRefresh > 24*time.Hour {
		bad("recommend.evidence_refresh", "must be between 0 (every evaluation) and 24h, got %s", r.EvidenceRefresh)
	}
	if r.RollbackHold < 0 || r.RollbackHold > 7*24*time.Hour {
		bad("recommend.rollback_hold", "must be between 0 (no hold) and 168h, got %s", r.RollbackHold)
	}
	minDur("recommend.slow_call_min", r.SlowCallMin, time.Millisecond)
	if r.SlowCallMax < r.SlowCallMin || r.SlowCallMax > time.Hour {
		bad("recommend.slow_call_max", "must be between slow_call_min (%s) and 1h, got %s", r.SlowCallMin, r.SlowCallMax)
	}
	if !(r.SlowCallDeadband > 0 && r.SlowCallDeadband < 1) {
		bad("recommend.slow_call_deadband", "must be in (0, 1), got %v", r.SlowCallDeadband)
	}
	if !(r.SlowCallFactor >= 1 && r.SlowCallFactor <= 100) {
		bad("recommend.slow_call_factor", "must be in [1, 100], got %v", r.SlowCallFactor)
	}
	if !(r.HealthyErrorRatio >= 0 && r.HealthyErrorRatio <= 1) {
		bad("recommend.healthy_error_ratio", "must be in [0, 1], got %v", r.HealthyErrorRatio)
	}
	if !(r.WarnSpreads > 0 && r.WarnSpreads <= 100) {
		bad("recommend.warn_spreads", "must be in (0, 100], got %v", r.WarnSpreads)
	} else if !(r.CriticalSpreads > r.WarnSpreads && r.CriticalSpreads <= 100) {
		bad("recommend.critical_spreads", "must be above warn_spreads (%v) and at most 100, got %v", r.WarnSpreads, r.CriticalSpreads)
	}
	c.AlertLevels.validate(bad)
	c.AlertLevels.validateLevelCadence(c.Interval, bad)
	c.State.validate(c.Interval, bad)
	c.Bands.Default.validate("bands.default", bad)
	for name, b := range c.Bands.Services {
		field := serviceField("bands.services", name, bad)
		b.validate(field, bad)
	}
	g := c.Guardrail
	minDur("guardrail.window", g.Window, time.Second)
	minDur("guardrail.step", g.Step, 100*time.Millisecond)
	if g.Settle < 0 {
		bad("guardrail.settle", "must not be negative, got %s", g.Settle)
	} else if settle := cmp.Or(g.Settle, guardrail.DefaultOptions().Settle); settle < c.Metrics.Window {
		// The first points after activation would be rates over windows
		// reaching back before the version: the old version's traffic
		// counted as the new one's.
		what := g.Settle.String()
		if g.Settle == 0 {
			what = "0 (the guardrail's default " + settle.String() + ")"
		}
		bad("guardrail.settle", "%s is shorter than metrics.window (%s): the first points after activation would be rates that include data from before the version; set it to at least %s",
			what, c.Metrics.Window, c.Metrics.Window)
	}
	if g.MinSamples < 2 {
		bad("guardrail.min_samples", "must be at least 2, got %d", g.MinSamples)
	} else if g.Step > 0 && g.Window/g.Step < time.Duration(g.MinSamples) {
		bad("guardrail.window", "%s holds fewer than min_samples (%d) steps of %s", g.Window, g.MinSamples, g.Step)
	}
	if !(g.Alpha > 0 && g.Alpha < 0.5) {
		bad("guardrail.alpha", "must be in (0, 0.5), got %v", g.Alpha)
	}
	// A version is rolled back when its effect rises above the tolerance.
	// The error ratio rises by at most 1 and the goodput share drops by at
	// most all of it, so a tolerance of 1 or more would never roll back;
	// the p99 latency's relative rise has no maximum.
	for name, v := range map[string]float64{"error_tolerance": g.ErrorTolerance, "goodput_tolerance": g.GoodputTolerance} {
		if !(v > 0 && v < 1) {
			bad("guardrail."+name, "must be in (0, 1), got %v: the change it tolerates is at most 1, so a tolerance of 1 or more never rolls back", v)
		}
	}
	if v := g.LatencyTolerance; !(v > 0 && v < 10) {
		bad("guardrail.latency_tolerance", "must be in (0, 10), got %v", v)
	}
	if g.LoadRatio != 0 && !(g.LoadRatio > 1 && g.LoadRatio <= 100) {
		bad("guardrail.load_ratio", "must be above 1 and at most 100 (0: 1.5), got %v", g.LoadRatio)
	}
	if g.MaxWait < 0 {
		bad("guardrail.max_wait", "must not be negative, got %s", g.MaxWait)
	} else if g.MaxWait > 0 && g.MaxWait < g.Window {
		// An inconclusive verdict would be final before one full window
		// after activation was seen.
		bad("guardrail.max_wait", "%s is shorter than guardrail.window (%s): a version would be recorded as inconclusive for good before a full window after its activation was seen; set it to at least %s (0: three windows)",
			g.MaxWait, g.Window, g.Window)
	}
	if f := c.Alerts.ConfigFile; f != "" && strings.TrimSpace(f) != f {
		bad("alerts.config_file", "%q has leading or trailing spaces", f)
	}
	if d := c.Alerts.SilenceRetention; d < 0 {
		bad("alerts.silence_retention", "must not be negative (0: 120h), got %s", d)
	}
	if d := c.Alerts.ReceiverDroppingFor; d < 0 {
		bad("alerts.receiver_dropping_for", "must not be negative (0: 10m), got %s", d)
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

// validateLatency checks a pair of p99 levels: both zero, or 0 < warn <
// critical.
func validateLatency(field string, warn, crit time.Duration, bad func(field, format string, args ...any)) {
	if warn < 0 {
		bad(field+".latency_warn", "must not be negative, got %s", warn)
	}
	if crit < 0 {
		bad(field+".latency_critical", "must not be negative, got %s", crit)
	}
	if (warn == 0) != (crit == 0) {
		bad(field+".latency_critical", "set both latency_warn and latency_critical, or neither (learned levels)")
	} else if warn > 0 && crit <= warn {
		bad(field+".latency_critical", "%s must be above latency_warn %s", crit, warn)
	}
}

// validateErrors checks a pair of error-ratio levels: 0 < warn < critical
// < 1. A level alerts when the ratio rises above it, so a level of 1, the
// ratio's maximum, is never crossed (as a floor of learned levels too).
func validateErrors(field string, warn, crit float64, bad func(field, format string, args ...any)) {
	if !(warn > 0 && warn < 1) {
		bad(field+".error_ratio_warn", "must be in (0, 1), got %v", warn)
	} else if !(crit > warn && crit < 1) {
		bad(field+".error_ratio_critical", "must be above error_ratio_warn (%v) and below 1 (the error ratio's maximum; 1 is never crossed), got %v", warn, crit)
	}
}

// The values of alert_levels.error_ratio_levels.
const (
	ErrorLevelsLearned    = "learned"
	ErrorLevelsConfigured = "configured"
)

func (l AlertLevels) validate(bad func(field, format string, args ...any)) {
	validateLatency("alert_levels", l.LatencyWarn, l.LatencyCritical, bad)
	switch l.ErrorRatioLevels {
	case ErrorLevelsLearned:
		if l.ErrorRatioWarn != 0 || l.ErrorRatioCritical != 0 {
			validateErrors("alert_levels", l.ErrorRatioWarn, l.ErrorRatioCritical, bad)
		}
	case ErrorLevelsConfigured:
		validateErrors("alert_levels", l.ErrorRatioWarn, l.ErrorRatioCritical, bad)
	default:
		bad("alert_levels.error_ratio_levels", "must be %q or %q, got %q", ErrorLevelsLearned, ErrorLevelsConfigured, l.ErrorRatioLevels)
	}
	for name, s := range l.Services {
		field := serviceField("alert_levels.services", name, bad)
		validateLatency(field, s.LatencyWarn, s.LatencyCritical, bad)
		if s.ErrorRatioWarn != 0 || s.ErrorRatioCritical != 0 {
			validateErrors(field, s.ErrorRatioWarn, s.ErrorRatioCritical, bad)
		}
	}
	if !(l.LearnedMargin >= 0 && l.LearnedMargin <= 10) {
		bad("alert_levels.learned_margin", "must be in [0, 10], got %v", l.LearnedMargin)
	}
	if !(l.MinRequestRate >= 0) || math.IsInf(l.MinRequestRate, 0) {
		bad("alert_levels.min_request_rate", "must be a finite rate >= 0, got %v", l.MinRequestRate)
	}
	if l.Refresh < time.Second || l.Refresh > 2*time.Minute {
		bad("alert_levels.refresh", "must be between 1s and 2m (the alert rule resolves 5m after the last report), got %s", l.Refresh)
	}
}

// levelResolveAfter is the resolve_after of the built-in alert rule
// GovernorSignalAboveLevel (alerts/rule): a level alert not reported again
// within it resolves.
const levelResolveAfter = 5 * time.Minute

// validateLevelCadence checks that a level still crossed is reported again
// before its alert resolves: reports come at cycles, up to interval +
// refresh apart. A longer gap resolves the alert while the reading stays
// above the level, and the rule's 5m `for` is never reached: no page.
func (l AlertLevels) validateLevelCadence(interval time.Duration, bad func(field, format string, args ...any)) {
	if l.Disabled || interval <= 0 || l.Refresh <= 0 {
		return
	}
	if gap := interval + l.Refresh; gap >= levelResolveAfter {
		bad("interval", "%s plus alert_levels.refresh %s is %s: a crossed alert level is reported at most that often, and its alert resolves %s after the last report (shorten either, or set alert_levels.disabled)",
			interval, l.Refresh, gap, levelResolveAfter)
	}
}

// serviceField checks the key name of the per-service map at path with
// the rules store's rule for service names, and returns the key's field
// path, path["name"]: names may hold dots, so path.name would be
// ambiguous. A malformed name matches no service's rules or signals and
// would never apply. A well-formed name is accepted whether or not such a
// service exists: the configuration cannot know.
func serviceField(path, name string, bad func(field, format string, args ...any)) string {
	field := fmt.Sprintf("%s[%q]", path, name) // as ServiceKeys names it
	var ie *versioning.InputError
	if err := versioning.ValidateService(name); errors.As(err, &ie) {
		for _, fe := range ie.Errors {
			bad(field, "%s", fe.Problem)
		}
	} else if err != nil {
		bad(field, "%v", err)
	}
	return field
}

// urlProblem says what is wrong with u as a URL of one of schemes ("" if
// nothing): a URL without a host would not fail until it is used, or, for
// NATS, would quietly reach a server on localhost.
func urlProblem(u string, schemes ...string) string {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return err.Error()
	case !slices.Contains(schemes, p.Scheme) || !strings.HasPrefix(u, p.Scheme+"://"):
		return "want the scheme " + strings.Join(schemes, ":// or ") + "://"
	case p.Hostname() == "":
		return "no host"
	}
	return ""
}

// sortErrs orders errors by message so reports are stable.
func sortErrs(errs []error) {
	for i := 1; i < len(errs); i++ {
		for j := i; j > 0 && errs[j].Error() < errs[j-1].Error(); j-- {
			errs[j], errs[j-1] = errs[j-1], errs[j]
		}
	}
}

func (s State) validate(interval time.Duration, bad func(field, format string, args ...any)) {
	if s.Disabled {
		return
	}
	if s.Every < 1 || s.Every > 10000 {
		bad("state.every", "must be 1..10000 cycles, got %d", s.Every)
		return
	}
	if min := time.Duration(s.Every) * interval; s.MaxAge <= min || s.MaxAge < time.Minute {
		bad("state.max_age", "must be at least 1m and above every x interval (%d x %s = %s), got %s", s.Every, interval, min, s.MaxAge)
	}
}

// ServiceKey is one entry of a per-service section: the service it names
// and its field path.
type ServiceKey struct {
	Service string
	Field   string
}

// ServiceKeys lists the entries of every per-service section
// (alert_levels.services, bands.services), ordered by field, so the engine
// can say which of them name a service it does not know: a well-formed
// name valid here may still be misspelt.
func (c *Config) ServiceKeys() []ServiceKey {
	var keys []ServiceKey
	for name := range c.AlertLevels.Services {
		keys = append(keys, ServiceKey{name, fmt.Sprintf("alert_levels.services[%q]", name)})
	}
	for name := range c.Bands.Services {
		keys = append(keys, ServiceKey{name, fmt.Sprintf("bands.services[%q]", name)})
	}
	slices.SortFunc(keys, func(a, b ServiceKey) int { return strings.Compare(a.Field, b.Field) })
	return keys
}

// EvalTimeout is how long an evaluation cycle may run from its tick:
// tick_timeout, or nine tenths of interval when it is 0.
func (c *Config) EvalTimeout() time.Duration {
	if c.TickTimeout > 0 {
		return c.TickTimeout
	}
	return c.Interval * 9 / 10
}

// SQLitePath is the database file in dev and SQLite mode.
func (c *Config) SQLitePath() string { return filepath.Join(c.DataDir, "governor.db") }
